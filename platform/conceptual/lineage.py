"""Lineage: the datasets a run read and wrote, named by their content, so that a model can be
traced back to the crawl it came from (conceptual.lineage_chain follows the chain).

A job that reads a dataset calls `log_read` in its MLflow run: the dataset becomes an MLflow
dataset input (the UI's dataset panel), one per split read, named `NAME:SPLIT` with the
split's context (train: training, val: validation, test: test); MLflow keeps one input per
name and digest in a run, so one input could not carry two contexts. A job that writes one
calls `log_written`: MLflow records datasets only as inputs, so the run's `lineage.wrote.*`
tags name the folder and digest, which is how the run that wrote a dataset is found again.

A dataset's digest is its content identity (storage.content_identity: every file's path,
size and SHA-256) over its data part (curated/, features/, clips/...), the paths taken
relative to that folder: a copy elsewhere keeps its digest, any rewritten file changes it.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import mlflow
import pyarrow.parquet as pq
from mlflow.data.dataset import Dataset

from conceptual import storage
from conceptual.splits import split_names

# The folders of a job's output that hold its records; the rest (stats.json, logs) is not data.
PARTS = ("curated", "features", "clips", "candidates", "index", "data")
# What a job's option reads in an output that may hold several parts (an import: curated/
# and clips/).
OPTION_PARTS = {"--features": "features", "--speech": "clips"}
CONTEXTS = {"train": "training", "val": "validation", "validation": "validation", "test": "test"}
WROTE = "lineage.wrote"  # the tag prefix of what a run wrote: .uri, .digest, .part, .rows
DIGEST_CHARS = 32  # MLflow keeps at most 36 characters of a dataset's digest


@dataclass(frozen=True)
class Described:
    """A dataset as lineage names it."""

    name: str  # the output folder's name: "cur"
    uri: str  # the output folder (the job's --output), as the job was given it
    part: str | None  # its data folder inside (curated, features...); None: `uri` itself
    digest: str
    rows: int | None  # Parquet rows; None for other files (a TSV of candidates)
    splits: dict[str, int] = field(default_factory=dict)  # rows per split, where rows have one


def locate(uri: str, part: str | None = None) -> tuple[str, str | None]:
    """(the output folder, its data part) of a dataset named by either: `cur` holding
    curated/, or `cur/curated` itself; `part` says which part where an output has several.
    A part inside comes first: an output folder may itself be named `curated`."""
    uri = uri.rstrip("/") or uri
    for name in [part] if part else PARTS:
        if storage.exists(storage.join(uri, name)):
            return uri, name
    if posixpath.basename(uri) in PARTS and storage.exists(uri):
        return posixpath.dirname(uri), posixpath.basename(uri)
    return uri, None


def digest(folder: str) -> str:
    """The content identity of the files under `folder`, paths relative to it."""
    _, root = storage.resolve(folder)
    root = root.rstrip("/") + "/"
    # By the prefix, not posixpath.relpath: an S3 path is relative, and relpath would make
    # it absolute from the working directory (gone under a finished `ray job submit`).
    files = [
        [path.removeprefix(root) if path.startswith(root) else posixpath.basename(path), size, sha]
        for path, size, sha in storage.content_identity(folder)
    ]
    text = json.dumps(sorted(files), separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS]


def split_rows(folder: str) -> tuple[int | None, dict[str, int]]:
    """The Parquet rows under `folder` (None without Parquet files) and their count per
    split (empty where the rows carry no `split`): the split column alone is read."""
    fs, _ = storage.resolve(folder)
    files = [path for path in storage.list_files(folder) if path.endswith(".parquet")]
    if not files:
        return None, {}
    rows, splits = 0, {}
    for path in files:
        with fs.open_input_file(path) as f:
            parquet = pq.ParquetFile(f)
            rows += parquet.metadata.num_rows
            if "split" in parquet.schema_arrow.names:
                for split in parquet.read(columns=["split"])["split"].to_pylist():
                    splits[split or "none"] = splits.get(split or "none", 0) + 1
    return rows, dict(sorted(splits.items()))


def describe(uri: str, part: str | None = None) -> Described:
    """Name, digest and rows of the dataset at `uri` (an output folder or its data part)."""
    output, part = locate(uri, part)
    folder = storage.join(output, part) if part else output
    rows, splits = split_rows(folder)
    name = posixpath.basename(output.rstrip("/")) or output
    return Described(name, output, part, digest(folder), rows, splits)


class StoredDataset(Dataset):
    """A dataset of the platform's storage as MLflow records it: its source is the output
    folder, its digest the content identity, its profile the rows (of the split it stands for,
    and of every split)."""

    def __init__(self, described: Described, split: str | None = None):
        self._profile = {
            "part": described.part,
            "rows": described.splits.get(split) if split else described.rows,
            "split": split,
            "splits": described.splits,
        }
        name = f"{described.name}:{split}" if split else described.name
        super().__init__(source=_source(described.uri), name=name, digest=described.digest)

    def _compute_digest(self) -> str:  # always given: the content identity
        return self._digest

    @property
    def profile(self) -> dict[str, Any]:
        return self._profile

    def to_dict(self) -> dict[str, str]:  # Dataset's leaves the profile out
        return {**super().to_dict(), "profile": json.dumps(self._profile)}

    @property
    def schema(self) -> None:
        return None


def _source(uri: str):
    """MLflow's own source for a local path or an s3:// URI (`local`, `s3`), chosen by the
    storage's scheme: MLflow's resolver warns that a path fits both its local sources."""
    from mlflow.data.dataset_source_registry import get_registered_sources

    kind = "s3" if storage.is_remote(uri) else "local"
    source = next(s for s in get_registered_sources() if s._get_source_type() == kind)
    return source._resolve(uri)


def log_read(
    uri: str,
    splits: Iterable[str] | None = None,
    context: str | None = None,
    part: str | None = None,
) -> Described:
    """Into the active MLflow run: the dataset at `uri` (its `part`, where it has several) as
    read, one input per split of `splits` (by default every split it has) with the split's
    context, or one input with `context` (for data without splits, or read whole)."""
    described = describe(uri, part)
    # The splits asked for as the rows name them ("validation" is "val" in some).
    wanted = list(splits or [])
    chosen = [s for s in described.splits if not wanted or any(s in split_names(x) for x in wanted)]
    if context or not chosen:
        mlflow.log_input(StoredDataset(described), context=context or "input")
        return described
    mlflow.log_inputs(
        [StoredDataset(described, split) for split in chosen],
        [CONTEXTS.get(split, split) for split in chosen],
        [None] * len(chosen),
    )
    return described


def log_written(uri: str, part: str | None = None) -> Described:
    """Into the active MLflow run: what it wrote at `uri` (its `part`, where the folder holds
    several: features written beside the curated records), as tags (found again by
    `writer_runs`) and lineage/written.json."""
    described = describe(uri, part)
    mlflow.set_tags(
        {
            f"{WROTE}.uri": described.uri,
            f"{WROTE}.digest": described.digest,
            f"{WROTE}.part": described.part or "",
            f"{WROTE}.rows": str(described.rows),
        }
    )
    mlflow.log_dict(asdict(described), "lineage/written.json")
    return described


def inputs_of(run: Any) -> list[dict[str, Any]]:
    """The datasets an MLflow run read (its dataset inputs), one entry per folder and digest
    with the splits read and their contexts."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for entry in run.inputs.dataset_inputs if run.inputs else ():
        dataset = entry.dataset
        try:
            uri = json.loads(dataset.source).get("uri", dataset.source)
            profile = json.loads(dataset.profile or "{}")
        except (TypeError, ValueError):  # a dataset some other code logged
            uri, profile = dataset.source, {}
        context = next((t.value for t in entry.tags if t.key == "mlflow.data.context"), None)
        name, _, split = dataset.name.partition(":")  # StoredDataset's NAME:SPLIT
        item = found.setdefault(
            (uri, dataset.digest),
            {
                "name": name,
                "uri": uri,
                "part": profile.get("part"),
                "digest": dataset.digest,
                "read": {},
                "splits": profile.get("splits", {}),
            },
        )
        item["read"][profile.get("split") or split or "all"] = context
    return list(found.values())


def writer_runs(digest: str | None = None, uri: str | None = None) -> list[Any]:
    """The runs (newest first) whose tags say they wrote a dataset of `digest`, or at `uri`."""
    from conceptual.tracking import configure

    configure()
    key, value = (f"{WROTE}.digest", digest) if digest else (f"{WROTE}.uri", uri)
    escaped = str(value).replace("'", "\\'")
    return mlflow.search_runs(
        search_all_experiments=True,
        filter_string=f"tags.`{key}` = '{escaped}'",
        order_by=["attributes.start_time DESC"],
        output_format="list",
    )


# What a job leaves beside its records: the report lineage shows of the data's origin.
REPORTS = {"stats.json": "curation", "import.json": "import", "features.json": "features"}
# A part's own report comes first: features/ written beside curated/ has features.json, and
# a harvest's candidates/ its stats.json.
OWN_REPORT = {"features": "features.json", "candidates": "stats.json"}


def origin(output_uri: str, part: str | None = None) -> dict[str, Any]:
    """What made the dataset in `output_uri` (its `part`), by the report beside its records:
    a curation's stats.json (its funnel and MLflow run), a harvest's stats.json (its files,
    records and images), an import's import.json (what it took in and skipped), a features
    job's features.json; `kind` None without one."""
    for name in sorted(REPORTS, key=lambda name: name != OWN_REPORT.get(part or "")):
        uri = storage.join(output_uri, name)
        if storage.exists(uri):
            report = storage.read_json(uri)
            if not isinstance(report, dict):  # not a report this platform wrote
                report = {}
            report.pop("skipped_captions", None)  # a list of up to a thousand examples
            kind = "harvest" if name == "stats.json" and is_harvest(report) else REPORTS[name]
            return {"kind": kind, "report": report, "run_id": report.get("mlflow_run_id")}
    return {"kind": None, "report": None, "run_id": None}


def is_harvest(report: dict[str, Any]) -> bool:
    """A harvest's stats.json (conceptual.harvest.stats) counts records and images, and has
    no curation funnel."""
    return isinstance(report.get("records"), dict) and "funnel" not in report


def harvest_behind(made: dict[str, Any]) -> dict[str, Any] | None:
    """The funnel of the harvest a curation's candidates came from (`made`: its origin): the
    one its stats.json holds (web archives given to curate itself), else that of a harvest's
    output its MLflow run read; None for candidates from elsewhere."""
    report = made.get("report") or {}
    if made.get("kind") != "curation":
        return None
    if isinstance(report.get("harvest"), dict):
        return report["harvest"]
    from mlflow.exceptions import MlflowException

    from conceptual.tracking import configure

    configure()
    try:
        run = mlflow.MlflowClient().get_run(str(made["run_id"])) if made.get("run_id") else None
    except MlflowException:  # a run this store does not have
        run = None
    for item in inputs_of(run) if run else ():
        read = origin(item["uri"], item.get("part"))
        if read["kind"] == "harvest":
            return read["report"]
    return None
