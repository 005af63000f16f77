"""Reading candidates on a local Ray: rows that once ended the whole job (a lone surrogate,
a 5,000-digit number, deep nesting, a stray CSV quote) are rejections, and a gzipped file
counts the records it holds, not the lines of its compressed bytes; and harvesting web
archives, whose hostile records are counted while the good ones come out."""

from __future__ import annotations

import gzip
import json
from collections import Counter

import pyarrow.parquet as pq
import pytest

from conceptual.pipelines.dataflow.readers import read_candidates

pytestmark = pytest.mark.integration


def test_every_hostile_row_is_a_rejection_and_the_read_completes(ray_local, tmp_path):
    good = [{"alt_text": f"A dog {i}", "image_url": f"http://x.test/{i}.jpg"} for i in range(2000)]
    (tmp_path / "good.jsonl.gz").write_bytes(
        gzip.compress("".join(json.dumps(r) + "\n" for r in good).encode())
    )
    (tmp_path / "bad.jsonl").write_bytes(
        b'{"alt_text": "A dog \\ud83d", "image_url": "http://x.test/1.jpg"}\n'
        + b'{"alt_text": '
        + b"1" * 5_000
        + b"}\n"
        + b"[" * 100_000
        + b"\n"
    )
    (tmp_path / "bad.csv").write_bytes(
        b'alt_text,image_url\n"A cat,http://x.test/c.jpg\nA cow,http://x.test/d.jpg\n'
    )

    rows = read_candidates(str(tmp_path), "auto", range_bytes=1000).take_all()

    reasons = Counter(row["reason"] for row in rows)
    assert reasons == {None: 2001, "invalid_utf8": 1, "invalid_json": 2, "malformed_row": 1}


def test_no_record_ends_a_harvest(ray_local, tmp_path):
    """Web archives holding what once ended a harvest or hid what follows (issue 57, 2),
    each beside good records, in one folder with good files: every good candidate comes
    out, each hostile record is counted, and the harvest writes its stats and `_SUCCESS`."""
    from fastwarc.warc import WarcRecordType
    from web_archives import claiming, quadratic, response, warc_record, wat_page, write_archive

    from conceptual.pipelines.curation.harvest import HarvestConfig, harvest

    def good(name: str) -> bytes:
        return response(f"http://a.example/{name}", f'<img src="{name}.jpg" alt="{name}">'.encode())

    crawl = tmp_path / "crawl"
    crawl.mkdir()
    write_archive(crawl / "good.warc.gz", [good("g1"), good("g2")])
    write_archive(crawl / "liar.warc.gz", [good("l1"), claiming(good("x"), 1 << 40), good("l2")])
    write_archive(crawl / "liar.warc", [good("p1"), claiming(good("x"), 1 << 40), good("p2")], None)
    fake = b"\x1f\x8b\x08" * 5000  # gzip headers beginning no member
    (crawl / "fake.warc.gz").write_bytes(
        gzip.compress(good("f1")) + fake + gzip.compress(good("f2"))
    )
    hostile_wat = [
        wat_page("http://a.example/alt", "x\ud800y"),  # a lone surrogate, as JSON writes one
        wat_page("http://a.example/\ud800", "in the URI"),
        warc_record(
            WarcRecordType.metadata, "http://a.example/", b"[" * 100_000, "application/json"
        ),
        wat_page("http://a.example/w1", "w1"),
    ]
    write_archive(crawl / "hostile.wat.gz", hostile_wat)
    write_archive(
        crawl / "complex.warc.gz", [response("http://a.example/q", quadratic(3000)), good("c1")]
    )

    output = tmp_path / "out"
    stats = harvest([str(crawl)], str(output), HarvestConfig())

    candidates = pq.read_table(output / "candidates").column("alt_text").to_pylist()
    assert sorted(candidates) == ["c1", "f1", "f2", "g1", "g2", "l1", "l2", "p1", "p2", "w1"]
    assert (output / "_SUCCESS").exists() and json.loads((output / "stats.json").read_text())
    skipped = stats["records"]["skipped"]
    assert skipped == {"unreadable_record": 6, "page_too_complex": 1}, skipped
    assert stats["files"]["read"] == 6 and not stats["files"]["unreadable"]
