"""A killed curation resumes where it stopped (img2dataset's incremental mode, with the funnel
kept exact).

While a run goes, each step writes every batch it finishes to OUTPUT/_resume/step-K/ as one
Parquet file, whole or not at all (`write`, called by the guarded operator, on the worker that
made the batch). Started again with the same input and settings (`fingerprint`), the run reads
them back: a row goes on after the deepest step that wrote it, and is neither parsed nor
fetched again; the input is read again only for the rows no step wrote, and a read unit
(a byte range or a row group) all of whose rows were written is not read at all. The global
passes (duplicates, the entity-frequency count, the split, the writes) run over all rows
either way, so the output and its funnel equal an uninterrupted run's. A row that raised
(internal_error) is done again: the rerun may be the one with the fix. The journal goes
once the output is complete.

Rows are known by `position` (their read unit and row there), not `id`: two identical
input lines share an id and are still two candidates.
"""

from __future__ import annotations

import hashlib
import posixpath
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import ray
import ray.data

from conceptual import storage
from conceptual.errors import INTERNAL_ERROR
from conceptual.pipelines.dataflow.readers import (
    ROW_BITS,
    map_read,
    read_row_groups,
    without_positions,
)

RESUME = "_resume"
FINGERPRINT = "fingerprint.json"
UNITS = "units"  # units/<unit>: how many rows a read unit holds, written when it is read
# step-K/one-row/: rows a step journals one at a time as they are done (fetching), until its
# batch is written whole. Its files sort after the whole batches' (hex names), so a kill
# between the two leaves a row's own file second, and the scan drops it, not the batch.
ONE_ROW = "one-row"


def fingerprint(input_uri: str, settings: dict[str, Any]) -> dict[str, Any]:
    """What a resumed run must share with the run it resumes: the input files (path, size and
    a digest of their bytes) and every setting that decides a row's outcome or position."""
    return {"input": storage.content_identity(input_uri), "settings": settings}


def write_batch(batch: pa.Table, filesystem, directory: str, name: str | None = None) -> None:
    """One finished batch into `directory` (the journal's, or an output's), whole or not at
    all, as `name` (by default `batch_name(batch)`)."""
    if not batch.num_rows:
        return
    sink = pa.BufferOutputStream()
    pq.write_table(batch, sink)
    path = posixpath.join(directory, name or batch_name(batch))
    storage.write_atomic(filesystem, path, sink.getvalue().to_pybytes())


def batch_name(batch: pa.Table) -> str:
    """A file name from the batch's rows' positions, so a batch that Ray retries overwrites
    its own file instead of adding a second one."""
    positions = batch["position"].to_numpy(zero_copy_only=False).astype(np.int64)
    digest = hashlib.sha1(positions.tobytes()).hexdigest()[:16]
    return f"{int(positions.min()):016x}-{digest}.parquet"


@dataclass
class Journal:
    """The journal of one output: what earlier attempts of this run finished."""

    uri: str  # OUTPUT/_resume
    steps: int
    files: list[list[str]] = field(default_factory=list)  # per step, its Parquet files
    done: list[np.ndarray] = field(default_factory=list)  # per step, the positions it wrote
    failed: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # raised

    @classmethod
    def open(cls, output_uri: str, fingerprint: dict[str, Any], steps: int) -> Journal:
        """The journal at OUTPUT/_resume, emptied first when it belongs to another input or
        other settings."""
        journal = cls(storage.join(output_uri, RESUME), steps)
        marker = storage.join(journal.uri, FINGERPRINT)
        if storage.exists(journal.uri) and (
            not storage.exists(marker) or storage.read_json(marker) != fingerprint
        ):
            storage.delete(journal.uri)
        if not storage.exists(marker):
            storage.write_json(marker, fingerprint)
        journal._scan()
        return journal

    def _scan(self) -> None:
        fs, _ = storage.resolve(self.uri)
        failed = []
        for step in range(self.steps):
            files, done = [], []
            for path in self._files(self.step_uri(step)):
                with fs.open_input_file(path) as f:
                    table = pq.read_table(f, columns=["position", "reason"])
                positions = table["position"].to_numpy().astype(np.int64)
                # Rows in two files (a retried batch cut differently): the second file goes,
                # and its other rows are simply done again.
                if done and np.isin(positions, np.concatenate(done)).any():
                    fs.delete_file(path)
                    continue
                files.append(path)
                done.append(positions)
                # A row that raised is done again: the rerun may be the fix.
                raised = pc.equal(table["reason"], INTERNAL_ERROR).fill_null(False)
                failed.append(positions[raised.to_numpy(zero_copy_only=False)])
            self.files.append(files)
            self.done.append(np.unique(np.concatenate(done)) if done else np.empty(0, np.int64))
        self.failed = np.unique(np.concatenate(failed)) if failed else np.empty(0, np.int64)
        self.done = [np.setdiff1d(done, self.failed, assume_unique=True) for done in self.done]

    @staticmethod
    def _files(uri: str) -> list[str]:
        if not storage.exists(uri):
            return []
        return [p for p in storage.list_files(uri) if p.endswith(".parquet")]

    def step_uri(self, step: int) -> str:
        return storage.join(self.uri, f"step-{step}")

    def target(self, step: int) -> tuple[Any, str]:
        """(filesystem, directory) where step `step` writes its batches."""
        return storage.resolve(self.step_uri(step))

    def units_target(self) -> tuple[Any, str]:
        """(filesystem, directory) where the reader records each read unit's row count."""
        return storage.resolve(storage.join(self.uri, UNITS))

    @property
    def resumed_rows(self) -> int:
        """The candidates an earlier attempt finished at least one step of."""
        return len(self.all_done())

    def all_done(self) -> np.ndarray:
        return np.unique(np.concatenate(self.done)) if self.done else np.empty(0, np.int64)

    def skipped_units(self, units: list[int]) -> set[int]:
        """The read units all of whose rows some step wrote: not to be read again."""
        totals_uri = storage.join(self.uri, UNITS)
        if not storage.exists(totals_uri):
            return set()
        totals = {
            int(posixpath.basename(p)): int(storage.read_bytes(_uri_of(totals_uri, p)))
            for p in storage.list_files(totals_uri)
            if posixpath.basename(p).isdigit()
        }
        done_units, counts = np.unique(self.all_done() >> ROW_BITS, return_counts=True)
        finished = dict(zip(done_units.tolist(), counts.tolist()))
        return {u for u in units if u in totals and finished.get(u, 0) == totals[u]}

    def resumed(self, step: int) -> ray.data.Dataset | None:
        """The rows step `step` wrote that no later step did: they go on after it."""
        if not self.files[step]:
            return None
        skip = np.unique(np.concatenate([self.failed, *self.done[step + 1 :]]))
        fs, _ = storage.resolve(self.uri)
        rows = read_row_groups(fs, self.files[step])
        if not len(skip):
            return rows
        return map_read(rows, without_positions, fn_kwargs={"skip": ray.put(skip)})

    def delete(self) -> None:
        storage.delete(self.uri)


def _uri_of(directory_uri: str, path: str) -> str:
    return storage.join(directory_uri, posixpath.basename(path))
