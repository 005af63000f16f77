"""Web archives for the harvest's tests and benchmark, written with fastwarc's own record
writer: WARC response records (plain, gzip per record, or one gzip stream), and a WAT of
them in Common Crawl's JSON layout, whose link lists come from the standard library's HTML
parser (another parser than the harvest's, as Common Crawl's is)."""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterable, Iterator
from html.parser import HTMLParser
from pathlib import Path

from fastwarc.warc import ArchiveIterator, WarcRecord, WarcRecordType


def http_response(
    body: bytes,
    content_type: str | None = "text/html; charset=utf-8",
    status: str = "200 OK",
    headers: Iterable[tuple[str, str]] = (),
) -> bytes:
    """An HTTP/1.1 response as a server sends it (the block of a WARC response record)."""
    lines = [f"HTTP/1.1 {status}"]
    if content_type is not None:
        lines.append(f"Content-Type: {content_type}")
    lines += [f"{name}: {value}" for name, value in headers]
    if not any(name.lower() == "transfer-encoding" for name, _ in headers):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def warc_record(
    record_type: WarcRecordType, uri: str | None, block: bytes, content_type: str
) -> bytes:
    """One WARC record's bytes, written by fastwarc."""
    record = WarcRecord()
    record.init_headers(record_type)
    if uri is not None:
        record.headers["WARC-Target-URI"] = uri
    record.headers["Content-Type"] = content_type
    record.set_bytes_content(block)
    out = io.BytesIO()
    record.write(out)
    return out.getvalue()


def response(uri: str, body: bytes, **http) -> bytes:
    """A WARC response record of an HTTP response (`http`: http_response's arguments)."""
    block = http_response(body, **http)
    return warc_record(WarcRecordType.response, uri, block, "application/http; msgtype=response")


def request(uri: str) -> bytes:
    block = f"GET {uri} HTTP/1.1\r\nHost: example\r\n\r\n".encode()
    return warc_record(WarcRecordType.request, uri, block, "application/http; msgtype=request")


def warcinfo() -> bytes:
    block = b"software: conceptual tests\r\nformat: WARC File Format 1.1\r\n"
    return warc_record(WarcRecordType.warcinfo, None, block, "application/warc-fields")


def claiming(record: bytes, length: int) -> bytes:
    """A record whose WARC Content-Length claims `length` bytes, whatever follows it."""
    head, rest = record.split(b"Content-Length: ", 1)
    return head + b"Content-Length: %d" % length + rest[rest.index(b"\r\n") :]


def quadratic(n: int) -> bytes:
    """A `<p>` holding n distinct `<b id=i>`: each of the n paragraphs after it re-opens
    them all (HTML5's reconstruction of the active formatting elements): n² elements."""
    opened = "".join(f"<b id={i}>" for i in range(n))
    return f"<p>{opened}</p>{'<p>x</p>' * n}".encode()


def write_archive(path: Path, records: Iterable[bytes], gzipped: str | None = "record") -> Path:
    """`records` as a file: plain (None), gzip per record ("record", as Common Crawl ships
    them) or as one gzip stream ("stream")."""
    with open(path, "wb") as out:
        if gzipped == "stream":
            with gzip.GzipFile(fileobj=out, mode="wb") as stream:
                for record in records:
                    stream.write(record)
        else:
            for record in records:
                out.write(gzip.compress(record) if gzipped == "record" else record)
    return path


# --- WAT: Common Crawl's metadata of each record -----------------------------------------


class _Links(HTMLParser):
    """What Common Crawl's WAT lists of a page: its `<img>` src and alt, `<a>` hrefs, the
    `<base href>`, the title and the metas."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[dict] = []
        self.head: dict = {"Metas": []}
        self._title: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        values = {name: value for name, value in reversed(attrs)}  # the first wins
        if tag == "img" and values.get("src") is not None:
            link = {"path": "IMG@/src", "url": values["src"]}
            if values.get("alt") is not None:
                link["alt"] = values["alt"]
            self.links.append(link)
        elif tag == "a" and values.get("href") is not None:
            self.links.append({"path": "A@/href", "url": values["href"]})
        elif tag == "base" and values.get("href") is not None and "Base" not in self.head:
            self.head["Base"] = values["href"]
        elif tag == "meta":
            self.head["Metas"].append({k: v for k, v in values.items() if v is not None})
        elif tag == "title":
            self._title = []

    def handle_data(self, data):
        if self._title is not None:
            self._title.append(data)

    def handle_endtag(self, tag):
        if tag == "title" and self._title is not None:
            self.head["Title"] = "".join(self._title)
            self._title = None


def wat_document(
    warc_headers: dict,
    filename: str,
    offset: int,
    response: dict | None = None,
    html: dict | None = None,
    request: bool = False,
) -> dict:
    """Common Crawl's WAT JSON of one WARC record: its WARC headers, and for a response
    `response` (Response-Message, Headers) with `html` (Head, Links) for an HTML page."""
    payload: dict = {}
    if response is not None:
        if html is not None:
            response = {**response, "HTML-Metadata": html}
        payload = {
            "Actual-Content-Type": "application/http; msgtype=response",
            "HTTP-Response-Metadata": response,
        }
    elif request:
        payload = {
            "Actual-Content-Type": "application/http; msgtype=request",
            "HTTP-Request-Metadata": {"Headers-Length": "0"},
        }
    envelope = {"Format": "WARC", "WARC-Header-Metadata": warc_headers, "Payload-Metadata": payload}
    return {
        "Container": {"Filename": filename, "Compressed": True, "Offset": str(offset)},
        "Envelope": envelope,
    }


def wat_json(record: WarcRecord, body: bytes, filename: str, offset: int) -> dict:
    """Common Crawl's WAT JSON for a record whose HTTP headers are parsed and whose `body`
    was read, its links found by the standard library's HTML parser."""
    warc_headers = dict(record.headers.to_tuples())
    if record.record_type != WarcRecordType.response or not record.is_http:
        request = record.record_type == WarcRecordType.request
        return wat_document(warc_headers, filename, offset, request=request)
    http = record.http_headers
    status = http.status_line.split(" ", 2)
    response = {
        "Response-Message": {
            "Version": status[0],
            "Status": status[1],
            "Reason": status[2] if len(status) > 2 else "",
        },
        "Headers": dict(http.to_tuples()),
        "Entity-Length": str(len(body)),
    }
    html = None
    if "html" in (record.http_content_type or ""):
        parser = _Links()
        parser.feed(body.decode(record.http_charset or "utf-8", "replace"))
        parser.close()
        html = {"Head": parser.head, "Links": parser.links}
    return wat_document(warc_headers, filename, offset, response, html)


def wat_record(uri: str, document: dict) -> bytes:
    """A WAT's metadata record holding `document` (wat_document's JSON)."""
    block = json.dumps(document).encode()
    return warc_record(WarcRecordType.metadata, uri, block, "application/json")


def wat_records(warc: Path) -> Iterator[bytes]:
    """The WAT of a WARC, record for record (a metadata record of JSON for each), as
    Common Crawl derives its WAT files."""
    yield warcinfo()
    with open(warc, "rb") as stream:
        for record in ArchiveIterator(stream, parse_http=True, auto_decode="all"):
            body = record.reader.read()
            document = wat_json(record, body, warc.name, record.stream_pos)
            yield wat_record(record.headers.get("WARC-Target-URI"), document)


def write_wat(warc: Path, wat: Path) -> Path:
    return write_archive(wat, wat_records(warc), "record")


def wat_page(uri: str, alt: str, url: str = "a.jpg") -> bytes:
    """A WAT record of an HTML page `uri` with one image: strings as JSON holds them (a lone
    surrogate, "\\ud800", among them), which no WARC header could."""
    document = wat_document(
        {"WARC-Type": "response", "WARC-Target-URI": uri},
        "crawl.warc.gz",
        0,
        {"Response-Message": {"Status": "200"}, "Headers": {"Content-Type": "text/html"}},
        {"Head": {}, "Links": [{"path": "IMG@/src", "url": url, "alt": alt}]},
    )
    return wat_record("http://a.example/", document)
