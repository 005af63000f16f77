"""A page's HTML parsed under a budget, so that a page costs at most that whatever it holds:
at most MAX_PAGE_MARKUP `<` (each tag, comment and doctype begins with one: a bound on the
elements the page itself opens), counted before it is parsed; and then parsed in a process
of its own (html.py's `serve`) with its memory held to PARSE_MEMORY and its time to
PARSE_SECONDS. A page past any of these is PageTooComplex (counted as page_too_complex),
and the file goes on.

Why a process: HTML5's tree construction is not linear in its input. A `<p>` holding n
distinct `<b id=i>`, then `</p>`, then n `<p>x</p>`, makes each paragraph re-open all n
formatting elements, as the standard says (n = 3,000, 56 KB of HTML, took 3.6 GB), and
misnested ones do worse (lexbor/lexbor#340); no count read beforehand bounds that without
being the parser. So that bound is the operating system's, as a browser's renderer process
has one: an address-space limit in the parser's process, a deadline in this one. The count
of `<` keeps pages that are merely large (millions of nested `<div>`, 500,000 `<img>`) from
reaching the parser at all, and bounds the images a page gives (read in one pass,
html.read_page)."""

from __future__ import annotations

import marshal
import os
import select
import subprocess
import sys
import threading

from conceptual.harvest.html import Parts
from conceptual.harvest.pages import Image, Page

# Pages with more are not parsed: every tag begins with one, so none opens more elements
# itself (a large page opens a few thousand).
MAX_PAGE_MARKUP = 200_000
# What parsing one page may add to the parser's process: a page of max_record_bytes (8 MiB)
# holding 77,000 images with their attributes, read, takes it to 163 MB.
PARSE_MEMORY = 192 << 20
PARSE_SECONDS = 10.0  # that page takes 3 s on a busy machine
STARTUP_SECONDS = 60.0  # for the parser's process to import resiliparse, on a busy node


class PageTooComplex(Exception):
    """A page whose parse would cost more than the budget allows (module docstring)."""


class PageParser:
    """Pages parsed one at a time in the parser's process, started when first needed and
    again after any page that ended it; it ends itself when this process does (its input
    closes)."""

    def __init__(self, memory: int = PARSE_MEMORY, seconds: float = PARSE_SECONDS) -> None:
        self.memory, self.seconds = memory, seconds
        self._process: subprocess.Popen | None = None
        self._lock = threading.Lock()  # one page at a time through the pipes

    def parse(self, body: bytes, header_charset: str | None = None) -> Parts:
        """html.read_page's Parts of the page; PageTooComplex past the budget."""
        if (markup := body.count(b"<")) > MAX_PAGE_MARKUP:
            raise PageTooComplex(f"{markup} '<', over {MAX_PAGE_MARKUP}")
        with self._lock:
            try:
                kind, value = self._ask((body, header_charset))
            except BaseException:  # interrupted: its answer may still come, to no later page
                self.close()
                raise
            if kind != "page":  # the process has exited, or must
                self.close()
        if kind == "too_complex":
            raise PageTooComplex(value)
        if kind == "error":
            raise RuntimeError(f"the page parser failed:\n{value}")
        return value

    def _ask(self, request: tuple) -> tuple[str, object]:
        process = self._process or self._start()
        try:
            marshal.dump(request, process.stdin)
            process.stdin.flush()
            answer = _answer(process, self.seconds)
        except (OSError, EOFError, ValueError):  # it died: out of memory outside Lexbor
            return "too_complex", "the parser's process ended"
        return answer or ("too_complex", f"not parsed within {self.seconds:g} s")

    def _start(self) -> subprocess.Popen:
        """The parser's process, once it says it is ready; RuntimeError when it does not
        (no page's doing: its error is on this process's standard error)."""
        self._process = subprocess.Popen(
            [sys.executable, "-m", "conceptual.harvest.html", str(self.memory)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},  # this `conceptual`
        )
        try:
            ready = _answer(self._process, STARTUP_SECONDS)
        except (OSError, EOFError, ValueError):
            ready = None
        if ready != "ready":
            self.close()
            raise RuntimeError("the page parser's process did not start")
        return self._process

    def close(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None


def _answer(process: subprocess.Popen, seconds: float):
    """What the process writes next, or None when it writes nothing within `seconds`."""
    if not select.select([process.stdout], [], [], seconds)[0]:
        return None
    return marshal.load(process.stdout)  # written at once, when ready


PARSER = PageParser()  # each process's (a Ray worker's harvest tasks share it)


def page_from_html(
    body: bytes,
    url: str,
    header_charset: str | None = None,
    robots_headers: list[str] | tuple[str, ...] = (),
    content_language: str | None = None,
) -> Page:
    """A page's images, base, language and opt-outs from its body and response headers,
    parsed under the budget (PageTooComplex past it)."""
    images, base, lang, robots = PARSER.parse(body, header_charset)
    lang = lang or content_language
    return Page(
        url=url,
        images=[Image(alt, src) for alt, src in images],
        base=base,
        lang=lang.split(",")[0] if lang else None,
        robots=[*robots, *robots_headers],
    )
