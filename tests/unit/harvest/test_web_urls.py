"""Image URLs by the URL Standard (issue 60, 1): the web-platform-tests' URL cases
(tests/data/wpt/urltestdata.json) through conceptual/weburl.py's `web_url`, the one function
harvest, curation's checks, deduplication and the fetcher use: every case with an http(s)
result gives the standard's href without its fragment (but one with credentials, which the
platform refuses), every other case no URL. The harvest's fast path gives exactly what the
parser gives, on every case. And the forms a crawl holds that urllib got wrong. No Ray."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from conceptual.harvest.urls import Resolver, document_base
from conceptual.pipelines.dataflow.rows import duplicate_keys, duplicates
from conceptual.records import PROCESSED
from conceptual.vision.http_client import redirect_url
from conceptual.vision.url_safety import Failure
from conceptual.weburl import parts, standard_href, web_url, why_not

WPT = Path(__file__).resolve().parents[2] / "data" / "wpt" / "urltestdata.json"
CASES = [case for case in json.loads(WPT.read_text(encoding="utf-8")) if isinstance(case, dict)]


def expected(case: dict) -> str | None:
    """What web_url gives for a wpt case: the standard's href without its fragment when it
    is http(s) and holds no credentials; otherwise no URL."""
    if case.get("failure") or case["protocol"] not in ("http:", "https:"):
        return None
    if case["username"] or case["password"]:
        return None
    return case["href"].split("#", 1)[0]  # an http(s) href holds "#" only as its fragment's


def test_every_wpt_case_gives_the_standards_url_or_none():
    wrong = [
        (case["input"], case.get("base"), got, want)
        for case in CASES
        if (got := web_url(case["input"], case.get("base"))) != (want := expected(case))
    ]
    assert not wrong, f"{len(wrong)} of {len(CASES)} cases differ, first: {wrong[:5]}"
    web = sum(expected(case) is not None for case in CASES)
    assert len(CASES) > 800 and web > 200  # the file read is the whole suite


def test_every_wpt_case_parses_as_the_standard_says():
    """The parser under web_url, any scheme: the href, or failure."""
    wrong = [
        (case["input"], case.get("base"))
        for case in CASES
        if standard_href(case["input"], case.get("base"))
        != (None if case.get("failure") else case["href"])
    ]
    assert not wrong, wrong[:5]


def test_the_host_checked_is_the_host_the_standard_gives():
    for case in CASES:
        url = expected(case)
        if url is not None:
            scheme, host, port, target = parts(url)
            assert (scheme + ":", host, "" if port is None else str(port)) == (
                case["protocol"],
                case["hostname"].strip("[]"),
                case["port"],
            ), case["input"]
            query = case["search"] or ("?" if "?" in url else "")  # an empty query stays
            assert target == case["pathname"] + query


BASES = [
    "http://example.org/foo/bar",
    "https://example.com/dir/page.html?q=1#top",
    "http://example.com:8080/a/b/",
    "http://0x7f.1/dir/",
    "https://user:pass@example.com/a/",
    "http://[::1]/x/",
    "file:///tmp/",
    None,
]


def test_the_fast_path_gives_what_the_parser_gives_on_every_case():
    """Resolver (the harvest's, one base per page) against web_url on every wpt case with its
    own base, and on every wpt input against bases of each form; the plain forms of a crawl
    take the fast path."""
    pairs = [(case["input"], case.get("base")) for case in CASES]
    pairs += [(case["input"], base) for case in CASES for base in BASES]
    plain = [
        "img/a.jpg", "/media/b.jpg", "//cdn.example/c.jpg", "https://static.example/d.jpg",
        "a/b/c.jpg?w=640&h=480", "e.jpg?", "w_100,h_80/f.jpg", "a%20b.jpg", "x@y.jpg",
    ]  # fmt: skip
    pairs += [(reference, base) for reference in plain for base in BASES]
    fast = 0
    for reference, base in pairs:
        resolver = Resolver(base)
        # the harvest's own, on the base as document_base() wrote it
        written = Resolver.of_document(None if base is None else document_base(base, None))
        assert resolver(reference) == written(reference) == web_url(reference, base), (
            reference,
            base,
        )
        fast += resolver.fast(reference) is not None
    assert fast > 200
    assert all(
        Resolver(BASES[1]).fast(reference) for reference in plain
    )  # the fast path answered for these many pairs itself


def test_what_urllib_got_wrong():
    page = "http://example.org/dir/page.html"
    assert web_url("a\\b.jpg", page) == "http://example.org/dir/a/b.jpg"  # backslash: slash
    assert web_url("\\\\cdn.example\\c.jpg", page) == "http://cdn.example/c.jpg"
    assert web_url("http://example.org") == web_url("http://example.org/") == "http://example.org/"
    for host in ("exa mple.org", "exa\x01mple.org", "exa%zzmple.org", "192.168.0.257", "[::1"):
        assert web_url(f"http://{host}/a.jpg") is None, host
    assert web_url("http://0x7f.1/a.jpg") == "http://127.0.0.1/a.jpg"
    assert web_url("http://2130706433/a.jpg") == "http://127.0.0.1/a.jpg"
    assert web_url("http://EXAMPLE.org:80/a.jpg") == "http://example.org/a.jpg"
    assert web_url("https://example.org:443/a.jpg") == "https://example.org/a.jpg"
    assert web_url("https://example.org:80/a.jpg") == "https://example.org:80/a.jpg"
    assert web_url("http://example.org/a.jpg?") == "http://example.org/a.jpg?"  # kept
    assert web_url("http://[0:0:0:0:0:0:0:1]:80/a.jpg") == "http://[::1]/a.jpg"
    assert web_url("http://[2001:DB8::0:1]/") == "http://[2001:db8::1]/"
    assert web_url("http://bücher.example/a.jpg#x") == "http://xn--bcher-kva.example/a.jpg"
    assert web_url("http://u:p@example.org/a.jpg") is None  # credentials
    assert web_url("ftp://example.org/a.jpg") is None and web_url("a.jpg") is None


def test_why_not_names_the_rule():
    assert why_not("http://example.org/") is None
    assert why_not("http://exa mple.org/") == ("invalid_url", "not a URL by the URL Standard")
    assert why_not("ftp://example.org/") == ("unsupported_scheme", "ftp:")
    assert why_not("http://u:secret@example.org/") == ("invalid_url", "credentials in the URL")


def test_a_web_url_is_its_own_answer():
    for case in CASES:
        url = expected(case)
        if url is not None:
            assert web_url(url) == url, case["input"]


def test_the_document_base_is_the_html_standards():
    page = "http://example.org/a/b.html"
    assert document_base(page, None) == page
    assert document_base(page, " /static/ ") == "http://example.org/static/"
    assert document_base(page, "http://[bad") == page  # failure: the page's own URL
    assert document_base(page, "data:text/html,x") == page  # data: and javascript: are not
    assert document_base(page, "javascript:void(0)") == page
    assert document_base("HTTP://Example.ORG:80/a\\b", None) == "http://example.org/a/b"
    assert document_base("not a url", "/x/") is None  # no base: only absolute URLs resolve
    assert (
        Resolver(None)("a.jpg") is None
        and Resolver(None)("http://h.example/a") == "http://h.example/a"
    )


def test_a_redirect_leads_where_the_standard_says():
    sent = "http://example.org/dir/a.jpg"
    assert redirect_url(sent, "\\\\cdn.example\\b.jpg") == "http://cdn.example/b.jpg"
    assert redirect_url(sent, "../c.jpg#x") == "http://example.org/c.jpg"
    assert redirect_url(sent, "//0x7f.1/") == "http://127.0.0.1/"
    assert redirect_url(sent, "ftp://f.example/") == "ftp://f.example/"  # refused at next hop
    with pytest.raises(Failure, match="invalid_url"):
        redirect_url(sent, "http://exa mple.org/")


def row(position: int, image_url: str) -> dict:
    return {
        "id": f"r{position}",
        "image_url": image_url,
        "page_url": None,
        "alt_text": "a photo",
        "position": position,
        "caption": "a photo",
        "entities": [],
        "types": [],
        "stage": None,
        "reason": None,
        "detail": None,
    }


def test_url_deduplication_compares_the_canonical_urls():
    urls = [
        "http://example.org",
        "http://example.org/",
        "HTTP://EXAMPLE.org:80/#top",
        "http://example.org/a\\b.jpg",
        "http://example.org/a/b.jpg",
        "http://0x7f.1/x.jpg",
        "http://127.0.0.1/x.jpg",
        "images/x.jpg",  # an imported image's dataset path: as it is
        "images/x.jpg",
        "images/y.jpg",
    ]
    rows = [row(i, url) for i, url in enumerate(urls)]
    for r in rows:
        r.update({k: None for k in PROCESSED.names if k not in r})
    keys = duplicate_keys(pa.Table.from_pylist(rows, schema=PROCESSED))
    repeats = duplicates(keys, by_url=True, by_image=False)["position"].to_pylist()
    assert repeats == [1, 2, 4, 6, 8]
