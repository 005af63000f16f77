"""Property-based tests of the candidate readers: whatever bytes a user gives, reading ends
with one row per record (a candidate, or a rejection at stage `read`) that Arrow can hold,
never with an exception that ends the job. So the next hostile row is found here.

Bounded: a few hundred small examples in all, seconds. No example database is written
(`database=None`): the tests leave nothing in the working tree.
"""

from __future__ import annotations

import io
import json
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from conceptual.candidates import (
    COMPRESSION_MAGIC,
    READ_STAGE,
    CandidateFormatError,
    compression_of,
)
from conceptual.pipelines.dataflow.readers import (
    _parquet_candidates,
    _read_ranges,
    check_parquet,
    plan_ranges,
)
from conceptual.records import IN_FLIGHT

FUZZ = settings(
    max_examples=60,
    deadline=5000,  # ms; generous, the machine running the tests may be busy
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# Any character, lone surrogates (which JSON can escape) often: Hypothesis leaves those
# out unless asked, and they are rare among all the characters.
ANY_CHAR = st.characters(exclude_categories=()) | st.characters(categories=["Cs"])
# Bytes that exercise the parsers: separators, quotes, brackets, digits, UTF-8 fragments.
NASTY_BYTES = st.lists(
    st.sampled_from(
        [b"\t", b",", b'"', b"\n", b"\r", b"[", b"{", b"}", b":", b"\\ud83d"]
        + [b"1" * 4400, b"[" * 1500]  # past Python's digit limit and JSON's nesting depth
        + [b"\xff", b"\xed\xa0\x80", b"\xc3", b"\x1f\x8b", b"\x00", b"a", b"http://x.test/1"]
    )
    | st.binary(max_size=20),
    max_size=60,
).map(b"".join)


def read_file(data: bytes, name: str, range_bytes: int) -> pa.Table:
    """What the read tasks of a run make of one file, without Ray."""
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder, name))
        Path(path).write_bytes(data)
        fs = pafs.LocalFileSystem()
        ranges = plan_ranges(fs, [path], "auto", range_bytes)
        return pa.concat_tables(_read_ranges(pa.Table.from_pylist(ranges), fs))


def check_rows(table: pa.Table) -> list[dict]:
    """Every row is a candidate or a rejection at read, with an id and a reason to show."""
    assert table.schema == IN_FLIGHT
    rows = table.to_pylist()
    for row in rows:
        assert row["id"]
        assert row["reason"] is None or (row["stage"] == READ_STAGE and row["detail"])
    return rows


def lines_in(data: bytes) -> int:
    return sum(1 for line in data.split(b"\n") if line.removesuffix(b"\r").strip())


@FUZZ
@given(data=NASTY_BYTES, range_bytes=st.integers(1, 64))
@pytest.mark.parametrize("name", ["c.tsv", "c.jsonl"])
def test_line_files_give_one_row_per_line_whatever_the_bytes(name, data, range_bytes):
    assume(compression_of(data) is None)  # those are decompressed: the test below
    rows = check_rows(read_file(data, name, range_bytes))
    assert len(rows) == lines_in(data)
    whole = check_rows(read_file(data, name, 1 << 20))
    # Splits change nothing (but where a rejection says the line was).
    assert [(r["reason"], r["alt_text"]) for r in rows] == [
        (r["reason"], r["alt_text"]) for r in whole
    ]


@FUZZ
@given(magic=st.sampled_from(list(COMPRESSION_MAGIC)), data=NASTY_BYTES)
def test_bytes_that_look_compressed_are_read_or_refused_clearly(magic, data):
    try:
        check_rows(read_file(magic + data, "c.jsonl", 1 << 20))
    except CandidateFormatError as exc:
        assert "does not read as" in str(exc)


JSON_TEXT = st.lists(ANY_CHAR, max_size=20).map("".join)  # text() would drop surrogates
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | JSON_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)
JSON_RECORDS = st.dictionaries(
    st.sampled_from(["alt_text", "caption", "text", "image_url", "url", "page_url", "Other"]),
    JSON_TEXT | JSON_VALUES,  # the fields are text most often
)


@FUZZ
@given(records=st.lists(JSON_RECORDS | JSON_VALUES, max_size=5))
def test_jsonl_of_any_json_values(records):
    data = "\n".join(json.dumps(r) for r in records).encode()  # escapes lone surrogates
    rows = check_rows(read_file(data, "c.jsonl", 1 << 20))
    assert len(rows) == len(records)


def records_in(data: bytes, delimiter: str) -> int:
    """Lines (as csv ends them: LF, CR or CRLF) holding more than delimiters and spaces."""
    text = io.StringIO(data.decode("utf-8", "surrogateescape"), newline="")
    return sum(1 for line in text if line.rstrip("\r\n").replace(delimiter, "").strip())


@FUZZ
@given(data=NASTY_BYTES, delimiter=st.sampled_from([",", "\t"]))
def test_delimited_files_with_a_header(data, delimiter):
    header = f"alt_text{delimiter}image_url\n".encode()
    name = "c.csv" if delimiter == "," else "c.tsv"
    rows = check_rows(read_file(header + data, name, 1 << 20))
    if b'"' not in data or delimiter == "\t":  # no quoting: one row per line
        assert len(rows) == records_in(data, delimiter)
    else:  # a quoted field may span lines; a stray quote costs its own line, not the rest
        assert len(rows) <= records_in(data, delimiter)


@FUZZ
@given(
    cells=st.lists(
        st.tuples(
            st.none() | st.text(max_size=30),
            st.none() | st.text(max_size=30),
            st.none() | st.binary(max_size=10),
        ),
        max_size=20,
    )
)
def test_parquet_of_any_strings_and_bytes(cells):
    table = pa.table(
        {
            "alt_text": pa.array([c[0] for c in cells], pa.string()),
            "image_url": pa.array([c[1] for c in cells], pa.string()),
            "image": pa.array([c[2] for c in cells], pa.binary()),
        }
    )
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder, "c.parquet"))
        pq.write_table(table, path)
        check_parquet(pafs.LocalFileSystem(), path)
        read_back = pq.read_table(path)
    rows = check_rows(_parquet_candidates(read_back))
    assert len(rows) == len(cells)


@FUZZ
@given(data=NASTY_BYTES)
def test_bytes_named_parquet_are_refused_clearly(data):
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder, "c.parquet"))
        Path(path).write_bytes(data)
        with pytest.raises(CandidateFormatError, match="is not a Parquet file"):
            check_parquet(pafs.LocalFileSystem(), path)
