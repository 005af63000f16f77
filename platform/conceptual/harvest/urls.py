"""Image URLs as a browser resolves them: `srcset` read by the HTML standard's algorithm, a
URL resolved against the page's base, and the result written the way a browser requests it
(spaces and non-ASCII characters percent-encoded, an IDN host in punycode, no fragment)."""

from __future__ import annotations

import re
from urllib.parse import quote, urljoin, urlsplit, urlunsplit

HTTP_SCHEMES = ("http", "https")
# What the HTML standard strips around a URL attribute's value (ASCII whitespace only: a
# no-break space is part of a URL).
ASCII_WHITESPACE = " \t\n\f\r"
# Characters a URL may hold as they are; the rest are percent-encoded (what a browser sends).
_SAFE = "!#$%&'()*+,/:;=?@[]~"
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


def resolve(url: str, base: str) -> str | None:
    """`url` (relative, root-relative, protocol-relative or absolute) resolved against `base`
    and written as a browser requests it; None when it does not parse as a URL."""
    try:
        joined = urljoin(base, url)
        parts = urlsplit(joined)
        host = parts.hostname or ""
        if not host.isascii():
            host = host.encode("idna").decode("ascii")
        port = parts.port  # raises ValueError for a port that is not a number
    except (ValueError, UnicodeError):
        return None
    netloc = host
    if parts.username is not None or parts.password is not None:
        return None  # credentials in an image URL are never what a page means to show
    if ":" in host:  # an IPv6 literal keeps its brackets
        netloc = f"[{host}]"
    if port is not None:
        netloc += f":{port}"
    path = quote(parts.path, safe=_SAFE)
    query = quote(parts.query, safe=_SAFE)
    return urlunsplit((parts.scheme.lower(), netloc, path, query, ""))


# The common forms, joined without urllib (a third of the harvest's time went to it): a URL
# of characters that need no percent-encoding, no fragment, no dot segments, and a base
# whose scheme and host are already as a browser writes them. Anything else takes resolve().
_PLAIN = re.compile(r"[A-Za-z0-9\-._~/!$&'()*+,;=:@%?\[\]]*\Z")
_ORIGIN = re.compile(r"(https?:)//([a-z0-9.\-]+)(?=[/?]|\Z)")  # a port: the general way


class Resolver:
    """resolve(url, base) for the images of one page, base parsed once: what the common
    forms (absolute http(s), protocol-relative, root-relative, relative) give is exactly
    what resolve() gives, only faster; None for a URL that is not http(s)."""

    def __init__(self, base: str) -> None:
        self.base = base
        origin = _ORIGIN.match(base)
        self.scheme = origin.group(1) if origin else None
        if origin:
            path = re.split(r"[?#]", base[origin.end() :], maxsplit=1)[0] or "/"
            self.origin = origin.group(0)
            self.directory = path[: path.rfind("/") + 1]

    def __call__(self, url: str) -> str | None:
        joined = self._fast(url) if self.scheme and _PLAIN.match(url) else None
        if joined is None:
            joined = resolve(url, self.base)
            return joined if joined is not None and is_http(joined) else None
        return joined

    def _fast(self, url: str) -> str | None:
        if "./" in url or url.endswith((".", "/..")) or url.startswith("?"):
            return None  # dot segments and query-only references: urllib's rules
        if url.startswith("//"):
            url = self.scheme + url
        if url.startswith(("http://", "https://")):
            origin = _ORIGIN.match(url)
            return url if origin and len(url) > origin.end() else None
        if url.startswith("/"):
            return self.origin + url
        if ":" in url.split("/", 1)[0]:
            return None  # a scheme (data:, javascript:, HTTP:): the general way
        return self.origin + self.directory + url


def is_http(url: str) -> bool:
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    return scheme in HTTP_SCHEMES and bool(urlsplit(url).hostname)
