"""An archived HTML page as a browser reads it: its bytes decoded by the charset a browser
would pick, parsed into a DOM (resiliparse's Lexbor, an HTML5 parser), and its `<img>`
elements read from that DOM, so nothing inside `<script>`, `<style>`, comments, attribute
values or `<template>` counts as an image.

The charset: a byte-order mark, else the HTTP header's, else `<meta charset>` /
`http-equiv`, else detection; by the WHATWG names, so `iso-8859-1` reads as windows-1252
and Shift_JIS with Microsoft's extensions (①, ～), as browsers do.

The image's URL: `src`; when it is empty or a `data:` placeholder (lazy loading), the first
of LAZY_ATTRIBUTES that is set; else the largest candidate of `srcset` (or `data-srcset`).

This module is also the parser's process (`python -m conceptual.harvest.html MEMORY`,
started by harvest/budget.py): it imports only resiliparse and the standard library.
"""

from __future__ import annotations

import marshal
import resource
import sys
import traceback

from resiliparse.parse.encoding import detect_encoding, map_encoding_to_html5
from resiliparse.parse.html import HTMLParserException, HTMLTree

from conceptual.harvest.urls import largest_in_srcset, strip_url

LAZY_ATTRIBUTES = ("data-src", "data-lazy-src", "data-original")
SRCSET_ATTRIBUTES = ("srcset", "data-srcset")
BOMS = ((b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))
# The WHATWG decoders are supersets of these Python codecs: a page labelled Shift_JIS may
# use Microsoft's extensions, which every browser shows and Python's shift_jis refuses.
BROWSER_CODECS = {"shift_jis": "cp932", "euc_kr": "cp949", "gbk": "gb18030", "big5": "big5hkscs"}

# What read_page returns: the (alt, URL) of each image, <base href>, <html lang>, and the
# contents of the robots metas; plain values, which marshal carries between processes.
Parts = tuple[list[tuple[str | None, str | None]], str | None, str | None, list[str]]


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


def read_page(body: bytes, header_charset: str | None = None) -> Parts:
    """A page's Parts, parsed here and now, with no budget (budget.page_from_html has one).
    Each list is read in one pass: resiliparse's collections find their n-th element by
    walking from the first, so indexing one (or iterating, which indexes) costs n² steps;
    `values()` walks once."""
    document = HTMLTree.parse(decode(body, header_charset)).document
    images = [
        (element.getattr("alt"), image_url(element))
        for element in document.query_selector_all("img").values()
    ]
    base = document.query_selector("base[href]")
    root = document.query_selector("html")
    robots = [
        meta.getattr("content") or ""
        for meta in document.query_selector_all("meta[name]").values()
        if (meta.getattr("name") or "").strip().lower() == "robots"
    ]
    return (
        images,
        base.getattr("href") if base is not None else None,
        root.getattr("lang") if root is not None else None,
        robots,
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


def serve(memory: int) -> None:
    """The parser's process: "ready" on stdout, then (body, charset) requests in on stdin,
    answers out on stdout, marshalled: ("page", Parts), ("too_complex", why) or ("error", a
    traceback). Its address space is held to what it has now plus `memory` bytes, so a page
    that would grow the tree past that fails in Lexbor's allocator (HTMLParserException) or
    in Python's (MemoryError); after any answer but a page it exits, to be started afresh."""
    pages, answers = sys.stdin.buffer, sys.stdout.buffer
    with open("/proc/self/statm") as statm:
        limit = int(statm.read().split()[0]) * resource.getpagesize() + memory
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    if hard != resource.RLIM_INFINITY:  # a limit set for this process already
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    marshal.dump("ready", answers)
    answers.flush()
    while True:
        try:
            request = marshal.load(pages)
        except EOFError:  # the harvest is done, or gone
            return
        try:
            answer = ("page", read_page(*request))
        except (HTMLParserException, MemoryError) as exc:
            answer = ("too_complex", str(exc) or type(exc).__name__)
        except Exception:  # a bug: the harvest counts it as internal_error, with this
            answer = ("error", traceback.format_exc())
        marshal.dump(answer, answers)
        answers.flush()
        if answer[0] != "page":
            return


if __name__ == "__main__":
    serve(int(sys.argv[1]))
