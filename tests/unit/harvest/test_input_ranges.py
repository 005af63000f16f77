"""Byte ranges of line files: every line read exactly once, whole, whatever the
range size (no Ray needed: the range reader works on any seekable file)."""

from __future__ import annotations

import gzip
import io
import json
import random
import re

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from conceptual.candidates import CandidateFormatError
from conceptual.pipelines.dataflow.readers import (
    _read_ranges,
    check_parquet,
    plan_ranges,
    read_line_range,
)


def cut_all(data: bytes, step: int) -> list[bytes]:
    f = io.BytesIO(data)
    return [
        b"".join(piece for _, piece in read_line_range(f, start, min(start + step, len(data)), 7))
        for start in range(0, max(len(data), 1), step)
    ]


@pytest.mark.parametrize("seed", range(20))
def test_ranges_partition_the_lines(seed):
    rng = random.Random(seed)
    lines = [("x" * rng.randint(0, 40)).encode() for _ in range(rng.randint(0, 60))]
    data = b"\n".join(lines) + (b"\n" if rng.random() < 0.7 else b"")
    for step in (1, 2, 3, 5, 17, 64, 10_000):
        pieces = cut_all(data, step)
        assert b"".join(pieces) == data
        assert all(p == b"" or p.endswith(b"\n") or data.endswith(p) for p in pieces)


def test_plan_ranges_cuts_line_files_and_keeps_csv_whole(tmp_path):
    (tmp_path / "a.tsv").write_bytes(b"A dog\thttp://x.test/1.jpg\n" * 100)
    (tmp_path / "b.csv").write_bytes(b"alt_text,image_url\n" + b"A cat,http://x.test/2.jpg\n" * 100)
    (tmp_path / "c.tsv").write_bytes(
        b"alt_text\timage_url\n" + b"A cow\thttp://x.test/3.jpg\n" * 100
    )
    fs = pafs.LocalFileSystem()
    files = [str(tmp_path / n) for n in ("a.tsv", "b.csv", "c.tsv")]
    ranges = plan_ranges(fs, files, "auto", range_bytes=500)
    by_file = {f: [s for s in ranges if s["path"] == f] for f in files}
    assert len(by_file[files[0]]) == 6 and by_file[files[0]][0]["format"] == "cc_tsv"
    assert len(by_file[files[1]]) == 1 and by_file[files[1]][0]["format"] == "csv"
    assert by_file[files[2]][1]["header"] == b"alt_text\timage_url\n"


def test_plan_ranges_fails_fast_on_a_bad_header(tmp_path):
    (tmp_path / "bad.csv").write_bytes(b"alt_text,width\nA,1\n")
    with pytest.raises(CandidateFormatError, match="image URL column"):
        plan_ranges(pafs.LocalFileSystem(), [str(tmp_path / "bad.csv")], "auto", 1 << 20)


def write_compressed(path, data: bytes, codec: str) -> str:
    with pa.CompressedOutputStream(str(path), codec) as out:
        out.write(data)
    return str(path)


def read_all(files: list[str], range_bytes: int = 1 << 20) -> list[dict]:
    """What the read tasks of a run make of these files, without Ray."""
    fs = pafs.LocalFileSystem()
    ranges = plan_ranges(fs, files, "auto", range_bytes)
    return pa.concat_tables(_read_ranges(pa.Table.from_pylist(ranges), fs)).to_pylist()


@pytest.mark.parametrize("codec, name", [("gzip", "c.jsonl.gz"), ("zstd", "c.jsonl")])
def test_compressed_files_are_read_whole_and_decompressed(tmp_path, codec, name):
    # Known by their first bytes, whatever the name: the zstd file here is named .jsonl.
    records = [
        {"alt_text": f"A dog {i}", "image_url": f"http://x.test/{i}.jpg"} for i in range(2000)
    ]
    data = "".join(json.dumps(r) + "\n" for r in records).encode()
    path = write_compressed(tmp_path / name, data, codec)
    ranges = plan_ranges(pafs.LocalFileSystem(), [path], "auto", range_bytes=1000)
    assert [(s["format"], s["compression"]) for s in ranges] == [("jsonl", codec)]
    out = read_all([path], range_bytes=1000)
    assert len(out) == 2000 and all(r["reason"] is None for r in out)
    assert out[1999]["alt_text"] == "A dog 1999"


def test_compressed_csv_header_is_checked_after_decompressing(tmp_path):
    path = write_compressed(tmp_path / "c.csv.gz", b"alt_text,width\nA,1\n", "gzip")
    with pytest.raises(CandidateFormatError, match="image URL column"):
        plan_ranges(pafs.LocalFileSystem(), [path], "auto", 1 << 20)


def test_truncated_gzip_is_a_clear_error(tmp_path):
    whole = gzip.compress(
        b"".join(b"A dog %d\thttp://x.test/%d.jpg\n" % (i, i) for i in range(5000))
    )
    (tmp_path / "c.tsv.gz").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(CandidateFormatError, match="c.tsv.gz does not read as gzip"):
        read_all([str(tmp_path / "c.tsv.gz")])


def test_a_file_named_parquet_that_is_not_parquet_is_a_clear_error(tmp_path):
    (tmp_path / "c.parquet").write_bytes(b"alt_text\timage_url\nA dog\thttp://x.test/1.jpg\n")
    with pytest.raises(CandidateFormatError, match="c.parquet is not a Parquet file"):
        check_parquet(pafs.LocalFileSystem(), str(tmp_path / "c.parquet"))


@pytest.mark.parametrize(
    "columns, message",
    [
        ({"alt_text": [1, 2], "image_url": ["u1", "u2"]}, "column 'alt_text' is int64"),
        ({"caption": ["a", "b"], "url": [[1], [2]]}, "column 'url' is list<"),
        ({"text": ["a", "b"], "url": ["u1", "u2"], "image": ["x", "y"]}, "'image' is string"),
    ],
)
def test_parquet_columns_of_the_wrong_type_are_a_clear_error(tmp_path, columns, message):
    pq.write_table(pa.table(columns), tmp_path / "c.parquet")
    with pytest.raises(CandidateFormatError, match=re.escape(message)):
        check_parquet(pafs.LocalFileSystem(), str(tmp_path / "c.parquet"))


def test_parquet_with_dictionary_and_null_columns_is_accepted(tmp_path):
    table = pa.table({"alt_text": pa.array(["a", "b"]).dictionary_encode(), "url": ["u", "v"]})
    pq.write_table(table.append_column("page_url", pa.nulls(2)), tmp_path / "c.parquet")
    check_parquet(pafs.LocalFileSystem(), str(tmp_path / "c.parquet"))
