"""Candidates from one web archive, read record by record as it streams (fastwarc), so that
no file is ever held whole and no record ends the file.

A file is WARC or WAT by its content, record by record: a WAT's records are `metadata` with
JSON content (harvest/wat.py), a WARC's pages are `response` records with an HTTP response
(harvest/html.py); plain, gzip per record (as Common Crawl ships them) or one gzip stream.
Every record read is counted once: an HTML page (`html_pages`), or skipped for one of
pages.RECORD_REASONS. A truncated or corrupt record is `unreadable_record`, and reading goes
on at the next record: fastwarc finds it in a plain WARC; in a gzip-per-record file the
reader starts again at the next gzip member (one count for each corrupt stretch). A file
compressed as one stream cannot be entered again past a corrupt spot: its reading ends there,
counted the same way. A record's body past `max_record_bytes` is not read.
"""

from __future__ import annotations

import io
import logging
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from typing import BinaryIO

from fastwarc.stream_io import BrotliReader, ChunkedReader, GzipReader
from fastwarc.warc import ArchiveIterator, WarcRecord, WarcRecordType
from resiliparse.parse.encoding import detect_mime

from conceptual.harvest.html import page_from_html
from conceptual.harvest.pages import HarvestRules, Page, judge
from conceptual.harvest.wat import UnreadableRecord, is_html_type, page_from_wat

log = logging.getLogger(__name__)

GZIP_MAGIC = b"\x1f\x8b\x08"
WARC_MAGIC = b"WARC/"
SCAN_BYTES = 1 << 16
# What fastwarc raises on a stream it cannot read on: a decompression error (OSError), a
# header it cannot parse (ValueError), and a panic of its Rust core (a BaseException).
READ_ERRORS: tuple[type[BaseException], ...] = (OSError, ValueError, EOFError)


def _is_read_error(exc: BaseException) -> bool:
    return isinstance(exc, READ_ERRORS) or type(exc).__name__ == "PanicException"


class Positioned(io.RawIOBase):
    """A stream that tells its position (fastwarc asks; pyarrow's streams cannot): the bytes
    read so far, counted from `start`, where the stream was opened."""

    def __init__(self, stream: BinaryIO, start: int = 0) -> None:
        self.stream, self.position = stream, start

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read() if size is None or size < 0 else self.stream.read(size)
        self.position += len(data)
        return data

    def readinto(self, buffer) -> int:  # io.RawIOBase's way in, for readers that use it
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def tell(self) -> int:
        return self.position

    def close(self) -> None:
        self.stream.close()
        super().close()


Opener = Callable[[int], BinaryIO]  # a byte offset -> the file's stream from there


def harvest_archive(
    open_at: Opener, source: str, rules: HarvestRules, counts: Counter
) -> Iterator[dict]:
    """The candidates of one archive (`open_at(offset)` opens it at a byte offset; `source`
    names it in every candidate), counting into `counts` what each record and image became
    (pages.judge's keys, `records`, `html_pages`, RECORD_REASONS), and the file's format
    (`format.warc` or `format.wat`, by its first record after any warcinfo;
    `not_an_archive` when no record is found in it)."""
    kind = None
    for record, body in _records(open_at, counts, rules.max_record_bytes):
        if record is None:  # a corrupt stretch, counted
            continue
        counts["records"] += 1
        wat = _is_wat(record)
        if kind is None and record.record_type != WarcRecordType.warcinfo:
            kind = "wat" if wat else "warc"
        try:
            reason, page = page_from_wat(body) if wat else _page(record, body, rules)
        except UnreadableRecord as exc:
            log.debug("%s at %d: %s", source, record.stream_pos, exc)
            reason, page = "unreadable_record", None
        except Exception:  # no record ends the file: counted, and shown to be fixed
            log.exception("%s at %d: the record could not be harvested", source, record.stream_pos)
            reason, page = "internal_error", None
        if page is None:
            counts[reason] += 1
            continue
        counts["html_pages"] += 1
        yield from judge(page, rules, counts, source=source, record_offset=record.stream_pos)
    if kind is not None:
        counts[f"format.{kind}"] += 1


def _records(
    open_at: Opener, counts: Counter, limit: int
) -> Iterator[tuple[WarcRecord, bytes] | tuple[None, None]]:
    """(record, its first `limit` bytes of body) of every record, with (None, None) for a
    corrupt stretch (counted as a record, unreadable_record), read past where the format
    allows (module docstring); `not_an_archive` counted when no record is found at all."""
    with open_at(0) as first:
        head = first.read(SCAN_BYTES)
    if not head:
        return  # an empty file holds no records and is no error
    magic = GZIP_MAGIC if head.startswith(GZIP_MAGIC[:2]) else WARC_MAGIC
    if not _starts_a_record(head, magic):
        counts["not_an_archive"] += 1
        return
    start, found, failing = 0, False, False
    while True:
        stream = Positioned(open_at(start), start)
        last = start
        try:
            for record in ArchiveIterator(stream, parse_http=True, auto_decode="none"):
                last, found, failing = record.stream_pos, True, False
                yield record, record.reader.read(limit)
            break
        except BaseException as exc:
            if not _is_read_error(exc):
                raise
            if not failing:  # one count for each corrupt stretch, however many tries it takes
                counts["records"] += 1
                counts["unreadable_record"] += 1
                found = failing = True
                yield None, None
        finally:
            stream.close()
        next_start = _next_record(open_at, last + 1, magic)
        if next_start is None:
            break
        start = next_start
    if not found:
        counts["not_an_archive"] += 1


def _starts_a_record(head: bytes, magic: bytes) -> bool:
    """Whether a file's first bytes (decompressed when gzip) begin a WARC record."""
    if magic == GZIP_MAGIC:
        try:
            head = zlib.decompressobj(wbits=31).decompress(head, len(WARC_MAGIC))
        except zlib.error:
            return False
    return head.startswith(WARC_MAGIC)


def _next_record(open_at: Opener, offset: int, magic: bytes) -> int | None:
    """The offset of the next `magic` (a gzip member's start, or `WARC/`) at or after
    `offset`, or None when there is none."""
    with open_at(offset) as stream:
        carry = b""
        while block := stream.read(SCAN_BYTES):
            window = carry + block
            found = window.find(magic)
            if found >= 0:
                return offset - len(carry) + found
            carry = window[-(len(magic) - 1) :]
            offset += len(block)
    return None


def _is_wat(record: WarcRecord) -> bool:
    """A WAT record: metadata of JSON (whose body _records read up to max_record_bytes)."""
    return record.record_type == WarcRecordType.metadata and (
        record.headers.get("Content-Type") or ""
    ).startswith("application/json")


def _page(record: WarcRecord, body: bytes, rules: HarvestRules) -> tuple[str | None, Page | None]:
    """(why a WARC record is no page, None) or (None, the page)."""
    if record.record_type != WarcRecordType.response:
        return "not_response", None
    if not record.is_http:  # a response of another protocol (dns:), or an HTTP one unparsed
        if "application/http" in (record.headers.get("Content-Type") or ""):
            raise UnreadableRecord("its HTTP response does not parse")
        return "not_response", None
    status = record.http_headers.status_code
    if status is None:
        raise UnreadableRecord("no HTTP status line")
    if len(body) < min(record.content_length, rules.max_record_bytes):
        raise UnreadableRecord(f"truncated: {len(body)} of {record.content_length} bytes")
    if not 200 <= status < 300:
        return "not_2xx", None
    headers = record.http_headers
    body = _decoded(body, headers, rules.max_record_bytes)
    content_type = headers.get("Content-Type") or ""
    if not (is_html_type(content_type) or (not content_type and detect_mime(body) == "text/html")):
        return "not_html", None
    url = (record.headers.get("WARC-Target-URI") or "").strip("<>")
    if not url:
        raise UnreadableRecord("no WARC-Target-URI")
    page = page_from_html(
        body,
        url,
        header_charset=record.http_charset,
        robots_headers=headers.get_multiple("X-Robots-Tag"),
        content_language=headers.get("Content-Language"),
    )
    return None, page


def _decoded(body: bytes, headers, limit: int) -> bytes:
    """The payload without its transfer and content encodings (what the server sent, as
    archived), at most `limit` bytes of it."""
    readers = []
    if "chunked" in (headers.get("Transfer-Encoding") or "").lower():
        readers.append(ChunkedReader)
    encoding = (headers.get("Content-Encoding") or "identity").strip().lower()
    if encoding in ("gzip", "x-gzip"):
        readers.append(GzipReader)
    elif encoding == "deflate":
        readers.append(lambda stream: GzipReader(stream, zlib=True))
    elif encoding == "br":
        readers.append(BrotliReader)
    elif encoding not in ("identity", ""):
        raise UnreadableRecord(f"unknown Content-Encoding {encoding!r}")
    if not readers:
        return body[:limit]
    try:
        stream = io.BytesIO(body)
        for reader in readers:
            stream = reader(stream)
        return stream.read(limit)
    except READ_ERRORS as exc:
        raise UnreadableRecord(f"the {encoding} body does not decode: {exc}") from exc
