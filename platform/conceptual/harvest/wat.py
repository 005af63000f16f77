"""A page from a WAT record: Common Crawl's JSON metadata of one WARC record, whose
`Envelope.Payload-Metadata.HTTP-Response-Metadata` holds the response's status and headers
and, for an HTML page, `HTML-Metadata`: `Head` (`Base`, `Metas`) and `Links`, among them
one `{"path": "IMG@/src", "url": ..., "alt": ...}` per `<img>` with a src, its attribute
values as Common Crawl's parser decoded them, the URL unresolved.

A WAT lists only `src`: lazy-loading attributes and `srcset` never reach it, so an image
with only those is a candidate from the WARC and not from its WAT."""

from __future__ import annotations

import json
import re
from typing import Any

from conceptual.harvest.pages import Image, Page

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
    described = _DESCRIBED_TYPE.search(payload, 0, 2048)
    if described is not None and described.group(1) != b"response":
        return "not_response", None
    try:
        envelope = json.loads(payload)["Envelope"]
        warc = envelope["WARC-Header-Metadata"]
        response = envelope.get("Payload-Metadata", {}).get("HTTP-Response-Metadata")
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise UnreadableRecord(f"not a WAT record's JSON: {exc}") from exc
    if warc.get("WARC-Type") != "response" or not isinstance(response, dict):
        return "not_response", None
    headers = {str(k).lower(): _one(v) for k, v in (response.get("Headers") or {}).items()}
    try:
        status = int(response["Response-Message"]["Status"])
    except (KeyError, TypeError, ValueError) as exc:
        raise UnreadableRecord(f"no response status: {exc}") from exc
    url = (warc.get("WARC-Target-URI") or "").strip("<>")
    if not url:
        raise UnreadableRecord("no WARC-Target-URI")
    html = response.get("HTML-Metadata")
    if not 200 <= status < 300:
        return "not_2xx", None
    content_type = headers.get("content-type", "")
    if not (is_html_type(content_type) or (not content_type and isinstance(html, dict))):
        return "not_html", None
    html = html if isinstance(html, dict) else {}
    head = html.get("Head") if isinstance(html.get("Head"), dict) else {}
    images = [
        Image(
            *(value if type(value) is str else None for value in (link.get("alt"), link.get("url")))
        )
        for link in html.get("Links") or ()
        if type(link) is dict and link.get("path") == IMG_SRC
    ]
    robots = [
        _text(meta.get("content")) or ""
        for meta in head.get("Metas") or []
        if isinstance(meta, dict) and str(meta.get("name", "")).strip().lower() == "robots"
    ]
    page = Page(
        url=url,
        images=images,
        base=_text(head.get("Base")),
        lang=headers.get("content-language"),
        robots=[*robots, *([headers["x-robots-tag"]] if "x-robots-tag" in headers else [])],
    )
    return None, _in_unicode(page)


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
