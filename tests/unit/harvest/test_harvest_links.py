"""The harvest's compiled inner loop (issue 60, 2): harvest/_links.c gives exactly what its
definition, pages.judge_images, gives (the same candidates, keys in the same order, the same
reasons in the same order) on the web-platform-tests' URL inputs against bases of every
form, on generated pages of URLs and alt-texts built to find where a hand-written matcher
and a regex part (dot segments, punycode labels, numeric last labels, ports, upper case,
other scripts, lone surrogates, whitespace of every kind), and on every caption of
../shared/data. No Ray."""

from __future__ import annotations

import csv
import json
import random
import sys
from collections import Counter
from pathlib import Path

import pytest

from conceptual.candidates import MAX_STORED_CHARS
from conceptual.harvest import pages
from conceptual.harvest.pages import judge_images
from conceptual.harvest.urls import document_base, strip_url
from conceptual.weburl import web_url

WPT = Path(__file__).resolve().parents[2] / "data" / "wpt" / "urltestdata.json"
CASES = [case for case in json.loads(WPT.read_text(encoding="utf-8")) if isinstance(case, dict)]
PAGE = "http://example.com/dir/page.html"
PROVENANCE = {"source": "s3://crawl/a.warc.gz", "record_offset": 12}
# Page URLs of every form (the page's base is its URL, or its <base href>)
PAGES = [
    PAGE,
    "https://example.com/dir/page.html?q=1#top",
    "http://example.com",
    "http://example.com/a/b/",
    "http://example.com/a/b?x=/c/d",
    "http://example.com:8080/a/b/",
    "http://127.0.0.1/dir/",
    "http://0x7f.1/dir/",
    "http://[::1]/x/",
    "https://xn--nxasmq6b.example/p/q",
    "https://ünicode.example/p/q",
    "http://h.example/d/é/f",
    "http://EXAMPLE.com/a/",
    "http:/example.com/a/",
    "https://user:pw@example.com/a/",
    "file:///tmp/",
    "data:text/plain,x",
    "",
    "not a URL",
]
BASE_HREFS = [
    None,
    None,
    None,
    "/base/",
    "//cdn.example/x/",
    "https://o.example",
    "../up/",
    "javascript:x",
    "",
]


def call(images, page_url=PAGE, parser=web_url, counts=None):
    """The compiled loop on a page with no <base href>, no language and no provenance."""
    from conceptual.harvest import _links

    counts = Counter() if counts is None else counts
    return _links.candidates(
        MAX_STORED_CHARS, document_base, parser, images, page_url, None, None, {}, counts
    )


def both(images, page_url=PAGE, base_href=None, lang="en", provenance=PROVENANCE):
    """The compiled loop's candidates, asserted to be its definition's, and its counts."""
    counts, want_counts = Counter({"images_seen": 1}), Counter({"images_seen": 1})
    got = pages.compiled_judge_images(images, page_url, base_href, lang, provenance, counts)
    want = judge_images(images, page_url, base_href, lang, provenance, want_counts)
    assert [list(row.items()) for row in got] == [list(row.items()) for row in want], page_url
    assert list(counts.items()) == list(want_counts.items()), page_url
    return got, counts


def test_the_compiled_loop_is_built_and_judge_calls_it():
    assert pages._links is not None, "make setup builds conceptual/harvest/_links.c"
    assert pages.compiled_judge_images.func is pages._links.candidates


def test_every_wpt_input_against_pages_and_bases_of_every_form():
    inputs = [case["input"] for case in CASES]
    images = [(f"image {i}", url) for i, url in enumerate(inputs)]
    pages = [(page, None) for page in PAGES] + [(PAGE, href) for href in BASE_HREFS]
    pages += [(c["base"], None) for c in CASES if c.get("base")]
    for page_url, base_href in pages:
        rows, counts = both(images, page_url, base_href)
        assert len(rows) + sum(counts.values()) - 1 == len(inputs)
        base = document_base(page_url, base_href)
        for row in rows:  # each candidate's URL is the parser's own
            raw = inputs[int(row["alt_text"].split()[1])]
            assert row["image_url"] == web_url(strip_url(raw), base), (raw, page_url, base_href)
    rows, _ = both(images, PAGE)
    assert len(rows) > 300  # of the suite's inputs, most of those of an http(s) URL


# Pieces of URLs where a matcher by hand and the regex it replaces could part
PIECES = [
    *"aZ09-._~!$&()*+,;=@%[]/?:#\\ \t\n'\"<>|{}^`",
    "a", "img", "b.jpg", "x", "xn--", "xn--a", "xn-", "ab", "-", "1", "123", "0x7f", "1.2.3.4",
    "http:", "https:", "HTTP:", "http", "ftp:", "javascript:", "data:", "//", "///", "./",
    "../", ".", "..", "%2e", "%2E", "%2f", "%20", "?", "??", ":80", ":", "@", "user:pw@",
    "é", "\u00a0", "\u3000", "\u200b", "\ud800", "\U0001f600", "ℂ", "ä.example", "Ａ",
    "example.com", "cdn.example.", ".example", "a..b", "w_100,h_80", "#top", "?q=1&w=2",
]  # fmt: skip
ALT_PIECES = [
    "a dog", " ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u2003", "\u3000", "\x1c", "\x85",
    "\u200b", "\ufeff", "\ud800", "\U0001f600", "é", "犬", "كلب", "", "x" * 3, "  a  b  ",
]  # fmt: skip


def test_generated_pages():
    rng = random.Random(60)
    for _ in range(3000):
        images = []
        for _ in range(rng.randint(0, 12)):
            url = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 7)))
            if rng.random() < 0.3:  # one of a crawl's plain forms
                url = rng.choice(["", "/", "//cdn.example/", "http://a.example/", "https://b.c/"])
                url += "/".join(rng.choice(["img", "a.jpg", "x", "b-c", "d_e"]) for _ in range(3))
            alt = "".join(rng.choice(ALT_PIECES) for _ in range(rng.randint(0, 4)))
            images.append((rng.choice([alt, alt, alt, None]), rng.choice([url, url, url, None])))
        images += rng.sample(images, min(2, len(images)))  # an image twice in the page
        page_url, base_href = rng.choice(PAGES), rng.choice(BASE_HREFS)
        both(images, page_url, base_href, lang=rng.choice(["en", None, "zh-cn"]))


def test_the_length_cap_and_the_candidate_row():
    long, url = "x" * MAX_STORED_CHARS, "http://e.example/"
    url += "x" * (MAX_STORED_CHARS - len(url))
    images = [(long, "a.jpg"), (long + "x", "a.jpg"), ("a", url), ("a", url + "x")]
    rows, counts = both(images)
    assert len(rows) == 2 and counts["too_long"] == 2
    # provenance's keys come after the candidate's own, and win as a dict display's do
    rows, _ = both([("a", "b.jpg")], provenance={"lang": "xx", "record_offset": 3})
    assert list(rows[0]) == ["id", "image_url", "page_url", "alt_text", "lang", "record_offset"]
    assert rows[0]["lang"] == "xx"


def test_a_malformed_image_raises_and_the_record_is_quarantined():
    for bad in [("a",), ("a", "b", "c"), ["a", "b.jpg"], (1, "b.jpg"), ("a", 1)]:
        with pytest.raises(TypeError):
            call([bad])
    with pytest.raises(ZeroDivisionError):  # web_url's own error passes through
        call([("a", "A:b")], parser=lambda *_: 1 / 0)


def test_no_reference_is_leaked():
    images = [("a dog", "img/a.jpg"), ("a  cat", "HTTP://X/b"), (None, "c"), ("d", None)]
    counts = Counter()
    objects = (PAGE, *images[0], *images[1], "http://o.example/")
    before = [sys.getrefcount(o) for o in objects]
    for _ in range(1000):
        call(images, counts=counts)
        call(images, page_url="http://o.example/", counts=counts)
    assert [sys.getrefcount(o) for o in objects] == before
    assert counts["no_alt"] == counts["no_url"] == 2000


def test_every_caption_of_the_shared_data(real_data):
    texts = [
        line.split("\t")[0] for line in open(real_data / "cc_val_captions.tsv", encoding="utf-8")
    ]
    for path in sorted(real_data.rglob("*.csv")):
        with open(path, encoding="utf-8", newline="") as f:
            texts += [value for row in csv.reader(f) for value in row]
    for path in sorted(real_data.rglob("*.json")):
        texts += [s for s in json.dumps(json.loads(path.read_text("utf-8"))).split('"')]
    assert len(texts) > 10_000
    for start in range(0, len(texts), 500):
        chunk = texts[start : start + 500]
        both([(text, f"img/{i}.jpg") for i, text in enumerate(chunk)])
        both([(f"alt {i}", text) for i, text in enumerate(chunk)])


def test_the_plain_forms_are_joined_without_the_parser():
    called = []

    def parser(url, base):
        called.append(url)
        return web_url(url, base)

    plain = ["img/a.jpg", "/b.jpg", "//cdn.example/c.jpg", "https://s.example/d.jpg", "e.jpg?"]
    odd = ["HTTP://x.example/a", "//xn--nxasmq6b/a", "//h.example.1/a", "../a.jpg", "a b.jpg"]
    rows = call([("a", url) for url in plain + odd], parser=parser)
    assert called == odd and len(rows) >= len(plain)


def test_judge_without_the_extension_gives_the_same(monkeypatch):
    """A source tree without `make setup`: judge() takes the Python loop, same answers."""
    from conceptual.harvest import HarvestRules, Page, judge

    page = Page(url=PAGE, images=[("a  dog", "img/a.jpg"), ("", "b.jpg"), ("c", "HTTP://X/c")])
    answers = []
    for loop in (pages.compiled_judge_images, judge_images):
        monkeypatch.setattr(pages, "compiled_judge_images", loop)
        counts = Counter()
        answers.append((judge(page, HarvestRules(), counts, source="s", record_offset=1), counts))
    assert answers[0] == answers[1] and len(answers[0][0]) == 2
