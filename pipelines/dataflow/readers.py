"""Reading candidates into a Ray Dataset, from local paths or object storage.

Every row of every input file becomes exactly one row here: a candidate, or a candidate
already rejected at stage `read` (see conceptual.candidates). Columns: IN_FLIGHT.

Line formats (TSV, JSONL) are read in byte ranges aligned to line boundaries, as
Hadoop does: each range is one task and one block, so a single large file (the released
Conceptual Captions TSV is 500 MB) spreads over every worker downstream. A line belongs to
the range its first byte falls in. A CSV file (a quoted field may hold newlines) is one
unit, and so is a compressed file (gzip or zstd, known by its first bytes): a compressed
stream cannot be entered at a byte offset. Both are parsed as a stream, a bounded piece at a
time. A WebDataset shard (`.tar`, conceptual.shard_candidates) is one unit too, streamed a
member at a time; its samples come with their image bytes, which are then not fetched.

A folder as img2dataset writes it (`00000.tar`, `00000.parquet`, `00000_stats.json`) is read
by its shards: the Parquet and JSON beside each are their metadata and statistics, not more
candidates. An input may also be a glob (`'shards/*.tar'`, `'s3://bucket/cc3m/*.tar'`).
"""

from __future__ import annotations

import functools
import posixpath
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import ray
import ray.data

from conceptual import storage
from conceptual.candidates import (
    ALT_TEXT_COLUMNS,
    IMAGE_COLUMNS,
    IMAGE_URL_COLUMNS,
    LABEL_COLUMNS,
    PAGE_URL_COLUMNS,
    READ_STAGE,
    SPLIT_COLUMNS,
    CandidateFormatError,
    LongLine,
    candidate,
    check_header,
    column_index,
    compression_of,
    dataset_labels,
    detect_format,
    header_columns,
    parse,
    parse_delimited,
    split_of_name,
)
from conceptual.limits import LINE_BYTES, ROW_BYTES
from conceptual.records import IN_FLIGHT
from conceptual.shard_candidates import check_shard, shard_rows

HEAD_BYTES = 65536
STREAM_BYTES = 8 << 20  # of a compressed file's content, parsed at a time
ROWS_PER_TABLE = 8192  # the rows parsed into one table: a piece of short lines holds 100,000s
# A row's `position`: its read unit (a byte range or a row group) in the high bits, its row
# there in the low ones. Stable across runs of the same input and settings.
ROW_BITS = 32
SPLITTABLE = ("cc_tsv", "tsv", "jsonl")
SHARD_BUFFER = 8 << 20  # bytes fetched per read of a shard (one request each on S3)
CHECK_BUFFER = 256 << 10  # of its first sample, read on the driver: one request, mostly
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


def map_read(rows: ray.data.Dataset, fn: Callable, **kwargs: Any) -> ray.data.Dataset:
    """`rows.map_batches(fn)` on Arrow batches as a reading step: no CPU reserved, at most
    one task per CPU (read_tasks; unbounded, each task would get a worker process)."""
    return rows.map_batches(
        fn, batch_format="pyarrow", num_cpus=READ_CPUS, compute=read_tasks(), **kwargs
    )


@functools.lru_cache(maxsize=4)
def fetched_once(ref: ray.ObjectRef) -> Any:
    """What every task of a dataset reads (a training split's images, its caption map),
    fetched once per worker process (arrays zero-copy from the object store; maps
    deserialized once, not every batch)."""
    return ray.get(ref)


def candidate_files(uri: str) -> list[str]:
    """Data files under a URI (a file, folder, prefix or glob); markers and hidden files
    (`_SUCCESS`, `.crc`) are not data, nor what img2dataset writes beside each shard."""
    files = [p for p in storage.list_files(uri) if not posixpath.basename(p).startswith(("_", "."))]
    if not files:
        raise CandidateFormatError(f"no candidate files under {uri}")
    return beside_shards(files)


def beside_shards(files: list[str]) -> list[str]:
    """`files` but img2dataset's `STEM.parquet` (the shard's metadata, its downloads
    included) and `STEM_stats.json` beside a shard `STEM.tar`: its samples are read."""
    stems = {f[: f.lower().rindex(".tar")] for f in files if _is_shard(f)}
    beside = {stem + suffix for stem in stems for suffix in (".parquet", "_stats.json")}
    return [f for f in files if f not in beside]


def _is_shard(path: str) -> bool:
    return detect_format(path, b"") == "webdataset"


def read_candidates(
    uri: str,
    fmt: str,
    range_bytes: int,
    journal=None,
    splits: bool = False,
    line_bytes: int = LINE_BYTES,
    image_bytes: int = ROW_BYTES,
) -> ray.data.Dataset:
    """Every row of the input, each with its `position`. With a `journal`
    (pipelines/dataflow/journal.py), the rows it holds are left out: a byte range all of whose rows
    it holds is not read at all, the rest are dropped as they are read. With `splits` (the
    released dataset), each row's `split` is the one its file holds: a Parquet file's
    `split` column, else what the file's name says (candidates.split_of_name), else null.
    A Parquet file of the Hugging Face `labeled` config has its labels read into `labels`
    (candidates.dataset_labels) either way. A WebDataset sample's member over `image_bytes`
    is not read (`too_large`)."""
    fs, _ = storage.resolve(uri)
    files = candidate_files(uri)
    is_parquet = [
        fmt == "parquet" or (fmt == "auto" and detect_format(f, b"") == "parquet") for f in files
    ]
    done = journal.all_done() if journal is not None else np.empty(0, np.int64)
    skip = ray.put(done) if len(done) else None
    parts = []
    streamed = [f for f, pq_file in zip(files, is_parquet) if not pq_file]  # lines, shards
    ranges = plan_ranges(fs, streamed, fmt, range_bytes, image_bytes) if streamed else []
    finished = journal.skipped_units([r["unit"] for r in ranges]) if journal is not None else ()
    to_read = [r for r in ranges if r["unit"] not in finished]
    if to_read:
        items = ray.data.from_items(to_read, override_num_blocks=len(to_read))
        units = journal.units_target() if journal is not None else None
        parts.append(
            items.map_batches(
                _read_ranges,
                fn_kwargs={
                    "filesystem": fs,
                    "skip": skip,
                    "units": units,
                    "splits": splits,
                    "line_bytes": line_bytes,
                },
                batch_size=1,
                batch_format="pyarrow",
                num_cpus=READ_CPUS,
                compute=read_tasks(len(to_read)),
            )
        )
    parquet_files = [f for f, pq_file in zip(files, is_parquet) if pq_file]
    if parquet_files:
        for path in parquet_files:
            check_parquet(fs, path)
        named = unit_splits(fs, parquet_files, len(ranges)) if splits else None
        rows = read_row_groups(fs, parquet_files, first_unit=len(ranges))
        rows = map_read(rows, _parquet_candidates, fn_kwargs={"splits": named})
        if skip is not None:
            rows = map_read(rows, without_positions, fn_kwargs={"skip": skip})
        parts.append(rows)
    if not parts:  # every row is in the journal
        return ray.data.from_arrow(IN_FLIGHT.empty_table())
    return parts[0] if len(parts) == 1 else parts[0].union(*parts[1:])


def plan_ranges(
    fs, files: list[str], fmt: str, range_bytes: int, image_bytes: int = ROW_BYTES
) -> list[dict]:
    """Byte ranges to read, decided on the driver from each file's size and first line (a
    shard: the whole file). The header (a shard: its first sample) is checked here too, so a
    bad file fails the run before any work is scheduled."""
    ranges = []
    for path in files:
        if fmt == "webdataset" or (fmt == "auto" and _is_shard(path)):
            with open_shard(fs, path, CHECK_BUFFER) as stream:
                check_shard(stream, path)
            ranges.append(
                {
                    "unit": len(ranges),
                    "path": path,
                    "format": "webdataset",
                    "compression": None,  # a gzipped shard: tarfile reads it as it streams
                    "start": 0,
                    "end": 0,
                    "header": b"",
                    "max_bytes": image_bytes,
                }
            )
            continue
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
                    "unit": len(ranges),
                    "path": path,
                    "format": file_format,
                    "compression": compression,
                    "start": start,
                    "end": min(start + step, size),
                    "header": header,
                    "max_bytes": image_bytes,
                }
            )
    return ranges


def open_raw(fs, path: str):
    """The file's bytes as stored: pyarrow would otherwise decompress by the name's suffix
    (`.gz`) in streams but not in random-access files, and the two would disagree."""
    return fs.open_input_stream(path, compression=None)


def open_shard(fs, path: str, buffer: int):
    """A shard's bytes as stored (tarfile ungzips a `.tar.gz` itself), fetched `buffer`
    bytes a request: tarfile reads 10 KiB at a time."""
    return fs.open_input_stream(path, compression=None, buffer_size=buffer)


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


def read_line_range(
    f, start: int, end: int, chunk: int = 1 << 16, line_bytes: int = LINE_BYTES
) -> Iterator[tuple[int, bytes | LongLine]]:
    """(offset, bytes) of the whole lines whose first byte lies in [start, end); the last of
    them, when it runs on past `end` for more than `line_bytes`, as a LongLine of its own
    (skipped as it streams past, never held whole)."""
    begin = start
    if start > 0:  # the line in progress at `start` belongs to the previous range
        f.seek(start - 1)
        position = start - 1
        while (block := f.read(chunk)) and (newline := block.find(b"\n")) < 0:
            position += len(block)
        if not block:
            yield start, b""
            return
        begin = position + newline + 1
    if begin >= end:
        yield begin, b""
        return
    f.seek(begin)
    data = f.read(end - begin)
    if not data or data.endswith(b"\n"):
        yield from _long_lines_apart(begin, data, line_bytes)
        return
    cut = data.rfind(b"\n") + 1  # where the last line, not yet finished, starts
    tail, size = [data[cut:]], len(data) - cut
    while block := f.read(chunk):  # finish it
        newline = block.find(b"\n")
        piece = block if newline < 0 else block[:newline]
        size += len(piece)
        if size <= line_bytes:
            tail.append(piece if newline < 0 else block[: newline + 1])
        if newline >= 0:
            break
    if size <= line_bytes:
        yield from _long_lines_apart(begin, data[:cut] + b"".join(tail), line_bytes)
        return
    if cut:
        yield from _long_lines_apart(begin, data[:cut], line_bytes)
    yield begin + cut, LongLine(b"".join(tail)[:HEAD_BYTES], size, line_bytes)


def _long_lines_apart(
    begin: int, data: bytes, line_bytes: int
) -> Iterator[tuple[int, bytes | LongLine]]:
    """`data` (whole lines from byte `begin`) as pieces, each line over `line_bytes` a
    LongLine of its own (only a range longer than the limit can hold one)."""
    if len(data) <= line_bytes:
        yield begin, data
        return
    start = piece = 0
    while start < len(data):
        stop = data.find(b"\n", start)
        stop = len(data) if stop < 0 else stop
        if stop - start > line_bytes:
            if start > piece:
                yield begin + piece, data[piece:start]
            yield (
                begin + start,
                LongLine(data[start : start + HEAD_BYTES], stop - start, line_bytes),
            )
            piece = stop + 1
        start = stop + 1
    if piece < len(data):
        yield begin + piece, data[piece:]


def _read_ranges(
    batch: pa.Table, filesystem, skip=None, units=None, splits=False, line_bytes=LINE_BYTES
):
    """The candidates of some byte ranges (or whole files), as tables of at most
    ROWS_PER_TABLE rows and about STREAM_BYTES of text each; with `units`,
    (filesystem, directory), each range's row count is recorded there for a later resume;
    rows whose position is in `skip` are left out; with `splits`, each row's split is its
    file's."""
    for part in batch.to_pylist():  # one byte range of a file, or a whole file
        split = split_of_name(part["path"]) if splits else None
        rows = 0
        for piece in _tables_of(_rows(filesystem, part, line_bytes)):
            positions = unit_positions(part["unit"], len(piece))
            for row, position in zip(piece, positions, strict=True):
                row["position"] = position + rows
                if splits:
                    row["split"] = split
            rows += len(piece)
            table = pa.Table.from_pylist(piece, schema=IN_FLIGHT)
            yield table if skip is None else without_positions(table, skip)
        if not rows:  # an empty range still gives its (empty) table
            yield IN_FLIGHT.empty_table()
        if units is not None:
            record_unit(*units, part["unit"], rows)


def _rows(filesystem, part: dict, line_bytes: int) -> Iterator[dict[str, Any]]:
    """Every row of a read unit, in order."""
    if part["format"] == "webdataset":  # tarfile reads it, gzipped or not
        with open_shard(filesystem, part["path"], SHARD_BUFFER) as stream:
            yield from shard_rows(stream, part["path"], part["max_bytes"])
        return
    pieces = _pieces(filesystem, part, line_bytes)
    if part["format"] == "csv":  # a record may run over pieces: one parse of them all
        yield from parse_delimited((data for _, data in pieces), part["path"], "csv", line_bytes)
        return
    for offset, data in pieces:
        if isinstance(data, LongLine):
            yield data.rejection(f"{part['path']} (byte {offset})")
        elif offset == 0:
            yield from parse(data, part["path"], part["format"])
        else:  # line numbers count from the piece's first line; the header is line 1
            name = f"{part['path']} (from byte {offset})"
            yield from parse(part["header"] + data, name, part["format"])


def _tables_of(rows: Iterator[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """`rows` in lists of at most ROWS_PER_TABLE rows and about STREAM_BYTES of text and
    image bytes: a row may keep 65,536 characters of each field (a shard's, its image), and
    8,192 such rows would be gigabytes."""
    table, size = [], 0
    for row in rows:
        table.append(row)
        size += sum(len(value) for value in row.values() if isinstance(value, (str, bytes)))
        if len(table) == ROWS_PER_TABLE or size >= STREAM_BYTES:
            yield table
            table, size = [], 0
    if table:
        yield table


def _pieces(filesystem, part: dict, line_bytes: int) -> Iterator[tuple[int, bytes | LongLine]]:
    """(offset, whole lines) of a read unit: its byte range of a plain line file; a CSV or
    a compressed file's content (decompressed) as a stream, STREAM_BYTES of lines at a time,
    so a file that expands 300-fold never sits in memory whole, a line over `line_bytes`
    coming as a LongLine of its own."""
    if not part["compression"] and part["format"] != "csv":
        with filesystem.open_input_file(part["path"]) as f:
            yield from read_line_range(f, part["start"], part["end"], line_bytes=line_bytes)
        return
    offset, rest = 0, b""
    long: LongLine | None = None  # the line being skipped
    try:
        with open_raw(filesystem, part["path"]) as raw:
            stream = (
                pa.CompressedInputStream(raw, part["compression"]) if part["compression"] else raw
            )
            while block := stream.read(STREAM_BYTES):
                if long is not None:
                    newline = block.find(b"\n")
                    if newline < 0:
                        long = long._replace(size=long.size + len(block))
                        continue
                    yield offset, long._replace(size=long.size + newline)
                    offset += long.size + newline + 1
                    long, block = None, block[newline + 1 :]
                lines = rest + block
                newline = lines.rfind(b"\n") + 1
                if newline:
                    yield offset, lines[:newline]
                    offset, rest = offset + newline, lines[newline:]
                else:
                    rest = lines  # one line longer than a block: read on
                if len(rest) > line_bytes:
                    long, rest = LongLine(rest[:HEAD_BYTES], len(rest), line_bytes), b""
    except OSError as exc:
        raise CandidateFormatError(
            f"{part['path']} does not read as {part['compression'] or 'a file'}: {exc}"
        ) from exc
    if long is not None:
        yield offset, long
    elif rest or offset == 0:
        yield offset, rest


def record_unit(filesystem, directory: str, unit: int, rows: int) -> None:
    """How many rows read unit `unit` holds (pipelines/dataflow/journal.py reads it back)."""
    storage.write_atomic(filesystem, posixpath.join(directory, str(unit)), str(rows).encode())


def without_positions(batch: pa.Table, skip) -> pa.Table:
    """The rows whose position is not in `skip` (a sorted int64 array, or a reference to one):
    what a resumed run does not read again (pipelines/dataflow/journal.py)."""
    skip = ray.get(skip) if isinstance(skip, ray.ObjectRef) else skip
    if not len(skip) or not batch.num_rows:
        return batch
    positions = batch["position"].to_numpy(zero_copy_only=False).astype(np.int64)
    keep = ~np.isin(positions, skip)
    return batch if keep.all() else batch.filter(pa.array(keep))


def unit_positions(unit: int, rows: int) -> range:
    return range(unit << ROW_BITS, (unit << ROW_BITS) + rows)


def read_row_groups(
    fs, files: list[str], columns: list[str] | None = None, first_unit: int | None = None
) -> ray.data.Dataset:
    """Parquet files as one block per row group, read by tasks that reserve no CPU. With
    `first_unit`, each row group is a read unit numbered from it, and its rows carry their
    `position` in a column `__position`.

    Not ray.data.read_parquet: its file-listing step reserves a CPU that a fixed actor pool
    downstream may already hold, and the run hangs (seen with Ray 2.60 on 2 CPUs)."""
    units = []
    for path in files:
        with fs.open_input_file(path) as f:
            groups = pq.ParquetFile(f).metadata.num_row_groups
        units += [{"path": path, "row_group": g} for g in range(groups)]
    for number, unit in enumerate(units, start=first_unit or 0):
        unit["unit"] = number
    items = ray.data.from_items(units, override_num_blocks=max(len(units), 1))
    return items.map_batches(
        _read_row_group,
        fn_kwargs={"filesystem": fs, "columns": columns, "positions": first_unit is not None},
        batch_size=1,
        batch_format="pyarrow",
        num_cpus=READ_CPUS,
        compute=read_tasks(len(units)),
    )


def _read_row_group(
    batch: pa.Table, filesystem, columns: list[str] | None, positions: bool
) -> pa.Table:
    unit = batch.to_pylist()[0]
    with filesystem.open_input_file(unit["path"]) as f:
        group = pq.ParquetFile(f).read_row_group(unit["row_group"], columns=columns)
    if not positions:
        return group
    positions = unit_positions(unit["unit"], group.num_rows)
    return group.append_column("__position", pa.array(positions, pa.int64()))


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


def unit_splits(fs, files: list[str], first_unit: int) -> dict[int, str | None]:
    """The split each Parquet read unit's file name says (candidates.split_of_name), by the
    unit's number as read_row_groups numbers them: a row's unit is its position's high bits."""
    named, unit = {}, first_unit
    for path in files:
        with fs.open_input_file(path) as f:
            groups = pq.ParquetFile(f).metadata.num_row_groups
        named.update(dict.fromkeys(range(unit, unit + groups), split_of_name(path)))
        unit += groups
    return named


def _parquet_candidates(batch: pa.Table, splits: dict[int, str | None] | None = None) -> pa.Table:
    positions = [None] * batch.num_rows  # a Parquet batch not read by read_row_groups
    if "__position" in batch.column_names:
        positions = batch["__position"].to_pylist()
        batch = batch.drop_columns(["__position"])
    columns = {name.lower(): batch.column(name).to_pylist() for name in batch.column_names}

    def pick(names: tuple[str, ...]) -> list:
        return next((columns[n] for n in names if n in columns), [None] * batch.num_rows)

    # Each row's own split: kept by a curation (candidates.candidate checks it), and by the
    # released dataset as it is, else the one its file's name says.
    stated = pick(SPLIT_COLUMNS)
    rows = [
        {**candidate(*fields), "position": position}
        for position, *fields in zip(
            positions,
            pick(ALT_TEXT_COLUMNS),
            pick(IMAGE_URL_COLUMNS),
            pick(PAGE_URL_COLUMNS),
            pick(IMAGE_COLUMNS),
            stated if splits is None else [None] * batch.num_rows,
        )
    ]
    if is_labeled(batch.schema):
        for row, *lists in zip(rows, *(columns[n] for n in LABEL_COLUMNS)):
            row["labels"], problem = dataset_labels(*lists)
            if problem and row["reason"] is None:
                row.update(stage=READ_STAGE, reason=problem.reason, detail=problem.detail)
    if splits is not None:
        for row, split in zip(rows, stated):
            row["split"] = str(split) if split else splits.get(row["position"] >> ROW_BITS)
    return pa.Table.from_pylist(rows, schema=IN_FLIGHT)


def is_labeled(schema: pa.Schema) -> bool:
    """Whether a Parquet batch has the `labeled` config's columns with its card's types: the
    labels are read only then (a `labels` column of another dataset means something else)."""
    types = {field.name.lower(): field.type for field in schema}
    wanted = dict(zip(LABEL_COLUMNS, (pa.string(), pa.string(), None)))
    for name, value_type in wanted.items():
        column = types.get(name)
        if column is None or not (pa.types.is_list(column) or pa.types.is_large_list(column)):
            return False
        inner = column.value_type
        if value_type is None and not (pa.types.is_floating(inner) or pa.types.is_null(inner)):
            return False
        if value_type is not None and not (_holds(inner, "string")):
            return False
    return True


def most_blocks(uri: str, fmt: str, range_bytes: int, enough: int) -> int | None:
    """The most blocks `read_candidates` can give this input, from its files' sizes alone:
    a splittable file comes in pieces of `range_bytes` (as plan_ranges cuts it), any other
    in at most as many. Counting stops at `enough` (the workers there is room for); None
    when the input holds Parquet, whose row groups, not its size, decide."""
    fs, _ = storage.resolve(uri)
    blocks = 0
    for path in candidate_files(uri):
        if fmt == "parquet" or (fmt == "auto" and detect_format(path, b"") == "parquet"):
            return None
        blocks += max(1, -(-fs.get_file_info(path).size // range_bytes))
        if blocks >= enough:
            break
    return blocks
