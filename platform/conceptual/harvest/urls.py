"""Image URLs of a page as a browser resolves them: `srcset` read by the HTML standard's
algorithm, the page's base by the HTML standard (`<base href>`, else the page's URL), and
each URL resolved against it and written by the URL Standard (conceptual/weburl.py: the
platform's one parser, with its rules: http(s) only, no credentials, no fragment)."""

from __future__ import annotations

import re

from conceptual.weburl import standard_href, web_url

# What the HTML standard strips around a URL attribute's value (ASCII whitespace only: a
# no-break space is part of a URL).
ASCII_WHITESPACE = " \t\n\f\r"
_DESCRIPTOR = re.compile(r"^(\d+(?:\.\d+)?|\.\d+)([wx])$")


def strip_url(value: str | None) -> str:
    return (value or "").strip(ASCII_WHITESPACE)


def srcset_candidates(srcset: str) -> list[tuple[str, str]]:
    """(url, descriptor) pairs of a `srcset`, by the standard's parsing: a URL is a run of
    non-whitespace (so one with commas, `w_100,h_80/a.jpg`, stays whole) whose trailing
    commas end it; its descriptors run to the next comma outside parentheses."""
    pairs, pos, n = [], 0, len(srcset)
    while pos < n:
        while pos < n and (srcset[pos] in ASCII_WHITESPACE or srcset[pos] == ","):
            pos += 1
        start = pos
        while pos < n and srcset[pos] not in ASCII_WHITESPACE:
            pos += 1
        url = srcset[start:pos]
        if not url:
            break
        if url.endswith(","):
            pairs.append((url.rstrip(","), ""))
            continue
        start, depth = pos, 0
        while pos < n and (srcset[pos] != "," or depth):
            depth += {"(": 1, ")": -1}.get(srcset[pos], 0)
            pos += 1
        pairs.append((url, srcset[start:pos].strip(ASCII_WHITESPACE)))
    return pairs


def largest_in_srcset(srcset: str) -> str | None:
    """The URL of the largest `srcset` candidate: by width (`640w`) when any gives one, else
    by density (`2x`; none written is 1x). Ties keep the first; None when it lists none."""
    widths, densities = [], []
    for url, descriptor in srcset_candidates(srcset):
        match = _DESCRIPTOR.match(descriptor.split()[0] if descriptor else "1x")
        if match is None:  # an unknown descriptor (`100h`): not a candidate a browser picks
            continue
        (widths if match.group(2) == "w" else densities).append((float(match.group(1)), url))
    chosen = widths or densities
    return max(chosen, key=lambda pair: pair[0])[1] if chosen else None


def document_base(page_url: str, base_href: str | None) -> str | None:
    """The URL a page's relative URLs resolve against, by the HTML standard: its
    `<base href>` parsed against the page's own URL, unless that fails or is a `data:` or
    `javascript:` URL; else the page's URL (as the URL Standard writes it; None when it
    does not parse, and then only absolute URLs resolve)."""
    fallback = _href(page_url)
    if base_href is not None:
        href = standard_href(strip_url(base_href), fallback)
        if href is not None and not href.startswith(("data:", "javascript:")):
            return href
    return fallback


# The common forms, joined without the parser (each call to it crosses into C and parses the
# base again): a reference of characters the standard writes as they are, no dot segment
# (`.`, `..`, `%2e`; some that are none are refused too), against a base of a plain host:
# absolute http(s) or protocol-relative with a host the standard leaves as it is (ASCII
# lower-case labels, the last starting with a letter, as one ending in a number is an IPv4
# address; no punycode label, which the parser checks) and a path, root-relative, or
# relative with no colon in its first segment (which could be a scheme). Anything else
# takes web_url(). tests/unit/harvest/test_web_urls.py compares the two on the web-platform-tests'
# inputs and the common forms.
_CHARS = r"A-Za-z0-9\-._~!$&()*+,;=@%\[\]"  # and / ? :, by place; no ', which a query encodes
_LABEL = r"(?!xn--)[a-z0-9-]+"
_FAST = re.compile(
    rf"(?!.*(?:\./|%2[eE]|\.\?|\.\Z))"
    rf"(?:(?P<scheme>https?:)?//(?:{_LABEL}\.)*(?!xn--)[a-z][a-z0-9-]*\.?/"
    rf"|(?P<root>/(?!/))|(?P<relative>[{_CHARS}]+(?=[/?]|\Z)))[{_CHARS}/?:]*\Z"
)
_ORIGIN = re.compile(r"(https?:)//([a-z0-9.\-]+)(?=/)")  # a port or credentials: web_url()
_PATH = re.compile(r"[^?#]*")  # a base's path: up to its query or fragment


class Resolver:
    """web_url(url, base) for the images of one page, the base parsed once: what the common
    forms (absolute http(s), protocol-relative, root-relative, relative) give is exactly
    what web_url() gives, only faster. No base (None, or one that does not parse): only
    absolute URLs resolve."""

    def __init__(self, base: str | None, written: bool = False) -> None:
        """`written`: the base is already as the standard writes it (document_base's)."""
        self.base = base = base if written or base is None else _href(base)
        origin = _ORIGIN.match(base) if base else None
        self.scheme = origin.group(1) if origin else None
        # No origin of the plain form: every URL goes to web_url()
        self._match = _FAST.match if origin else _no_match
        if origin:
            path = _PATH.match(base, origin.end()).group()
            self.origin = origin.group(0)
            self.directory = path[: path.rfind("/") + 1]

    @classmethod
    def of_document(cls, base: str | None) -> Resolver:
        """The resolver of a document_base() answer (written by the standard already)."""
        return cls(base, written=True)

    def __call__(self, url: str) -> str | None:
        match = self._match(url)  # fast(), inlined: a call per image less
        if match is None:
            return web_url(url, self.base)
        form = match.lastgroup  # the one form that matched: no group() call per form
        if form == "relative":
            return self.origin + self.directory + url
        if form == "root":
            return self.origin + url
        return url if form == "scheme" else self.scheme + url  # absolute, protocol-relative

    def fast(self, url: str) -> str | None:
        """The join of a plain reference, or None for web_url() to decide."""
        return None if self._match(url) is None else self(url)


def _no_match(url: str) -> None:
    return None


def _href(url: str) -> str | None:
    """standard_href(url), without the parser for an absolute URL of the fast path's form
    (a page's own URL, most often): the standard writes it as it is."""
    match = _FAST.match(url)
    return url if match is not None and match.group("scheme") else standard_href(url)
