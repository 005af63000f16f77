"""Reading candidates into a Ray Dataset, from local paths or object storage.

Every row of every input file becomes exactly one row here: a candidate, or a candidate
already rejected at stage `read` (see conceptual.candidates). Columns: IN_FLIGHT.
"""

from __future__ import annotations

import posixpath

import pyarrow as pa
import pyarrow.parquet as pq
import ray.data

from conceptual import storage
from conceptual.candidates import (
    ALT_TEXT_COLUMNS,
    IMAGE_URL_COLUMNS,
    PAGE_URL_COLUMNS,
    CandidateFormatError,
    candidate,
    check_header,
    detect_format,
    header_columns,
    parse,
)
from conceptual.records import CANDIDATE

# A candidate on its way through the pipeline: the input fields and, once something
# rejects it, the stage, reason and detail (all null while it is still in the running).
IN_FLIGHT = (
    CANDIDATE.append(pa.field("stage", pa.string()))
    .append(pa.field("reason", pa.string()))
    .append(pa.field("detail", pa.string()))
)


HEAD_BYTES = 65536
# Reading moves bytes; it must not wait for CPUs that the stages downstream hold. With a
# CPU reserved per read task, a pool of NLP actors holding every CPU starves the reads
# that feed it, and the run hangs (on a 1-CPU node, always).
READ_CPUS = 0


def candidate_files(uri: str) -> list[str]:
    """Data files under a URI; markers and hidden files (`_SUCCESS`, `.crc`) are not data."""
    files = [p for p in storage.list_files(uri) if not posixpath.basename(p).startswith(("_", "."))]
    if not files:
        raise CandidateFormatError(f"no candidate files under {uri}")
    return files


def read_candidates(uri: str, fmt: str = "auto") -> ray.data.Dataset:
    fs, _ = storage.resolve(uri)
    files = candidate_files(uri)
    is_parquet = [
        fmt == "parquet" or (fmt == "auto" and detect_format(f, b"") == "parquet") for f in files
    ]
    parts = []
    line_files = [f for f, pq in zip(files, is_parquet) if not pq]
    if line_files:
        formats = line_formats(fs, line_files, fmt)
        raw = ray.data.read_binary_files(
            line_files, filesystem=fs, include_paths=True, num_cpus=READ_CPUS
        )
        # One file per batch: a file is parsed whole, so memory is bounded by the largest file.
        parts.append(
            raw.map_batches(
                _parse_files, fn_kwargs={"formats": formats}, batch_size=1, batch_format="pyarrow"
            )
        )
    parquet_files = [f for f, pq in zip(files, is_parquet) if pq]
    if parquet_files:
        for path in parquet_files:
            _check_parquet_columns(fs, path)
        table = ray.data.read_parquet(parquet_files, filesystem=fs, num_cpus=READ_CPUS)
        parts.append(table.map_batches(_parquet_candidates, batch_format="pyarrow"))
    return parts[0] if len(parts) == 1 else parts[0].union(*parts[1:])


def line_formats(fs, files: list[str], fmt: str) -> dict[str, str]:
    """Each text file's format, decided from its name and first line on the driver, and its
    header checked, so a bad file fails the run before any work is scheduled."""
    formats = {}
    for path in files:
        with fs.open_input_stream(path) as stream:
            head = stream.read(HEAD_BYTES)
        formats[path] = detect_format(path, head) if fmt == "auto" else fmt
        check_header(head, path, formats[path])
    return formats


def _parse_files(batch: pa.Table, formats: dict[str, str]) -> pa.Table:
    rows = []
    for data, path in zip(batch.column("bytes").to_pylist(), batch.column("path").to_pylist()):
        rows.extend(parse(data, path, formats[path]))
    return pa.Table.from_pylist(rows, schema=IN_FLIGHT)


def _check_parquet_columns(fs, path: str) -> None:
    with fs.open_input_file(path) as f:
        header_columns([n.lower() for n in pq.read_schema(f).names], path)


def _parquet_candidates(batch: pa.Table) -> pa.Table:
    columns = {name.lower(): batch.column(name).to_pylist() for name in batch.column_names}

    def pick(names: tuple[str, ...]) -> list:
        return next((columns[n] for n in names if n in columns), [None] * batch.num_rows)

    rows = [
        candidate(*fields)
        for fields in zip(pick(ALT_TEXT_COLUMNS), pick(IMAGE_URL_COLUMNS), pick(PAGE_URL_COLUMNS))
    ]
    return pa.Table.from_pylist(rows, schema=IN_FLIGHT)
