"""The harvest's rules on HTML, each on a page that would fool a regex (issue 47, 2): only
the DOM's `<img>` elements count, alt-texts as a browser decodes them, the URL a lazy-loading
or responsive image shows resolved against the page's base, the charset a browser picks,
one candidate per (alt, URL) in a page, and the page's opt-outs. No Ray."""

from __future__ import annotations

from collections import Counter

import pytest

from conceptual.harvest import HarvestRules, judge
from conceptual.harvest.budget import page_from_html
from conceptual.harvest.html import decode
from conceptual.harvest.pages import collapse
from conceptual.harvest.urls import Resolver, largest_in_srcset, srcset_candidates
from conceptual.weburl import web_url

PAGE = "http://example.com/dir/page.html"


def harvest(html: str | bytes, url: str = PAGE, rules: HarvestRules | None = None, **http):
    """(candidates as (alt, url) pairs, counts) of one page."""
    body = html.encode() if isinstance(html, str) else html
    counts: Counter = Counter()
    page = page_from_html(body, url, **http)
    rows = judge(page, rules or HarvestRules(), counts, source="test", record_offset=0)
    return [(r["alt_text"], r["image_url"]) for r in rows], counts


def test_only_img_elements_of_the_dom_count():
    html = """<html><head>
      <script>document.write('<img src="script.jpg" alt="in a script">');
        var s = "<img src='s2.jpg' alt='in a string'>";</script>
      <style>/* <img src="style.jpg" alt="in a style"> */ body { content: "<img>" }</style>
      </head><body>
      <!-- <img src="comment.jpg" alt="in a comment"> -->
      <div title='<img src="attr.jpg" alt="in an attribute">'>text &lt;img src="text.jpg"
        alt="escaped text"&gt;</div>
      <template><img src="template.jpg" alt="in a template"></template>
      <textarea><img src="textarea.jpg" alt="in a textarea"></textarea>
      <img src="real.jpg" alt="the real one">
      </body></html>"""
    pairs, counts = harvest(html)
    assert pairs == [("the real one", "http://example.com/dir/real.jpg")]
    assert counts["images_seen"] == 1


def test_alt_entities_are_decoded_and_whitespace_collapsed():
    html = (
        '<img src="a.jpg" alt="  Fish &amp; chips&#10;\t on a&nbsp;plate &eacute;t&#233; &lt;3 ">'
    )
    assert harvest(html)[0] == [("Fish & chips on a plate été <3", "http://example.com/dir/a.jpg")]


def test_collapse_takes_its_shortcut_only_where_splitting_changes_nothing():
    """collapse() returns printable text with no double space or space at an end as it is,
    without splitting it: that is right because no code point but the space is both
    whitespace to str.split() and printable; and on each whitespace character and others,
    alone and between words, doubled and at the ends, it gives what splitting and joining
    gives."""
    points = [chr(p) for p in range(0x110000) if not 0xD800 <= p < 0xE000]  # no lone surrogate
    assert [c for c in points if c.isspace() and c.isprintable()] == [" "]
    chars = [c for c in points if c.isspace()] + ["a", "\u200b", "\x00", "é", "\U0001f600"]
    for char in chars:
        for text in (char, f"a{char}b", f"a{char}{char}b", f"{char}a", f"a{char}", f"a {char} b"):
            assert collapse(text) == " ".join(text.split()), hex(ord(char))
    assert collapse("a dog  on\u2003a\xa0mat ") == "a dog on a mat"


def test_images_without_alt_are_counted_by_reason():
    html = """<img src="none.jpg"><img src="empty.jpg" alt=""><img src="blank.jpg" alt=" &#9; ">
      <img alt="no url at all"><img src="  " alt="blank src"><img src="ok.jpg" ALT="Upper">"""
    pairs, counts = harvest(html)
    assert pairs == [("Upper", "http://example.com/dir/ok.jpg")]
    assert (counts["no_alt"], counts["empty_alt"], counts["no_url"]) == (1, 2, 2)
    assert counts["images_seen"] == 6


@pytest.mark.parametrize("attribute", ["data-src", "data-lazy-src", "data-original"])
def test_lazy_loading_attributes_replace_a_placeholder_src(attribute):
    placeholder = "data:image/gif;base64,R0lGODlhAQABAAAAACw="
    html = f"""<img src="{placeholder}" {attribute}="/big/photo.jpg" alt="lazy">
      <img src="" {attribute}="empty-src.jpg" alt="empty src">
      <img src="real.jpg" {attribute}="ignored.jpg" alt="a real src wins">"""
    pairs, _ = harvest(html)
    assert pairs == [
        ("lazy", "http://example.com/big/photo.jpg"),
        ("empty src", "http://example.com/dir/empty-src.jpg"),
        ("a real src wins", "http://example.com/dir/real.jpg"),
    ]


def test_a_data_url_with_nothing_better_is_not_http():
    pairs, counts = harvest('<img src="data:image/png;base64,AAAA" alt="inline">')
    assert pairs == [] and counts["not_http"] == 1


def test_srcset_gives_its_largest_candidate_when_there_is_no_src():
    html = """<img srcset="small.jpg 320w, large.jpg 1280w, medium.jpg 640w" alt="by width">
      <img srcset="one.jpg, two.jpg 2x, onehalf.jpg 1.5x" alt="by density">
      <img src="" srcset="https://cdn.example.org/w_100,h_80/a.jpg 100w,
        https://cdn.example.org/w_900,h_720/a.jpg 900w" alt="commas in URLs">
      <img src="src.jpg" srcset="huge.jpg 4000w" alt="src first">
      <img data-srcset="lazy-small.jpg 1x, lazy-big.jpg 3x" alt="lazy srcset">"""
    pairs, _ = harvest(html)
    assert pairs == [
        ("by width", "http://example.com/dir/large.jpg"),
        ("by density", "http://example.com/dir/two.jpg"),
        ("commas in URLs", "https://cdn.example.org/w_900,h_720/a.jpg"),
        ("src first", "http://example.com/dir/src.jpg"),
        ("lazy srcset", "http://example.com/dir/lazy-big.jpg"),
    ]


def test_srcset_parsing_follows_the_standard():
    assert srcset_candidates("a.jpg 1x,b.jpg 2x") == [("a.jpg", "1x"), ("b.jpg", "2x")]
    assert srcset_candidates("a.jpg,, b.jpg") == [("a.jpg", ""), ("b.jpg", "")]
    assert largest_in_srcset("a.jpg 10h") is None  # no descriptor a browser picks by
    assert largest_in_srcset("") is None


def test_urls_resolve_against_base_href_then_the_page():
    html = """<head><base href="/static/v2/"></head>
      <img src="rel.jpg" alt="relative"><img src="/root.jpg" alt="root-relative">
      <img src="//cdn.example.net/p.jpg" alt="protocol-relative">
      <img src="https://other.example/abs.jpg#frag" alt="absolute">
      <img src="../up.jpg" alt="up a level">"""
    pairs, _ = harvest(html, "https://example.com/a/b.html")
    assert pairs == [
        ("relative", "https://example.com/static/v2/rel.jpg"),
        ("root-relative", "https://example.com/root.jpg"),
        ("protocol-relative", "https://cdn.example.net/p.jpg"),
        ("absolute", "https://other.example/abs.jpg"),
        ("up a level", "https://example.com/static/up.jpg"),
    ]
    # Without a base, the page's own URL.
    assert harvest('<img src="x.jpg" alt="x">', "http://h.example/p/q")[0] == [
        ("x", "http://h.example/p/x.jpg")
    ]


def test_only_http_urls_are_kept():
    html = """<img src="javascript:void(0)" alt="js"><img src="ftp://f.example/a.jpg" alt="ftp">
      <img src="mailto:a@b.example" alt="mail"><img src="http://[bad" alt="does not parse">
      <img src="HTTPS://Upper.Example/A.jpg" alt="upper-case scheme">"""
    pairs, counts = harvest(html)
    assert pairs == [("upper-case scheme", "https://upper.example/A.jpg")]
    assert counts["not_http"] == 4


def test_urls_are_written_as_a_browser_requests_them():
    assert web_url("my photo é.jpg", PAGE) == "http://example.com/dir/my%20photo%20%C3%A9.jpg"
    assert web_url("http://bücher.example/a.jpg", PAGE) == "http://xn--bcher-kva.example/a.jpg"
    assert web_url("a.jpg?w=1&h=2", PAGE) == "http://example.com/dir/a.jpg?w=1&h=2"


def test_the_same_alt_and_url_twice_in_a_page_is_one_candidate():
    html = """<img src="a.jpg" alt="a cat"><img src="a.jpg" alt="a  cat">
      <img src="./a.jpg" alt="a cat"><img src="a.jpg" alt="another caption">"""
    pairs, counts = harvest(html)
    assert pairs == [
        ("a cat", "http://example.com/dir/a.jpg"),
        ("another caption", "http://example.com/dir/a.jpg"),
    ]
    assert counts["duplicate_in_page"] == 2


@pytest.mark.parametrize(
    "head, headers",
    [
        ('<meta name="robots" content="index, noimageindex">', ()),
        ('<meta name="ROBOTS" content="noai">', ()),
        ("", ["googlebot: noimageai"]),
        ("", ["noindex", "noai"]),
    ],
)
def test_opted_out_pages_give_no_candidates(head, headers):
    html = f'<html><head>{head}</head><body><img src="a.jpg" alt="a photo"></body></html>'
    pairs, counts = harvest(html, robots_headers=headers)
    assert pairs == [] and counts["opted_out"] == 1
    kept, _ = harvest(html, robots_headers=headers, rules=HarvestRules(respect_opt_out=False))
    assert kept == [("a photo", "http://example.com/dir/a.jpg")]


def test_noindex_alone_and_opt_outs_in_text_do_not_opt_out():
    html = """<head><meta name="robots" content="noindex, nofollow">
      <meta name="description" content="noimageindex"></head>
      <p>&lt;meta name="robots" content="noai"&gt;</p><img src="a.jpg" alt="shown">"""
    assert harvest(html)[0] == [("shown", "http://example.com/dir/a.jpg")]


CAFE = "Café “crème” – 5 €"


def test_windows_1252_by_the_http_header():
    body = f'<img src="a.jpg" alt="{CAFE}">'.encode("cp1252")
    assert harvest(body, header_charset="windows-1252")[0][0][0] == CAFE
    # iso-8859-1 is read as windows-1252, as browsers do (the quotes are 0x93/0x94)
    assert harvest(body, header_charset="ISO-8859-1")[0][0][0] == CAFE


def test_windows_1252_by_meta_http_equiv():
    body = (
        '<head><meta http-equiv="Content-Type" content="text/html; charset=windows-1252">'
        f'</head><img src="a.jpg" alt="{CAFE}">'
    ).encode("cp1252")
    assert harvest(body)[0][0][0] == CAFE


def test_shift_jis_by_meta_charset_with_microsofts_extensions():
    alt = "日本の猫 ～① 写真"
    body = f'<head><meta charset="Shift_JIS"></head><img src="neko.jpg" alt="{alt}">'
    assert harvest(body.encode("cp932"))[0][0][0] == alt


def test_the_http_header_wins_over_meta_and_a_bom_over_both():
    body = f'<head><meta charset="utf-8"></head><img src="a.jpg" alt="{CAFE}">'.encode("cp1252")
    assert harvest(body, header_charset="windows-1252")[0][0][0] == CAFE
    bom = b"\xef\xbb\xbf" + f'<img src="a.jpg" alt="{CAFE}">'.encode()
    assert harvest(bom, header_charset="windows-1252")[0][0][0] == CAFE


def test_an_undeclared_charset_is_detected():
    text = "Ein schöner Frühlingstag am Flußufer: Kühe grasen, Möwen kreisen über den Häusern."
    body = f'<html><body><p>{text * 3}</p><img src="a.jpg" alt="{text}"></body></html>'
    assert harvest(body.encode("cp1252"))[0][0][0] == text
    assert decode(body.encode("utf-8")) == body


def test_an_unknown_header_charset_falls_through_to_meta():
    body = f'<meta charset="windows-1252"><img src="a.jpg" alt="{CAFE}">'.encode("cp1252")
    assert harvest(body, header_charset="x-no-such-charset")[0][0][0] == CAFE


def test_the_page_language_is_kept():
    rows = judge(
        page_from_html(b'<html lang=" en-GB "><img src="a.jpg" alt="a"></html>', PAGE),
        HarvestRules(),
        Counter(),
    )
    assert rows[0]["lang"] == "en-gb" and rows[0]["page_url"] == PAGE
    header = page_from_html(b'<img src="a.jpg" alt="a">', PAGE, content_language="de, en")
    assert header.lang == "de"


def test_the_fast_join_gives_what_the_general_one_gives():
    """Resolver's shortcuts for the common forms against web_url on every pair of these
    bases and references (tests/unit/harvest/test_web_urls.py: on the web-platform-tests' too)."""
    bases = [
        "http://example.com/dir/page.html?q=1",
        "https://example.com",
        "http://example.com:8080/a/b/",
        "HTTP://Example.COM/x/y",
        "http://example.com:080/p",
        "ftp://example.com/a/",
        "http://0x7f.1/dir/",
        "https://u:p@example.com/a/",
    ]
    references = [
        "img.jpg", "a/b.jpg?x=1&y=2", "/root.jpg", "//cdn.example/p.jpg", "https://o.example/x",
        "http://o.example", "http://O.example/x", "../up.jpg", "./here.jpg", "a/./b.jpg", "..",
        "?only=query", "#frag", "x.jpg#frag", "data:image/png;base64,AA", "javascript:x()",
        "HTTPS://upper.example/x", "http://h:080/x", "sp ace.jpg", "é.jpg", "a%20b.jpg",
        "mailto:x@y", "x:y/z.jpg", "[v6].jpg", "http://[::1]/x.jpg", "http://h:99999/x",
        "http://h.example?x", "a/..?x", "%2e%2e/x.jpg", "a/%2E/b.jpg", "//0x7f.1/x",
        "http://2130706433/x", "http://1.2.3/x", "http://a.1/x", "http://xn--pokxncvks/x",
        "http://xn--bcher-kva.example/x", "a.jpg?q='1'", "it's.jpg", "a\\b.jpg", "",
        "http://a..b/x", "http://a.b./x", "//u@h.example/x", "http:x.jpg", "https:x.jpg",
    ]  # fmt: skip
    for base in bases:
        resolver = Resolver(base)
        for reference in references:
            assert resolver(reference) == web_url(reference, base), (base, reference)
