"""Reading web archives record by record (issue 47, 1-2): WARC plain, gzipped per record
and as one stream give the same candidates, a WAT of the same pages gives the same pairs,
every record is counted once with its reason, and a corrupt or truncated record is counted
and read past. Archives written with fastwarc (tests/web_archives.py). No Ray."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest
from fastwarc.warc import ArchiveIterator, WarcRecordType
from web_archives import (  # tests/web_archives.py
    claiming,
    request,
    response,
    warc_record,
    warcinfo,
    wat_page,
    write_archive,
    write_wat,
)

from conceptual.funnel import AccountingError
from conceptual.harvest import HarvestRules, harvest_archive
from conceptual.harvest import stats as harvest_stats


def opener(path: Path):
    def open_at(offset: int):
        stream = open(path, "rb")
        stream.seek(offset)
        return stream

    return open_at


def harvest(path: Path, rules: HarvestRules | None = None) -> tuple[list[dict], Counter]:
    counts: Counter = Counter(files=1)
    rows = list(harvest_archive(opener(path), str(path), rules or HarvestRules(), counts))
    counts["candidates"] = len(rows)
    harvest_stats.build(counts)  # every record and image accounted for, or it raises
    return rows, counts


def pairs(rows: list[dict]) -> list[tuple[str, str, str]]:
    return [(r["alt_text"], r["image_url"], r["page_url"]) for r in rows]


def page(i: int) -> bytes:
    return response(
        f"http://site.example/p{i}.html",
        f'<html lang="en"><img src="/img/{i}.jpg" alt="photo {i}"><img src="x.png"></html>'.encode(),
    )


PAGES = [page(i) for i in range(4)]
EXPECTED = [(f"photo {i}", f"http://site.example/img/{i}.jpg", f"http://site.example/p{i}.html") for i in range(4)]  # fmt: skip


@pytest.mark.parametrize("gzipped", [None, "record", "stream"])
def test_plain_and_gzipped_warcs_give_the_same_candidates(tmp_path, gzipped):
    path = write_archive(tmp_path / "crawl.warc.gz", [warcinfo(), *PAGES], gzipped)
    rows, counts = harvest(path)
    assert pairs(rows) == EXPECTED
    assert rows[0]["lang"] == "en" and rows[0]["source"] == str(path)
    assert counts["records"] == 5 and counts["not_response"] == 1 and counts["html_pages"] == 4
    assert counts["images_seen"] == 8 and counts["no_alt"] == 4
    assert counts["format.warc"] == 1


def test_a_record_offset_finds_its_record(tmp_path):
    path = write_archive(tmp_path / "crawl.warc.gz", [warcinfo(), *PAGES], "record")
    rows, _ = harvest(path)
    with open(path, "rb") as stream:
        stream.seek(rows[2]["record_offset"])
        record = next(iter(ArchiveIterator(stream)))
        assert record.headers["WARC-Target-URI"] == rows[2]["page_url"]


def test_format_is_known_by_content_not_by_name(tmp_path):
    warc = write_archive(tmp_path / "crawl.warc.gz", PAGES, "record")
    wat = write_wat(warc, tmp_path / "named-like-a.warc")
    rows, counts = harvest(wat)
    assert counts["format.wat"] == 1 and pairs(rows) == EXPECTED
    text = tmp_path / "notes.warc"
    text.write_text("this is not a web archive\n")
    assert harvest(text)[1]["not_an_archive"] == 1
    gz = tmp_path / "data.warc.gz"
    gz.write_bytes(gzip.compress(b"id,caption\n1,a cat\n"))
    assert harvest(gz)[1]["not_an_archive"] == 1


def test_a_wat_gives_the_pairs_its_warc_gives(tmp_path):
    """The WAT's link list (Common Crawl's layout, made by another HTML parser) and the
    harvest's own parse of the WARC agree on every rule a WAT can express."""
    html = """<html><head><base href="https://cdn.example/base/">
      <title>t</title></head><body>
      <img src="rel.jpg" alt="  relative &amp; based ">
      <img src="/root.jpg" alt="root"><img src="//proto.example/p.jpg" alt="protocol">
      <img src="no-alt.jpg"><img src="e.jpg" alt=" "><img src="javascript:x()" alt="js">
      <img src="rel.jpg" alt="relative &amp; based">
      <a href="other.html"><img src="linked.jpg" alt="in a link"></a></body></html>"""
    records = [
        request("http://a.example/page"),
        response("http://a.example/page", html.encode()),
        response("http://a.example/gone", b"<img src=a.jpg alt=gone>", status="404 Not Found"),
        response("http://a.example/style.css", b"img{}", content_type="text/css"),
    ]
    warc = write_archive(tmp_path / "c.warc.gz", [warcinfo(), *records])
    wat = write_wat(warc, tmp_path / "c.wat.gz")
    from_warc, warc_counts = harvest(warc)
    from_wat, wat_counts = harvest(wat)
    assert (
        pairs(from_warc)
        == pairs(from_wat)
        == [
            ("relative & based", "https://cdn.example/base/rel.jpg", "http://a.example/page"),
            ("root", "https://cdn.example/root.jpg", "http://a.example/page"),
            ("protocol", "https://proto.example/p.jpg", "http://a.example/page"),
            ("in a link", "https://cdn.example/base/linked.jpg", "http://a.example/page"),
        ]
    )
    for counts in (warc_counts, wat_counts):
        assert (counts["not_2xx"], counts["not_html"], counts["html_pages"]) == (1, 1, 1)
        assert (counts["no_alt"], counts["empty_alt"], counts["not_http"]) == (1, 1, 1)
        assert counts["duplicate_in_page"] == 1
    # the WARC's warcinfo and request, and in the WAT their metadata and its own warcinfo
    assert (warc_counts["not_response"], wat_counts["not_response"]) == (2, 3)


def test_a_wat_page_that_opted_out(tmp_path):
    html = b'<head><meta name="robots" content="noimageai"></head><img src="a.jpg" alt="a">'
    warc = write_archive(tmp_path / "c.warc.gz", [response("http://a.example/", html)])
    rows, counts = harvest(write_wat(warc, tmp_path / "c.wat.gz"))
    assert rows == [] and counts["opted_out"] == 1


def test_x_robots_tag_in_the_archived_response(tmp_path):
    record = response(
        "http://a.example/", b'<img src="a.jpg" alt="a">', headers=[("X-Robots-Tag", "noai")]
    )
    rows, counts = harvest(write_archive(tmp_path / "c.warc", [record], None))
    assert rows == [] and counts["opted_out"] == 1


def test_chunked_and_gzipped_bodies_are_decoded(tmp_path):
    body = gzip.compress(b'<img src="a.jpg" alt="zipped">')
    chunked = (
        b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:10], body[10:]))
        + b"0\r\n\r\n"
    )
    headers = [("Content-Encoding", "gzip"), ("Transfer-Encoding", "chunked")]
    record = response("http://a.example/", chunked, headers=headers)
    rows, _ = harvest(write_archive(tmp_path / "c.warc.gz", [record]))
    assert pairs(rows) == [("zipped", "http://a.example/a.jpg", "http://a.example/")]


def test_a_corrupt_gzip_member_is_counted_and_read_past(tmp_path):
    members = [gzip.compress(r) for r in PAGES]
    broken = members[1][:20] + b"\x00" * 40 + members[1][60:]
    path = tmp_path / "c.warc.gz"
    path.write_bytes(members[0] + broken + members[2] + members[3])
    rows, counts = harvest(path)
    assert pairs(rows) == [EXPECTED[0], EXPECTED[2], EXPECTED[3]]
    assert counts["unreadable_record"] == 1 and counts["records"] == 4


def test_garbage_in_a_plain_warc_is_counted_and_read_past(tmp_path):
    path = tmp_path / "c.warc"
    path.write_bytes(PAGES[0] + PAGES[1][:70] + b"\x00garbage\r\n" * 5 + PAGES[2] + PAGES[3])
    rows, counts = harvest(path)
    assert counts["unreadable_record"] >= 1
    assert pairs(rows)[0] == EXPECTED[0] and pairs(rows)[-1] == EXPECTED[3]


@pytest.mark.parametrize("gzipped", [None, "record"])
def test_a_truncated_last_record_is_counted(tmp_path, gzipped):
    whole = write_archive(tmp_path / "whole", PAGES, gzipped).read_bytes()
    path = tmp_path / "cut.warc"
    path.write_bytes(whole[:-60])
    rows, counts = harvest(path)
    assert pairs(rows) == EXPECTED[:3]
    assert counts["unreadable_record"] == 1 and counts["records"] == 4


def test_an_unparsable_http_response_and_wat_json_are_unreadable(tmp_path):
    bad_http = warc_record(
        WarcRecordType.response, "http://a.example/", b"NOT HTTP AT ALL\r\n\r\n", "application/http; msgtype=response"
    )  # fmt: skip
    bad_json = warc_record(
        WarcRecordType.metadata, "http://a.example/", b"{not json", "application/json"
    )
    rows, counts = harvest(write_archive(tmp_path / "c.warc.gz", [bad_http, bad_json, PAGES[0]]))
    assert pairs(rows) == EXPECTED[:1] and counts["unreadable_record"] == 2


def test_non_html_and_non_2xx_are_counted(tmp_path):
    records = [
        response("http://a.example/a.jpg", b"\xff\xd8\xff", content_type="image/jpeg"),
        response("http://a.example/r", b"", status="301 Moved Permanently"),
        response("http://a.example/e", b"<img src=a.jpg alt=a>", status="500 Oops"),
        response("http://a.example/sniffed", b"<!DOCTYPE html><img src=a.jpg alt=sniffed>", content_type=None),
    ]  # fmt: skip
    rows, counts = harvest(write_archive(tmp_path / "c.warc.gz", records))
    assert counts["not_html"] == 1 and counts["not_2xx"] == 2
    assert pairs(rows) == [("sniffed", "http://a.example/a.jpg", "http://a.example/sniffed")]


def test_a_record_past_max_record_bytes_is_read_in_part(tmp_path):
    html = b'<img src="first.jpg" alt="first">' + b"<p>filler</p>" * 1000
    html += b'<img src="late.jpg" alt="late">'
    path = write_archive(tmp_path / "c.warc.gz", [response("http://a.example/", html)])
    rows, counts = harvest(path, HarvestRules(max_record_bytes=4096))
    assert [r["alt_text"] for r in rows] == ["first"] and counts["unreadable_record"] == 0


def test_the_funnel_adds_up_or_says_so():
    counts = Counter(files=1, records=3, html_pages=2, not_html=1, images_seen=2, candidates=1)
    with pytest.raises(AccountingError, match="images"):
        harvest_stats.build(counts)
    counts["no_alt"] = 1
    stats = harvest_stats.build(counts)
    assert stats["images"] == {"seen": 2, "harvested": 1, "not_harvested": {"no_alt": 1}}
    assert harvest_stats.metrics(stats)["images.not_harvested.no_alt"] == 1
    assert "candidates harvested" in harvest_stats.render(stats)
    assert json.loads(json.dumps(stats)) == stats


# --- No record ends a harvest (issue 57, 2) -----------------------------------------------


@pytest.mark.parametrize("gzipped", [None, "record"])
def test_a_record_claiming_a_huge_content_length_hides_no_record(tmp_path, gzipped):
    liar = claiming(page(9), 1 << 40)  # a terabyte: the whole file, were it believed
    path = write_archive(tmp_path / "c.warc.gz", [PAGES[0], liar, *PAGES[1:]], gzipped)
    rows, counts = harvest(path)
    assert pairs(rows) == EXPECTED
    assert counts["unreadable_record"] == 1 and counts["records"] == 5


@pytest.mark.parametrize("before", [b"", b"junk"])
def test_fake_gzip_headers_do_not_stop_the_resync(tmp_path, before):
    """Gzip headers that begin no member (5,000 of them), right after a record or after
    junk: fastwarc takes one for a member whose fields run on to the file's end, and may
    end there as at the file's end, or fail; either way the next member is found."""
    members = [gzip.compress(r, mtime=1764626000) for r in PAGES[:2]]  # a fixed header
    path = tmp_path / "c.warc.gz"
    path.write_bytes(members[0] + before + b"\x1f\x8b\x08" * 5000 + members[1])
    rows, counts = harvest(path)
    assert pairs(rows) == EXPECTED[:2]
    assert counts["unreadable_record"] == 1 and counts["records"] == 3


def test_lone_surrogates_and_deep_json_in_a_wat_are_unreadable_records(tmp_path):
    """JSON can write a lone surrogate, which no UTF-8 holds (the candidates' Parquet and
    every URL are UTF-8), and nest deeper than any parser recurses: each its record's
    unreadable_record, not an error that ends the file (or the job)."""
    hostile = [
        wat_page("http://a.example/alt", "x\ud800y"),
        wat_page("http://a.example/\udc00", "a fine alt"),
        wat_page("http://a.example/url", "a fine alt", "a\ud800.jpg"),
        warc_record(WarcRecordType.metadata, "http://a.example/", b"[" * 100_000, "application/json"),
    ]  # fmt: skip
    good = wat_page("http://a.example/good", "the good one")
    rows, counts = harvest(write_archive(tmp_path / "c.wat.gz", [*hostile, good]))
    assert pairs(rows) == [("the good one", "http://a.example/a.jpg", "http://a.example/good")]
    assert counts["unreadable_record"] == len(hostile) and counts["internal_error"] == 0
