"""Candidates from one web archive, read record by record as it streams (fastwarc), so that
no file is ever held whole and no record ends the file.

A file is WARC or WAT by its content, record by record: a WAT's records are `metadata` with
JSON content (harvest/wat.py), a WARC's pages are `response` records with an HTTP response
(harvest/html.py, parsed under harvest/budget.py's budget); plain, gzip per record (as
Common Crawl ships them) or one gzip stream. Every record read is counted once: an HTML page
(`html_pages`), or skipped for one of pages.RECORD_REASONS. A truncated or corrupt record,
or one whose content is shorter than its Content-Length says, is `unreadable_record`, and
reading goes on at the next record found after its start (one count for each corrupt
stretch): the next `WARC/` in a plain WARC, the next gzip member that begins a record in a
gzip-per-record file (a gzip header that begins none is passed over). A file compressed as
one stream cannot be entered again past a corrupt spot: its reading ends there, counted the
same way. A record's body past `max_record_bytes` is not read.
"""

from __future__ import annotations

import io
import logging
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from typing import BinaryIO

from fastwarc.stream_io import BrotliReader, ChunkedReader, GzipReader
from fastwarc.warc import ArchiveIterator, WarcHeader, WarcRecord, WarcRecordType
from resiliparse.parse.encoding import detect_mime

from conceptual.harvest.budget import PageTooComplex, page_from_html
from conceptual.harvest.pages import HarvestRules, Page, judge
from conceptual.harvest.wat import (
    UnreadableRecord,
    describes_no_response,
    is_html_type,
    page_described,
)

log = logging.getLogger(__name__)

GZIP_MAGIC = b"\x1f\x8b\x08"
WARC_MAGIC = b"WARC/"
SCAN_BYTES = 1 << 16
# The bytes after a gzip header found while resyncing that are decompressed to see whether
# it begins a record: a member's header and the start of its first block fit in far fewer
# (a gzip header whose fields run on past them, as a run of fake headers does, begins none).
CHECK_BYTES = 4096
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
        metadata = record.record_type == WarcRecordType.metadata
        if kind is None and record.record_type != WarcRecordType.warcinfo:
            kind = "wat" if metadata and _is_json(record) else "warc"
        try:
            if metadata and describes_no_response(body):
                # Two of a WAT's three records (a request's description, the crawler's
                # metadata): no page whichever way the record is read (_page: a metadata
                # record is no response), so its Content-Type is not looked up.
                reason, page = "not_response", None
            elif metadata and _is_json(record):
                reason, page = page_described(body)
            else:
                reason, page = _page(record, body, rules)
        except UnreadableRecord as exc:
            log.debug("%s at %d: %s", source, record.stream_pos, exc)
            reason, page = "unreadable_record", None
        except PageTooComplex as exc:
            log.info(
                "%s at %d: a page past the parser's budget: %s", source, record.stream_pos, exc
            )
            reason, page = "page_too_complex", None
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
    allows (module docstring); `not_an_archive` counted when no record is found at all.

    A record whose content is shorter than its Content-Length says is corrupt too: what its
    claim would swallow (the rest of the file, for a claim of a terabyte) may be records,
    so reading goes on at the next record found after its start."""
    with open_at(0) as first:
        head = first.read(SCAN_BYTES)
    if not head:
        return  # an empty file holds no records and is no error
    magic = GZIP_MAGIC if head.startswith(GZIP_MAGIC[:2]) else WARC_MAGIC
    if not _starts_a_record(head, magic):
        counts["not_an_archive"] += 1
        return
    start, failing = 0, False
    while start is not None:
        stream = Positioned(open_at(start), start)
        last, read, ended = start, False, False
        try:
            for record in ArchiveIterator(stream, parse_http=True, auto_decode="none"):
                last, read = record.stream_pos, True
                body = record.reader.read(limit)
                # (what is left of a body read whole needs no read to pass: most records)
                length = record.content_length
                if len(body) < length and len(body) + _skip(record.reader) < length:
                    break  # the file ends before its content does: corrupt, read past
                failing = False
                yield record, body
            else:
                ended = True
        except BaseException as exc:
            if not _is_read_error(exc):
                raise
        finally:
            stream.close()
        if ended and not read and start == 0:
            counts["not_an_archive"] += 1
            return
        if ended and read and magic == WARC_MAGIC:
            return  # fastwarc reads a plain WARC to its end, finding each record itself
        # A gzip file can end early without an error (a fake gzip header takes what follows
        # for its fields): a record found after the last one read means a corrupt stretch
        # too. Past a corrupt stretch, or a false start of one, reading goes on at the next.
        resume = _next_record(open_at, last + 1, magic)
        if not failing and (not ended or resume is not None):
            counts["records"] += 1  # one count for each corrupt stretch, however many tries
            counts["unreadable_record"] += 1
            failing = True
            yield None, None
        start = resume


def _skip(reader) -> int:
    """The bytes left in a record's content, read (as fastwarc would to pass them)."""
    skipped = 0
    while chunk := reader.read(SCAN_BYTES):
        skipped += len(chunk)
    return skipped


def _starts_a_record(head: bytes, magic: bytes) -> bool:
    """Whether bytes (a file's first, or those at a `magic` found in it) begin a WARC
    record, decompressed when gzip."""
    if magic == GZIP_MAGIC:
        try:
            head = zlib.decompressobj(wbits=31).decompress(head, len(WARC_MAGIC))
        except zlib.error:
            return False
    return head.startswith(WARC_MAGIC)


def _next_record(open_at: Opener, offset: int, magic: bytes) -> int | None:
    """The offset of the next `magic` (a gzip member's start, or `WARC/`) at or after
    `offset` that starts a record, or None when there is none. Each is checked here, on
    the CHECK_BYTES from it, so a run of fake gzip headers costs a scan, not a try each."""
    with open_at(offset) as stream:
        window, at = b"", 0  # window: the bytes from `offset`; at: where to look in it
        while True:
            block = stream.read(SCAN_BYTES)
            window += block
            while (found := window.find(magic, at)) >= 0:
                if block and len(window) - found < CHECK_BYTES:
                    break  # read on before judging it
                if _starts_a_record(window[found : found + CHECK_BYTES], magic):
                    return offset + found
                at = found + 1
            if not block:
                return None
            keep = found if found >= 0 else max(len(window) - len(magic) + 1, at)
            window, offset, at = window[keep:], offset + keep, 0


def _is_json(record: WarcRecord) -> bool:
    """Whether a metadata record is of JSON, a WAT record (whose body _records read up to
    max_record_bytes). The header is looked up by fastwarc's own key and as bytes: a third
    of the time of a lookup by its name as a string."""
    return (record.headers.get_bytes(WarcHeader.CONTENT_TYPE) or b"").startswith(
        b"application/json"
    )


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
