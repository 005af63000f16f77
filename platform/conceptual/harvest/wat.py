"""A page from a WAT record: Common Crawl's JSON metadata of one WARC record, whose
`Envelope.Payload-Metadata.HTTP-Response-Metadata` holds the response's status and headers
and, for an HTML page, `HTML-Metadata`: `Head` (`Base`, `Metas`) and `Links`, among them
one `{"path": "IMG@/src", "url": ..., "alt": ...}` per `<img>` with a src, its attribute
values as Common Crawl's parser decoded them, the URL unresolved.

A record is read in one of two ways, which give the same page: as Common Crawl writes it,
by a typed decoder (msgspec) that builds only the fields read here and passes over the rest
of the JSON (the other links, the title, the metas' other keys) without making Python
objects of it; any record of another shape (a field of another type, a lone surrogate, no
UTF-8, no JSON) by the general way, `json.loads` and the checks below, which decide what it
is (tests/unit/harvest/test_harvest_wat.py holds the two to the same answers). They differ only on
records no crawler writes, in a field not read: JSON nested about 1,000 deep, or a number of
over 4,300 digits, which the general way cannot parse (unreadable_record) and the typed one
passes over.

A WAT lists only `src`: lazy-loading attributes and `srcset` never reach it, so an image
with only those is a candidate from the WARC and not from its WAT."""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec

from conceptual.harvest.pages import Page

IMG_SRC = "IMG@/src"
# The type of the record a WAT record describes, read from the JSON's first bytes: two of a
# Common Crawl WAT's three records describe a request or the crawler's metadata, and need
# no parse (the JSON is parsed whole when the type is not found there).
_DESCRIBED_TYPE = re.compile(rb'"WARC-Type"\s*:\s*"([a-z]+)"')


class UnreadableRecord(ValueError):
    """A record whose content cannot be read as what it says it is."""


def page_from_wat(payload: bytes) -> tuple[str | None, Page | None]:
    """(why it is no page, None) or (None, the page) from a WAT record's JSON;
    UnreadableRecord when it is not the JSON of a WAT record."""
    if describes_no_response(payload):
        return "not_response", None
    return page_described(payload)


def page_described(payload: bytes) -> tuple[str | None, Page | None]:
    """page_from_wat for a record whose first bytes do not say that it describes no
    response (harvest_archive asks describes_no_response first, once a record)."""
    if not payload.isascii():  # bytes that are no UTF-8: the general way says unreadable
        try:
            payload.decode("utf-8", "surrogatepass")  # json.loads's reading of UTF-8
        except UnicodeDecodeError:
            return _page_from_json(payload)
    try:
        envelope = _WAT_RECORD.decode(payload).Envelope
    except msgspec.MsgspecError:  # not in Common Crawl's own shape: the general way
        return _page_from_json(payload)
    warc, response = envelope.warc, envelope.payload.response
    if warc.type != "response" or response is None:
        return "not_response", None
    html = response.html
    head = html.head if html is not None and html.head is not None else _NO_HEAD
    links = html.links if html is not None else None
    return _page(
        warc.uri,
        response.message,
        response.headers,
        html is not None,
        head.base,
        head.metas,
        [(link.alt, link.url) for link in links or () if link.path == IMG_SRC],
        # msgspec decodes only Unicode text: no lone surrogate to look for
        check_unicode=False,
    )


def describes_no_response(payload: bytes) -> bool:
    """Whether a WAT record's first bytes say that the record it describes is no response."""
    described = _DESCRIBED_TYPE.search(payload, 0, 2048)
    return described is not None and described.group(1) != b"response"


def _page_from_json(payload: bytes) -> tuple[str | None, Page | None]:
    """page_from_wat's general way: the JSON parsed whole, each field checked."""
    try:
        envelope = json.loads(payload)["Envelope"]
        warc = envelope["WARC-Header-Metadata"]
        response = envelope.get("Payload-Metadata", {}).get("HTTP-Response-Metadata")
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise UnreadableRecord(f"not a WAT record's JSON: {exc}") from exc
    if warc.get("WARC-Type") != "response" or not isinstance(response, dict):
        return "not_response", None
    html = response.get("HTML-Metadata")
    is_html = isinstance(html, dict)
    html = html if is_html else {}
    head = html.get("Head") if isinstance(html.get("Head"), dict) else {}
    images = [
        tuple(value if type(value) is str else None for value in (link.get("alt"), link.get("url")))
        for link in html.get("Links") or ()
        if type(link) is dict and link.get("path") == IMG_SRC
    ]
    return _page(
        warc.get("WARC-Target-URI"),
        response.get("Response-Message"),
        response.get("Headers"),
        is_html,
        _text(head.get("Base")),
        head.get("Metas"),
        images,
    )


def _page(
    target_uri: Any,
    message: Any,
    headers: Any,
    is_html: bool,
    base: str | None,
    metas: Any,
    images: list[tuple[str | None, str | None]],
    check_unicode: bool = True,
) -> tuple[str | None, Page | None]:
    """The page of a WAT record describing a response, from its parts as either way read
    them (`is_html`: whether it has HTML-Metadata)."""
    headers = {str(k).lower(): _one(v) for k, v in (headers or {}).items()}
    try:
        status = int(message["Status"])
    except (KeyError, TypeError, ValueError) as exc:
        raise UnreadableRecord(f"no response status: {exc}") from exc
    url = (target_uri or "").strip("<>")
    if not url:
        raise UnreadableRecord("no WARC-Target-URI")
    if not 200 <= status < 300:
        return "not_2xx", None
    content_type = headers.get("content-type", "")
    if not (is_html_type(content_type) or (not content_type and is_html)):
        return "not_html", None
    robots = [
        _text(meta.get("content")) or ""
        for meta in metas or []
        if isinstance(meta, dict) and str(meta.get("name", "")).strip().lower() == "robots"
    ]
    page = Page(
        url=url,
        images=images,
        base=base,
        lang=headers.get("content-language"),
        robots=[*robots, *([headers["x-robots-tag"]] if "x-robots-tag" in headers else [])],
    )
    return None, _in_unicode(page) if check_unicode else page


# Common Crawl's shape of a WAT record, as far as it is read here: every other field is
# passed over. A field of another type fails the decode (and the general way reads it).
class _Link(msgspec.Struct):
    path: str | None = None
    url: str | None = None
    alt: str | None = None


class _Head(msgspec.Struct):
    base: str | None = msgspec.field(default=None, name="Base")
    metas: list[Any] | None = msgspec.field(default=None, name="Metas")


_NO_HEAD = _Head()


class _Html(msgspec.Struct):
    head: _Head | None = msgspec.field(default=None, name="Head")
    links: list[_Link] | None = msgspec.field(default=None, name="Links")


class _Response(msgspec.Struct):
    message: Any = msgspec.field(default=None, name="Response-Message")
    headers: dict[str, Any] | None = msgspec.field(default=None, name="Headers")
    html: _Html | None = msgspec.field(default=None, name="HTML-Metadata")


class _Payload(msgspec.Struct):
    response: _Response | None = msgspec.field(default=None, name="HTTP-Response-Metadata")


class _WarcHeaders(msgspec.Struct):
    type: Any = msgspec.field(default=None, name="WARC-Type")
    uri: str | None = msgspec.field(default=None, name="WARC-Target-URI")


class _Envelope(msgspec.Struct):
    warc: _WarcHeaders = msgspec.field(name="WARC-Header-Metadata")
    payload: _Payload = msgspec.field(default_factory=_Payload, name="Payload-Metadata")


class _WatRecord(msgspec.Struct):
    Envelope: _Envelope


_WAT_RECORD = msgspec.json.Decoder(_WatRecord)


def _in_unicode(page: Page) -> Page:
    """The page, or UnreadableRecord when its text holds a lone surrogate: JSON can write
    one (`"x\\ud800y"`), no Unicode text holds one (it has no UTF-8), and every URL and
    candidate is written as UTF-8."""
    texts = [page.url, page.base, page.lang, *page.robots, *(t for i in page.images for t in i)]
    try:
        for text in texts:
            if text:
                text.encode()
    except UnicodeEncodeError as exc:
        raise UnreadableRecord(f"a lone surrogate in its text: {exc}") from exc
    return page


def is_html_type(content_type: str) -> bool:
    mime = content_type.split(";", 1)[0].strip().lower()
    return mime in ("text/html", "application/xhtml+xml")


def _one(value: Any) -> str:
    """A header's value; a repeated header (a list) as its values joined, as HTTP joins them."""
    return ", ".join(map(str, value)) if isinstance(value, list) else str(value)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
