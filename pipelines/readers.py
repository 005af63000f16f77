"""Reading candidates into a Ray Dataset, from local paths or object storage.

Every row of every input file becomes exactly one row here: a candidate, or a candidate
already rejected at stage `read` (see conceptual.candidates). Columns: IN_FLIGHT.

Line formats (TSV, JSONL) are read in byte-range splits aligned to line boundaries, as
Hadoop does: each split is one task and one block, so a single large file (the released
Conceptual Captions TSV is 500 MB) spreads over every worker downstream. A line belongs to
the split its first byte falls in. CSV is read whole (a quoted field may hold newlines).
"""

from __future__ import annotations

import posixpath

import pyarrow as pa
import pyarrow.parquet as pq
import ray.data

from conceptual import storage
from conceptual.candidates import (
    ALT_TEXT_COLUMNS,
    IMAGE_COLUMNS,
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
SPLITTABLE = ("cc_tsv", "tsv", "jsonl")
# Reading and parsing are light streaming work; they must not wait for CPUs that the
# stages downstream hold. With a CPU reserved per task, a pool of NLP actors holding every
# CPU starves the reads that feed it, and the run hangs.
READ_CPUS = 0


def read_tasks(units: int | None = None) -> ray.data.TaskPoolStrategy:
    """At most one read task per CPU of the cluster (and per unit of work, when known) at a
    time: tasks that reserve no CPU are otherwise not bounded, and Ray starts a worker
    process for each (dozens on 2 CPUs)."""
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    return ray.data.TaskPoolStrategy(size=cpus if units is None else max(1, min(cpus, units)))


def candidate_files(uri: str) -> list[str]:
    """Data files under a URI; markers and hidden files (`_SUCCESS`, `.crc`) are not data."""
    files = [p for p in storage.list_files(uri) if not posixpath.basename(p).startswith(("_", "."))]
    if not files:
        raise CandidateFormatError(f"no candidate files under {uri}")
    return files


def read_candidates(uri: str, fmt: str = "auto", split_bytes: int = 1 << 20) -> ray.data.Dataset:
    fs, _ = storage.resolve(uri)
    files = candidate_files(uri)
    is_parquet = [
        fmt == "parquet" or (fmt == "auto" and detect_format(f, b"") == "parquet") for f in files
    ]
    parts = []
    line_files = [f for f, pq_file in zip(files, is_parquet) if not pq_file]
    if line_files:
        splits = plan_splits(fs, line_files, fmt, split_bytes)
        items = ray.data.from_items(splits, override_num_blocks=len(splits))
        parts.append(
            items.map_batches(
                _read_splits,
                fn_kwargs={"filesystem": fs},
                batch_size=1,
                batch_format="pyarrow",
                num_cpus=READ_CPUS,
                compute=read_tasks(len(splits)),
            )
        )
    parquet_files = [f for f, pq_file in zip(files, is_parquet) if pq_file]
    if parquet_files:
        for path in parquet_files:
            _check_parquet_columns(fs, path)
        parts.append(
            read_row_groups(fs, parquet_files).map_batches(
                _parquet_candidates, batch_format="pyarrow", num_cpus=READ_CPUS
            )
        )
    return parts[0] if len(parts) == 1 else parts[0].union(*parts[1:])


def plan_splits(fs, files: list[str], fmt: str, split_bytes: int) -> list[dict]:
    """Byte ranges to read, decided on the driver from each file's size and first line. The
    header is checked here too, so a bad file fails the run before any work is scheduled."""
    splits = []
    for path in files:
        with fs.open_input_stream(path) as stream:
            head = stream.read(HEAD_BYTES)
        file_format = detect_format(path, head) if fmt == "auto" else fmt
        check_header(head, path, file_format)
        size = fs.get_file_info(path).size
        header = head.split(b"\n", 1)[0] + b"\n" if file_format in ("tsv", "csv") else b""
        step = split_bytes if file_format in SPLITTABLE else max(size, 1)
        for start in range(0, max(size, 1), step):
            splits.append(
                {
                    "path": path,
                    "format": file_format,
                    "start": start,
                    "end": min(start + step, size),
                    "header": header,
                }
            )
    return splits


def read_line_range(f, start: int, end: int, chunk: int = 1 << 16) -> tuple[int, bytes]:
    """(offset, bytes) of the whole lines whose first byte lies in [start, end)."""
    begin = start
    if start > 0:  # the line in progress at `start` belongs to the previous split
        f.seek(start - 1)
        position = start - 1
        while (block := f.read(chunk)) and (newline := block.find(b"\n")) < 0:
            position += len(block)
        if not block:
            return start, b""
        begin = position + newline + 1
    if begin >= end:
        return begin, b""
    f.seek(begin)
    data = [f.read(end - begin)]
    while not data[-1].endswith(b"\n") and (block := f.read(chunk)):  # finish the last line
        newline = block.find(b"\n")
        data.append(block if newline < 0 else block[: newline + 1])
        if newline >= 0:
            break
    return begin, b"".join(data)


def _read_splits(batch: pa.Table, filesystem) -> pa.Table:
    rows = []
    for split in batch.to_pylist():
        with filesystem.open_input_file(split["path"]) as f:
            offset, data = read_line_range(f, split["start"], split["end"])
        if offset == 0:
            name = split["path"]
        else:  # line numbers count from the split's first line; the header is line 1 if any
            name, data = f"{split['path']} (from byte {offset})", split["header"] + data
        rows.extend(parse(data, name, split["format"]))
    return pa.Table.from_pylist(rows, schema=IN_FLIGHT)


def read_row_groups(fs, files: list[str], columns: list[str] | None = None) -> ray.data.Dataset:
    """Parquet files as one block per row group, read by tasks that reserve no CPU.

    Not ray.data.read_parquet: its file-listing step reserves a CPU that a fixed actor pool
    downstream may already hold, and the run hangs (seen with Ray 2.60 on 2 CPUs)."""
    units = []
    for path in files:
        with fs.open_input_file(path) as f:
            groups = pq.ParquetFile(f).metadata.num_row_groups
        units.extend({"path": path, "row_group": g} for g in range(groups))
    items = ray.data.from_items(units, override_num_blocks=max(len(units), 1))
    return items.map_batches(
        _read_row_group,
        fn_kwargs={"filesystem": fs, "columns": columns},
        batch_size=1,
        batch_format="pyarrow",
        num_cpus=READ_CPUS,
        compute=read_tasks(len(units)),
    )


def _read_row_group(batch: pa.Table, filesystem, columns: list[str] | None) -> pa.Table:
    unit = batch.to_pylist()[0]
    with filesystem.open_input_file(unit["path"]) as f:
        return pq.ParquetFile(f).read_row_group(unit["row_group"], columns=columns)


def _check_parquet_columns(fs, path: str) -> None:
    with fs.open_input_file(path) as f:
        header_columns([n.lower() for n in pq.read_schema(f).names], path)


def _parquet_candidates(batch: pa.Table) -> pa.Table:
    columns = {name.lower(): batch.column(name).to_pylist() for name in batch.column_names}

    def pick(names: tuple[str, ...]) -> list:
        return next((columns[n] for n in names if n in columns), [None] * batch.num_rows)

    rows = [
        candidate(*fields)
        for fields in zip(
            pick(ALT_TEXT_COLUMNS),
            pick(IMAGE_URL_COLUMNS),
            pick(PAGE_URL_COLUMNS),
            pick(IMAGE_COLUMNS),
        )
    ]
    return pa.Table.from_pylist(rows, schema=IN_FLIGHT)
