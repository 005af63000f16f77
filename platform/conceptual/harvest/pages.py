"""The rules that make an image of a page a candidate, the same whether the page came as HTML
(harvest/html.py) or as a WAT's link list (harvest/wat.py), and the counts of a harvest.

An image is judged by the first rule it fails, in this order; each failure is counted under
its reason (stable strings: they are metric names):

    opted_out          the page asks not to be used (robots meta, X-Robots-Tag)
    no_alt             no alt attribute
    empty_alt          an alt that is empty or only whitespace
    no_url             no usable src, lazy-loading attribute or srcset candidate
    not_http           a URL that is no web URL once resolved (conceptual/weburl.py): not
                       http(s) (data:, javascript:, ftp:), one that does not parse by the
                       URL Standard, or one with credentials
    too_long           an alt-text or URL over candidates.MAX_STORED_CHARS characters
    duplicate_in_page  the same (alt-text, URL) earlier in the same page
"""

from __future__ import annotations

import functools
import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from conceptual.candidates import MAX_STORED_CHARS
from conceptual.config import Config
from conceptual.harvest.urls import Resolver, document_base, strip_url
from conceptual.records import candidate_id
from conceptual.weburl import web_url

IMAGE_REASONS = (
    "opted_out",
    "no_alt",
    "empty_alt",
    "no_url",
    "not_http",
    "too_long",
    "duplicate_in_page",
)
# Why a record is no page to harvest: not a response (warcinfo, request, metadata, revisit),
# a response that is not HTML or not 2xx, one that cannot be read (truncated, corrupt), a
# page whose parse would cost more than the budget (harvest/budget.py), or one whose
# reading failed in this code (internal_error: a bug, logged with its traceback).
RECORD_REASONS = (
    "not_response",
    "not_2xx",
    "not_html",
    "unreadable_record",
    "page_too_complex",
    "internal_error",
)
# Why a whole file yields nothing: it cannot be opened, or it is no WARC or WAT at all.
FILE_REASONS = ("unreadable_file", "not_an_archive")


class HarvestRules(Config):
    """What decides whether an image is harvested (configs/harvest.yaml, `harvest.*`)."""

    # Images of a page whose robots meta or X-Robots-Tag holds one of `opt_out_directives`
    # are not harvested (counted as opted_out).
    respect_opt_out: bool = True
    opt_out_directives: list[str] = ["noimageindex", "noai", "noimageai"]
    # A record's body past this many bytes is not read: the page's first part is parsed
    # (a browser would show it too), and no record is ever held larger than this.
    max_record_bytes: int = 8 << 20
    # `harvest --crawl CC-MAIN-...`: where Common Crawl's bucket is (a mirror: any URI laid
    # out as crawl-data/CRAWL/wat.paths.gz and the paths it lists), and the seed of
    # `--fraction`'s draw of its files (conceptual.harvest.crawls)
    crawl_root: str = "s3://commoncrawl"
    crawl_seed: int = 0


class Image(NamedTuple):  # a tuple: a page has dozens, built in the harvest's inner loop
    """An image as the page states it: its alt attribute (None when it has none, else as
    the parser decoded it) and the URL chosen from its attributes, unresolved."""

    alt: str | None
    url: str | None


@dataclass
class Page:
    """What a page says about its images, whatever form it came in."""

    url: str  # the record's WARC-Target-URI
    # Image's (alt, url), as an Image or as a plain tuple where they are built by the
    # million (harvest/wat.py: a NamedTuple takes seven times a tuple's time to build)
    images: list[tuple[str | None, str | None]]
    base: str | None = None  # <base href>, unresolved
    lang: str | None = None
    robots: list[str] = field(default_factory=list)  # robots meta contents, X-Robots-Tag values


def opt_outs(robots: list[str], directives: list[str]) -> set[str]:
    """The opt-out directives among robots meta contents and X-Robots-Tag values
    (`noindex, noimageindex`, `googlebot: noai`: a directive for any agent counts)."""
    wanted = {d.lower() for d in directives}
    found = set()
    for value in robots:
        for part in value.split(","):
            token = part.rsplit(":", 1)[-1].strip().lower()
            if token in wanted:
                found.add(token)
    return found


def collapse(text: str) -> str:
    """Whitespace runs as one space, none at either end (what a browser's tooltip shows)."""
    # Most alt-texts have nothing to collapse, and saying so is cheaper than splitting them
    # into words: every whitespace character but the space is unprintable (Unicode's
    # controls and separators), so printable text without a double space or one at either
    # end is its own answer (tests/unit/harvest/test_harvest_pages.py checks every code point).
    if text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " ":
        return text
    return " ".join(text.split())


def judge(page: Page, rules: HarvestRules, counts: Counter, **provenance: Any) -> list[dict]:
    """The candidates of a page, each image that is not one counted in `counts` under its
    reason (and every image under `images_seen`). `provenance` (source, record_offset) goes
    into every candidate."""
    images = page.images
    counts["images_seen"] += len(images)
    if rules.respect_opt_out and page.robots and opt_outs(page.robots, rules.opt_out_directives):
        counts["opted_out"] += len(images)
        return []
    lang = (collapse(page.lang).lower() or None) if page.lang else None
    return compiled_judge_images(images, page.url, page.base, lang, provenance, counts)


def judge_images(
    images: list[tuple[str | None, str | None]],
    page_url: str,
    base_href: str | None,
    lang: str | None,
    provenance: dict[str, Any],
    counts: Counter,
) -> list[dict]:
    """The candidates of a page's images (its URL, <base href> and language given), each
    other image counted in `counts` under its reason. The harvest's inner loop, every image
    of a crawl: this is its definition, and harvest/_links.c its compiled form, which `judge`
    calls where it is built (`make setup`, any install of the package): the same answers in
    two fifths of the time (tests/unit/harvest/test_harvest_links.py holds the two to the same rows
    and counts; BENCHMARKS.md, issue 60, 2)."""
    resolve = Resolver.of_document(document_base(page_url, base_href))
    seen: set[tuple[str, str]] = set()
    candidates, rejected = [], []
    for alt, raw in images:
        if alt is None:
            rejected.append("no_alt")
            continue
        alt = collapse(alt)
        if not alt:
            rejected.append("empty_alt")
            continue
        raw = strip_url(raw)
        if not raw:
            rejected.append("no_url")
            continue
        url = resolve(raw)
        if url is None:
            rejected.append("not_http")
        elif len(alt) > MAX_STORED_CHARS or len(url) > MAX_STORED_CHARS:
            rejected.append("too_long")
        elif (alt, url) in seen:
            rejected.append("duplicate_in_page")
        else:
            seen.add((alt, url))
            candidates.append(
                {
                    "id": candidate_id(url, alt),
                    "image_url": url,
                    "page_url": page_url,
                    "alt_text": alt,
                    "lang": lang,
                    **provenance,
                }
            )
    if rejected:
        counts.update(rejected)
    return candidates


try:
    from conceptual.harvest import _links
except ImportError:  # not built (a source tree without `make setup`): the same answers, slower
    _links = None
    logging.getLogger(__name__).warning(
        "conceptual.harvest._links is not built (`make setup` builds it): the harvest judges "
        "images in Python, 2.5 times as long"
    )
# judge_images, compiled where it is built: the call judge makes for every page
compiled_judge_images = (
    judge_images
    if _links is None
    else functools.partial(_links.candidates, MAX_STORED_CHARS, document_base, web_url)
)
