"""An archived HTML page as a browser reads it: its bytes decoded by the charset a browser
would pick, parsed into a DOM (resiliparse's Lexbor, an HTML5 parser), and its `<img>`
elements read from that DOM, so nothing inside `<script>`, `<style>`, comments, attribute
values or `<template>` counts as an image.

The charset: a byte-order mark, else the HTTP header's, else `<meta charset>` /
`http-equiv`, else detection; by the WHATWG names, so `iso-8859-1` reads as windows-1252
and Shift_JIS with Microsoft's extensions (①, ～), as browsers do.

The image's URL: `src`; when it is empty or a `data:` placeholder (lazy loading), the first
of LAZY_ATTRIBUTES that is set; else the largest candidate of `srcset` (or `data-srcset`).
"""

from __future__ import annotations

from resiliparse.parse.encoding import detect_encoding, map_encoding_to_html5
from resiliparse.parse.html import HTMLTree

from conceptual.harvest.pages import Image, Page
from conceptual.harvest.urls import largest_in_srcset, strip_url

LAZY_ATTRIBUTES = ("data-src", "data-lazy-src", "data-original")
SRCSET_ATTRIBUTES = ("srcset", "data-srcset")
BOMS = ((b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))
# The WHATWG decoders are supersets of these Python codecs: a page labelled Shift_JIS may
# use Microsoft's extensions, which every browser shows and Python's shift_jis refuses.
BROWSER_CODECS = {"shift_jis": "cp932", "euc_kr": "cp949", "gbk": "gb18030", "big5": "big5hkscs"}


def codec(label: str | None) -> str | None:
    """The Python codec a browser's decoder for `label` matches; None for an unknown label."""
    if not label:
        return None
    name = map_encoding_to_html5(label.strip(), fallback_utf8=False)
    return BROWSER_CODECS.get(name, name) if name else None


def decode(body: bytes, header_charset: str | None = None) -> str:
    """The page's text by the charset a browser picks (module docstring); undecodable bytes
    become U+FFFD, as a browser shows them."""
    for bom, name in BOMS:
        if body.startswith(bom):
            return body[len(bom) :].decode(name, "replace")
    name = codec(header_charset) or codec(detect_encoding(body, from_html_meta=True)) or "utf-8"
    return body.decode(name, "replace")


def page_from_html(
    body: bytes,
    url: str,
    header_charset: str | None = None,
    robots_headers: list[str] | tuple[str, ...] = (),
    content_language: str | None = None,
) -> Page:
    """A page's images, base, language and opt-outs from its body and response headers."""
    document = HTMLTree.parse(decode(body, header_charset)).document
    images = [
        Image(element.getattr("alt"), image_url(element))
        for element in document.query_selector_all("img")
    ]
    base = document.query_selector("base[href]")
    root = document.query_selector("html")
    robots = [
        meta.getattr("content") or ""
        for meta in document.query_selector_all("meta[name]")
        if (meta.getattr("name") or "").strip().lower() == "robots"
    ]
    lang = (root.getattr("lang") if root is not None else None) or content_language
    return Page(
        url=url,
        images=images,
        base=base.getattr("href") if base is not None else None,
        lang=lang.split(",")[0] if lang else None,
        robots=[*robots, *robots_headers],
    )


def image_url(element) -> str | None:
    """The URL an `<img>` shows (module docstring), unresolved; a `data:` src when nothing
    better is given (the rules then count it as not_http)."""
    src = strip_url(element.getattr("src"))
    if src and not _is_data(src):
        return src
    for name in LAZY_ATTRIBUTES:
        lazy = strip_url(element.getattr(name))
        if lazy and not _is_data(lazy):
            return lazy
    for name in SRCSET_ATTRIBUTES:
        if (srcset := element.getattr(name)) and (largest := largest_in_srcset(srcset)):
            return largest
    return src or None


def _is_data(url: str) -> bool:
    return url[:5].lower() == "data:"
