"""Reading candidates into a Ray Dataset, from local paths or object storage.

Every row of every input file becomes exactly one row here: a candidate, or a candidate
already rejected at stage `read` (see conceptual.candidates). Columns: IN_FLIGHT.

Line formats (TSV, JSONL) are read in byte ranges aligned to line boundaries, as
Hadoop does: each range is one task and one block, so a single large file (the released
Conceptual Captions TSV is 500 MB) spreads over every worker downstream. A line belongs to
the range its first byte falls in. CSV is read whole (a quoted field may hold newlines), and
so is a compressed file (gzip or zstd, known by its first bytes): a compressed stream cannot
be entered at a byte offset.
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
    column_index,
    compression_of,
    detect_format,
    header_columns,
    parse,
)
from conceptual.records import IN_FLIGHT

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


def read_candidates(uri: str, fmt: str = "auto", range_bytes: int = 1 << 20) -> ray.data.Dataset:
    fs, _ = storage.resolve(uri)
    files = candidate_files(uri)
    is_parquet = [
        fmt == "parquet" or (fmt == "auto" and detect_format(f, b"") == "parquet") for f in files
    ]
    parts = []
    line_files = [f for f, pq_file in zip(files, is_parquet) if not pq_file]
    if line_files:
        ranges = plan_ranges(fs, line_files, fmt, range_bytes)
        items = ray.data.from_items(ranges, override_num_blocks=len(ranges))
        parts.append(
            items.map_batches(
                _read_ranges,
                fn_kwargs={"filesystem": fs},
                batch_size=1,
                batch_format="pyarrow",
                num_cpus=READ_CPUS,
                compute=read_tasks(len(ranges)),
            )
        )
    parquet_files = [f for f, pq_file in zip(files, is_parquet) if pq_file]
    if parquet_files:
        for path in parquet_files:
            check_parquet(fs, path)
        parts.append(
            read_row_groups(fs, parquet_files).map_batches(
                _parquet_candidates, batch_format="pyarrow", num_cpus=READ_CPUS
            )
        )
    return parts[0] if len(parts) == 1 else parts[0].union(*parts[1:])


def plan_ranges(fs, files: list[str], fmt: str, range_bytes: int) -> list[dict]:
    """Byte ranges to read, decided on the driver from each file's size and first line. The
    header is checked here too, so a bad file fails the run before any work is scheduled."""
    ranges = []
    for path in files:
        with open_raw(fs, path) as stream:
            compression = compression_of(stream.read(4))
        head = read_content(fs, path, compression, HEAD_BYTES)
        file_format = detect_format(path, head) if fmt == "auto" else fmt
        check_header(head, path, file_format)
        size = fs.get_file_info(path).size
        header = head.split(b"\n", 1)[0] + b"\n" if file_format in ("tsv", "csv") else b""
        whole = compression is not None or file_format not in SPLITTABLE
        step = max(size, 1) if whole else range_bytes
        for start in range(0, max(size, 1), step):
            ranges.append(
                {
                    "path": path,
                    "format": file_format,
                    "compression": compression,
                    "start": start,
                    "end": min(start + step, size),
                    "header": header,
                }
            )
    return ranges


def open_raw(fs, path: str):
    """The file's bytes as stored: pyarrow would otherwise decompress by the name's suffix
    (`.gz`) in streams but not in random-access files, and the two would disagree."""
    return fs.open_input_stream(path, compression=None)


def read_content(fs, path: str, compression: str | None, size: int | None = None) -> bytes:
    """A file's content (its first `size` bytes if given), decompressed when `compression`
    names a codec. A file that does not decompress fails the run with a message naming it:
    the records a truncated or corrupt file holds cannot be counted."""
    try:
        with open_raw(fs, path) as raw:
            stream = pa.CompressedInputStream(raw, compression) if compression else raw
            return stream.read(size)
    except OSError as exc:
        raise CandidateFormatError(
            f"{path} does not read as {compression or 'a file'}: {exc}"
        ) from exc


def read_line_range(f, start: int, end: int, chunk: int = 1 << 16) -> tuple[int, bytes]:
    """(offset, bytes) of the whole lines whose first byte lies in [start, end)."""
    begin = start
    if start > 0:  # the line in progress at `start` belongs to the previous range
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


def _read_ranges(batch: pa.Table, filesystem) -> pa.Table:
    rows = []
    for part in batch.to_pylist():  # one byte range of a file, or a whole file
        if part["compression"]:
            offset, data = 0, read_content(filesystem, part["path"], part["compression"])
        else:
            with filesystem.open_input_file(part["path"]) as f:
                offset, data = read_line_range(f, part["start"], part["end"])
        if offset == 0:
            name = part["path"]
        else:  # line numbers count from the range's first line; the header is line 1 if any
            name, data = f"{part['path']} (from byte {offset})", part["header"] + data
        rows.extend(parse(data, name, part["format"]))
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


def check_parquet(fs, path: str) -> None:
    """Fail fast, before any work is scheduled, on a file that is not Parquet or whose
    candidate columns hold the wrong types (an integer alt-text, a string image)."""
    try:
        with fs.open_input_file(path) as f:
            schema = pq.read_schema(f)
    except (pa.ArrowInvalid, OSError) as exc:
        raise CandidateFormatError(f"{path} is not a Parquet file: {exc}") from exc
    names = [n.lower() for n in schema.names]
    text_columns = header_columns(names, path).values()
    image_column = column_index(names, IMAGE_COLUMNS)
    expected = [(i, "string") for i in text_columns if i is not None]
    expected += [(image_column, "binary")] if image_column is not None else []
    for index, kind in expected:
        field = schema.field(index)
        if not _holds(field.type, kind):
            raise CandidateFormatError(
                f"{path}: column {field.name!r} is {field.type}; candidates need {kind}"
            )


def _holds(column_type: pa.DataType, kind: str) -> bool:
    if pa.types.is_dictionary(column_type):
        column_type = column_type.value_type
    if pa.types.is_null(column_type):  # every value missing
        return True
    if kind == "string":
        return pa.types.is_string(column_type) or pa.types.is_large_string(column_type)
    return pa.types.is_binary(column_type) or pa.types.is_large_binary(column_type)


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
