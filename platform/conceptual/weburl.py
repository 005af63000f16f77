"""Image URLs by the URL Standard (https://url.spec.whatwg.org/), the one place that parses,
resolves and writes them: harvest (an `<img>`'s URL against the page or its `<base href>`),
curation's checks before a fetch, URL deduplication, and the fetcher's redirects all take
`web_url`'s answer, so the URL that is checked is the URL that is fetched and the one that
is compared.

The parser is Ada (the `ada-url` package: the C++ parser Node.js uses, conformant with the
standard's web-platform-tests), never urllib: a backslash is a slash, `http://example.org`
is `http://example.org/`, a numeric or odd-form IPv4 host (`0x7f.1`, `2130706433`) is its
dotted form, an IPv6 host is compressed, a default port goes, an empty query stays, an IDN
host is punycode, and a host the standard refuses (a space, a control character, `%zz`,
`192.168.0.257`) is no URL at all.

On top of the standard, the platform's own rules: http and https only; no credentials (a
browser blocks a subresource URL with credentials, and a crawl's credentials are never a
page's to share); no fragment (it never reaches a server, and two URLs that differ by it
are one image). `why_not` tells which rule a URL failed, for the fetcher's reasons.
"""

from __future__ import annotations

from ada_url._ada_wrapper import (  # the package's C API (ada_c.h), without a wrapper per call
    ffi,
    lib,
)

HTTP_SCHEMES = ("http", "https")
_WEB_PREFIXES = ("http://", "https://")


def _utf8(text: str) -> bytes:
    """A string as the standard reads it: scalar values, a lone surrogate as U+FFFD (what a
    browser's USVString conversion makes of one)."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode()


def standard_href(reference: str, base: str | None = None) -> str | None:
    """The URL Standard's serialization (`href`) of `reference` parsed against `base` (none:
    an absolute URL), any scheme, fragment and credentials kept; None when it is failure
    (a base that is failure fails too)."""
    data = _utf8(reference)
    if base is None:
        parsed = lib.ada_parse(data, len(data))
    else:
        base_data = _utf8(base)
        parsed = lib.ada_parse_with_base(data, len(data), base_data, len(base_data))
    try:
        if not lib.ada_is_valid(parsed):
            return None
        href = lib.ada_get_href(parsed)
        return ffi.unpack(href.data, href.length).decode()
    finally:
        lib.ada_free(parsed)


def web_url(reference: str, base: str | None = None) -> str | None:
    """`reference` resolved against `base` by the URL Standard and written as the standard
    writes it, without its fragment; None when it fails to parse, is not http(s) or holds
    credentials. A URL it gives is its own answer again (`web_url(web_url(u)) == web_url(u)`).
    """
    return _web(standard_href(reference, base))


def _web(href: str | None) -> str | None:
    """The platform's rules on a standard href: http(s), no credentials, no fragment."""
    if href is None or not href.startswith(_WEB_PREFIXES):
        return None
    start = 7 if href[4] == ":" else 8
    # A special URL's path always starts with "/", and an "@" before it is the userinfo's
    # end: the standard percent-encodes one inside a username or password, and a host
    # cannot hold one.
    if "@" in href[start : href.index("/", start)]:
        return None
    cut = href.find("#")
    return href if cut < 0 else href[:cut]


def why_not(reference: str, base: str | None = None) -> tuple[str, str] | None:
    """(reason, detail) of why `web_url` gives None, in the fetcher's reasons (invalid_url,
    unsupported_scheme); None when it gives a URL. The detail never holds the URL."""
    href = standard_href(reference, base)
    if href is None:
        return "invalid_url", "not a URL by the URL Standard"
    scheme = href.split(":", 1)[0]
    if scheme not in HTTP_SCHEMES:
        return "unsupported_scheme", f"{scheme}:"
    if _web(href) is None:
        return "invalid_url", "credentials in the URL"
    return None


def parts(href: str) -> tuple[str, str, int | None, str]:
    """(scheme, host, port or None for the scheme's default, path and query) of an http(s)
    href as the standard writes it (`web_url`'s answers, or `standard_href`'s with
    credentials, which are skipped); the host as the standard gives it: a domain in
    lower-case ASCII, a dotted IPv4 address, or an IPv6 address without its brackets."""
    scheme, _, rest = href.partition("://")
    slash = rest.index("/")
    authority, target = rest[:slash], rest[slash:]
    authority = authority.rpartition("@")[2]
    cut = target.find("#")
    if cut >= 0:
        target = target[:cut]
    if authority.startswith("["):
        host, _, after = authority[1:].partition("]")
        port = after[1:]
    else:
        host, _, port = authority.partition(":")
    return scheme, host, int(port) if port else None, target
