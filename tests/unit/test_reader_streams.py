"""A compressed candidates file is parsed as a stream, a bounded piece at a time: a file that
expands hundreds of times never sits in one read task's memory whole, and every row still
comes out once, in order, with its position."""

from __future__ import annotations

import gzip

import pyarrow as pa
import pytest

from conceptual import storage
from conceptual.candidates import CandidateFormatError
from conceptual.pipelines import readers


def read_all(path, monkeypatch, stream_bytes: int) -> list[pa.Table]:
    monkeypatch.setattr(readers, "STREAM_BYTES", stream_bytes)
    fs, _ = storage.resolve(str(path))
    ranges = readers.plan_ranges(fs, [str(path)], "auto", 1 << 20)
    return list(readers._read_ranges(pa.Table.from_pylist(ranges), fs))


def test_a_gzipped_tsv_is_read_in_pieces_each_row_once_in_order(tmp_path, monkeypatch):
    lines = [f"A dog number {i} runs\thttp://x.test/{i}.jpg\n" for i in range(5000)]
    path = tmp_path / "candidates.tsv.gz"
    path.write_bytes(gzip.compress(("alt_text\timage_url\n" + "".join(lines)).encode()))

    tables = read_all(path, monkeypatch, stream_bytes=8192)

    assert len(tables) > 20  # pieces, not the whole content at once
    assert max(t.nbytes for t in tables) < 64 * 1024
    rows = pa.concat_tables(tables).to_pylist()
    assert [r["alt_text"] for r in rows] == [f"A dog number {i} runs" for i in range(5000)]
    assert [r["position"] for r in rows] == list(readers.unit_positions(0, 5000))
    assert all(r["reason"] is None for r in rows)  # the header is read with every piece


def test_a_line_longer_than_a_piece_is_read_whole(tmp_path, monkeypatch):
    long = "A dog " + "very " * 5000 + "long\thttp://x.test/long.jpg\n"
    path = tmp_path / "candidates.tsv.gz"
    path.write_bytes(
        gzip.compress(("alt_text\timage_url\n" + long + "A cat\thttp://x.test/c\n").encode())
    )

    rows = pa.concat_tables(read_all(path, monkeypatch, stream_bytes=1024)).to_pylist()

    assert [r["alt_text"][:6] for r in rows] == ["A dog ", "A cat"]


def test_a_compressed_csv_larger_than_the_limit_is_refused_by_name(tmp_path, monkeypatch):
    path = tmp_path / "candidates.csv.gz"
    path.write_bytes(gzip.compress(b"alt_text,image_url\n" + b"A dog,http://x.test/d\n" * 1000))
    monkeypatch.setattr(readers, "MAX_WHOLE_BYTES", 4096)

    with pytest.raises(CandidateFormatError, match="compressed CSV is read whole"):
        read_all(path, monkeypatch, stream_bytes=1024)
