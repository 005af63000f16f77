"""Byte-range splits of line files: every line read exactly once, whole, whatever the
split size (no Ray needed: the range reader works on any seekable file)."""

from __future__ import annotations

import io
import random

import pyarrow.fs as pafs
import pytest

from conceptual.candidates import CandidateFormatError
from conceptual.pipelines.readers import plan_splits, read_line_range


def split_all(data: bytes, step: int) -> list[bytes]:
    f = io.BytesIO(data)
    return [
        read_line_range(f, start, min(start + step, len(data)), chunk=7)[1]
        for start in range(0, max(len(data), 1), step)
    ]


@pytest.mark.parametrize("seed", range(20))
def test_splits_partition_the_lines(seed):
    rng = random.Random(seed)
    lines = [("x" * rng.randint(0, 40)).encode() for _ in range(rng.randint(0, 60))]
    data = b"\n".join(lines) + (b"\n" if rng.random() < 0.7 else b"")
    for step in (1, 2, 3, 5, 17, 64, 10_000):
        pieces = split_all(data, step)
        assert b"".join(pieces) == data
        assert all(p == b"" or p.endswith(b"\n") or data.endswith(p) for p in pieces)


def test_plan_splits_cuts_line_files_and_keeps_csv_whole(tmp_path):
    (tmp_path / "a.tsv").write_bytes(b"A dog\thttp://x.test/1.jpg\n" * 100)
    (tmp_path / "b.csv").write_bytes(b"alt_text,image_url\n" + b"A cat,http://x.test/2.jpg\n" * 100)
    (tmp_path / "c.tsv").write_bytes(
        b"alt_text\timage_url\n" + b"A cow\thttp://x.test/3.jpg\n" * 100
    )
    fs = pafs.LocalFileSystem()
    files = [str(tmp_path / n) for n in ("a.tsv", "b.csv", "c.tsv")]
    splits = plan_splits(fs, files, "auto", split_bytes=500)
    by_file = {f: [s for s in splits if s["path"] == f] for f in files}
    assert len(by_file[files[0]]) == 6 and by_file[files[0]][0]["format"] == "cc_tsv"
    assert len(by_file[files[1]]) == 1 and by_file[files[1]][0]["format"] == "csv"
    assert by_file[files[2]][1]["header"] == b"alt_text\timage_url\n"


def test_plan_splits_fails_fast_on_a_bad_header(tmp_path):
    (tmp_path / "bad.csv").write_bytes(b"alt_text,width\nA,1\n")
    with pytest.raises(CandidateFormatError, match="image URL column"):
        plan_splits(pafs.LocalFileSystem(), [str(tmp_path / "bad.csv")], "auto", 1 << 20)
