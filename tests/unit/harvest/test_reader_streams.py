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
from conceptual.pipelines.dataflow import readers


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


# How each line format writes the long line: a CSV's alt-text is one quoted field.
SEPARATORS = {"tsv": (b"\t", b""), "csv": (b",", b'"')}


def gzip_of_one_long_line(path, line_bytes: int, fmt: str = "tsv") -> None:
    """A gzip holding a header, one `line_bytes` line and a short one, written as a stream."""
    packer = zlib.compressobj(6, zlib.DEFLATED, 31)  # 31: the gzip container
    sep, quote = SEPARATORS[fmt]
    with open(path, "wb") as out:
        out.write(packer.compress(b"alt_text" + sep + b"image_url\n" + quote + b"A dog "))
        chunk = b"very " * (1 << 14)
        for _ in range(line_bytes // len(chunk)):
            out.write(packer.compress(chunk))
        out.write(packer.compress(b"long" + quote + sep + b"http://x.test/d.jpg\n"))
        out.write(packer.compress(b"A cat" + sep + b"http://x.test/c.jpg\n"))
        out.write(packer.flush())


# The peak is VmHWM, this process's own: ru_maxrss would count the forking parent's pages
# (Linux keeps the larger of the two across exec), and pytest's process may be gigabytes.
LONG_LINE_CHILD = """
import sys
import pyarrow as pa
from conceptual import storage
from conceptual.pipelines.dataflow import readers
fs, _ = storage.resolve(sys.argv[1])
ranges = readers.plan_ranges(fs, [sys.argv[1]], "auto", 1 << 20)
rows = pa.concat_tables(readers._read_ranges(pa.Table.from_pylist(ranges), fs)).to_pylist()
print([(r["reason"], r["alt_text"].strip('"')[:6]) for r in rows])
status = open("/proc/self/status").read()
print(int(status.split("VmHWM:")[1].split()[0]) // 1024)
"""


@pytest.mark.parametrize("fmt", ["tsv", "csv"])
def test_a_line_over_the_limit_is_rejected_as_it_streams_never_held(tmp_path, fmt):
    """512 MiB of one line in a 0.5 MB gzip (2.7 GB and 16 s in a read task when the line
    was gathered whole; a compressed CSV, read whole, took 5.5 GB for a quoted 900 MiB
    field): one too_long row, the next line read, the reader's whole process under 1 GB at
    its peak."""
    path = tmp_path / f"bomb.{fmt}.gz"
    gzip_of_one_long_line(path, 512 << 20, fmt)
    assert path.stat().st_size < 1 << 20
    child = subprocess.run(
        [sys.executable, "-c", LONG_LINE_CHILD, str(path)], capture_output=True, text=True
    )
    assert child.returncode == 0, child.stderr
    found, peak_mb = child.stdout.strip().splitlines()
    assert found == "[('too_long', 'A dog '), (None, 'A cat')]"
    assert int(peak_mb) < 1024, f"peak {peak_mb} MiB"


def plain_or_gzip(path, compressed: bool):
    """`path` (a gzip), or a copy of its content without the .gz."""
    if compressed:
        return path
    plain = path.with_suffix("")
    plain.write_bytes(gzip.decompress(path.read_bytes()))
    return plain


@pytest.mark.parametrize("fmt", ["tsv", "csv"])
@pytest.mark.parametrize("compressed", [True, False], ids=["gzip", "plain"])
def test_a_long_line_is_cut_at_the_limit_with_its_length_and_the_rest_in_place(
    tmp_path, monkeypatch, compressed, fmt
):
    """The row budget's line limit (limits.row_bytes, conceptual/limits.py), in a gzip as it
    streams and in a plain file's byte range (which read the whole line to finish it), and
    in a CSV (read whole, plain or compressed)."""
    path = tmp_path / f"candidates.{fmt}.gz"
    gzip_of_one_long_line(path, 1 << 20, fmt)
    path = plain_or_gzip(path, compressed)
    rows = pa.concat_tables(read_all(path, monkeypatch, 4096, line_bytes=100_000)).to_pylist()
    assert [(r["reason"], r["alt_text"].strip('"')[:6]) for r in rows] == [
        ("too_long", "A dog "),
        (None, "A cat"),
    ]
    sep, quote = SEPARATORS[fmt]
    size = len(quote + b"A dog ") + (1 << 20) // 81920 * 81920
    size += len(b"long" + quote + sep + b"http://x.test/d.jpg")
    assert f"a line of {size} bytes, over 100000" in rows[0]["detail"]
    assert [r["position"] for r in rows] == list(readers.unit_positions(0, 2))


def csv_of(*rows: bytes) -> bytes:
    return b"alt_text,image_url\n" + b"".join(rows)


@pytest.mark.parametrize("compressed", [True, False], ids=["gzip", "plain"])
def test_a_csv_streams_with_quoted_line_breaks_across_pieces(tmp_path, monkeypatch, compressed):
    """Pieces of a few hundred bytes, records whose quoted alt-texts hold line breaks: each
    record whole, once, in order, in tables of bounded size."""
    records = [b'"A dog\nnumber %d\nruns",http://x.test/%d.jpg\n' % (i, i) for i in range(500)]
    path = tmp_path / "candidates.csv.gz"
    path.write_bytes(gzip.compress(csv_of(*records)))
    path = plain_or_gzip(path, compressed)
    tables = read_all(path, monkeypatch, stream_bytes=512)
    rows = pa.concat_tables(tables).to_pylist()
    assert [r["alt_text"] for r in rows] == [f"A dog\nnumber {i}\nruns" for i in range(500)]
    assert all(r["reason"] is None for r in rows)
    assert [r["position"] for r in rows] == list(readers.unit_positions(0, 500))
    assert len(tables) > 20 and max(t.num_rows for t in tables) < 100


def test_a_csv_record_over_the_limit_loses_its_first_line_and_reading_goes_on(
    tmp_path, monkeypatch
):
    """A quoted field over many short lines, 1 MiB in all: the csv reader would hold it
    whole; past the line limit its first line is rejected (`too_long`), and reading starts
    again on its next line, as after a stray quote (the two look the same until the quote
    closes), each line of it one row at most."""
    inside = b"very very very\n" * (1 << 16)
    path = tmp_path / "candidates.csv.gz"
    path.write_bytes(
        gzip.compress(csv_of(b'"A dog\n', inside, b'long",http://x.test/d.jpg\n', b"A cat,c\n"))
    )
    rows = pa.concat_tables(read_all(path, monkeypatch, 4096, line_bytes=100_000)).to_pylist()
    assert (rows[0]["reason"], rows[0]["alt_text"]) == ("too_long", '"A dog')
    assert rows[0]["detail"].startswith(f"{path}:2: a record of over 100000 bytes")
    assert {r["reason"] for r in rows[1:-2]} == {"malformed_row"}  # the lines of the field
    assert (rows[-1]["reason"], rows[-1]["alt_text"]) == (None, "A cat")
    assert len(rows) == 1 + (1 << 16) + 2


def test_a_piece_of_short_lines_is_parsed_into_tables_of_bounded_rows(tmp_path, monkeypatch):
    """A 1.5 MB gzip of short lines (1.27 GB in one table of every row of a 32 MiB piece)."""
    monkeypatch.setattr(readers, "ROWS_PER_TABLE", 1000)
    path = tmp_path / "candidates.tsv.gz"
    path.write_bytes(gzip.compress(b"alt_text\timage_url\n" + b"A\thttp://x.test/a\n" * 10_500))
    tables = read_all(path, monkeypatch, stream_bytes=1 << 20)
    assert [t.num_rows for t in tables] == [1000] * 10 + [500]
