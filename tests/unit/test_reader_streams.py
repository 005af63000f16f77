"""A compressed candidates file is parsed as a stream, a bounded piece at a time: a file that
expands hundreds of times never sits in one read task's memory whole, and every row still
comes out once, in order, with its position."""

from __future__ import annotations

import gzip
import subprocess
import sys
import zlib

import pyarrow as pa
import pytest

from conceptual import storage
from conceptual.candidates import CandidateFormatError
from conceptual.pipelines import readers


def read_all(path, monkeypatch, stream_bytes: int, **options) -> list[pa.Table]:
    monkeypatch.setattr(readers, "STREAM_BYTES", stream_bytes)
    fs, _ = storage.resolve(str(path))
    ranges = readers.plan_ranges(fs, [str(path)], "auto", 1 << 20)
    return list(readers._read_ranges(pa.Table.from_pylist(ranges), fs, **options))


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


def gzip_of_one_long_line(path, line_bytes: int) -> None:
    """A gzip holding a header, one `line_bytes` line and a short one, written as a stream."""
    packer = zlib.compressobj(6, zlib.DEFLATED, 31)  # 31: the gzip container
    with open(path, "wb") as out:
        out.write(packer.compress(b"alt_text\timage_url\nA dog "))
        chunk = b"very " * (1 << 14)
        for _ in range(line_bytes // len(chunk)):
            out.write(packer.compress(chunk))
        out.write(packer.compress(b"long\thttp://x.test/d.jpg\nA cat\thttp://x.test/c.jpg\n"))
        out.write(packer.flush())


# The peak is VmHWM, this process's own: ru_maxrss would count the forking parent's pages
# (Linux keeps the larger of the two across exec), and pytest's process may be gigabytes.
LONG_LINE_CHILD = """
import sys
import pyarrow as pa
from conceptual import storage
from conceptual.pipelines import readers
fs, _ = storage.resolve(sys.argv[1])
ranges = readers.plan_ranges(fs, [sys.argv[1]], "auto", 1 << 20)
rows = pa.concat_tables(readers._read_ranges(pa.Table.from_pylist(ranges), fs)).to_pylist()
print([(r["reason"], r["alt_text"][:6]) for r in rows])
status = open("/proc/self/status").read()
print(int(status.split("VmHWM:")[1].split()[0]) // 1024)
"""


def test_a_line_over_the_limit_is_rejected_as_it_streams_never_held(tmp_path):
    """512 MiB of one line in a 0.5 MB gzip (2.7 GB and 16 s in a read task when the line
    was gathered whole): one too_long row, the next line read, the reader's whole process
    under 1 GB at its peak."""
    path = tmp_path / "bomb.tsv.gz"
    gzip_of_one_long_line(path, 512 << 20)
    assert path.stat().st_size < 1 << 20
    child = subprocess.run(
        [sys.executable, "-c", LONG_LINE_CHILD, str(path)], capture_output=True, text=True
    )
    assert child.returncode == 0, child.stderr
    found, peak_mb = child.stdout.strip().splitlines()
    assert found == "[('too_long', 'A dog '), (None, 'A cat')]"
    assert int(peak_mb) < 1024, f"peak {peak_mb} MiB"


@pytest.mark.parametrize("compressed", [True, False], ids=["gzip", "plain"])
def test_a_long_line_is_cut_at_the_limit_with_its_length_and_the_rest_in_place(
    tmp_path, monkeypatch, compressed
):
    """The row budget's line limit (limits.row_bytes, conceptual/limits.py), in a gzip as it
    streams and in a plain file's byte range (which read the whole line to finish it)."""
    path = tmp_path / "candidates.tsv.gz"
    gzip_of_one_long_line(path, 1 << 20)
    if not compressed:
        path = path.with_suffix("")
        path.write_bytes(gzip.decompress((tmp_path / "candidates.tsv.gz").read_bytes()))
    rows = pa.concat_tables(read_all(path, monkeypatch, 4096, line_bytes=100_000)).to_pylist()
    assert [(r["reason"], r["alt_text"][:6]) for r in rows] == [
        ("too_long", "A dog "),
        (None, "A cat"),
    ]
    size = len(b"A dog ") + (1 << 20) // 81920 * 81920 + len(b"long\thttp://x.test/d.jpg")
    assert f"a line of {size} bytes, over 100000" in rows[0]["detail"]
    assert [r["position"] for r in rows] == list(readers.unit_positions(0, 2))


def test_a_piece_of_short_lines_is_parsed_into_tables_of_bounded_rows(tmp_path, monkeypatch):
    """A 1.5 MB gzip of short lines (1.27 GB in one table of every row of a 32 MiB piece)."""
    monkeypatch.setattr(readers, "ROWS_PER_TABLE", 1000)
    path = tmp_path / "candidates.tsv.gz"
    path.write_bytes(gzip.compress(b"alt_text\timage_url\n" + b"A\thttp://x.test/a\n" * 10_500))
    tables = read_all(path, monkeypatch, stream_bytes=1 << 20)
    assert [t.num_rows for t in tables] == [1000] * 10 + [500]
