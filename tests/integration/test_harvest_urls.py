"""The web-platform-tests' URL cases as a crawl (issue 60, 1): a WARC whose pages hold every
case's input as an `<img src>`, each page at its case's base URL (a case without one at
about:blank, which no relative URL resolves against), and its WAT, harvested end to end by
`conceptual.jobs.harvest`: each candidate's URL is the URL Standard's href without its
fragment, and a case the platform refuses (a failure, not http(s), credentials) is no
candidate, from the WARC and from its WAT alike.

Left out, as a browser leaves them: an input that is empty once the HTML standard strips
its whitespace (an `<img src="">` fetches nothing), one with U+0000 (HTML reads it as
U+FFFD) or a lone surrogate (no UTF-8 page holds one), and a base that no WARC header can
carry (whitespace, non-ASCII)."""

from __future__ import annotations

import html
import json
from collections import defaultdict
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from web_archives import response, warcinfo, write_archive, write_wat  # tests/web_archives.py

pytestmark = pytest.mark.integration

WPT = Path(__file__).resolve().parents[1] / "data" / "wpt" / "urltestdata.json"
ASCII_WHITESPACE = " \t\n\f\r"


def expected(case: dict) -> str | None:
    if case.get("failure") or case["protocol"] not in ("http:", "https:"):
        return None
    if case["username"] or case["password"]:
        return None
    return case["href"].split("#", 1)[0]


def in_a_page(case: dict) -> bool:
    text, base = case["input"], case.get("base") or "about:blank"
    try:
        text.encode()
    except UnicodeEncodeError:
        return False  # a lone surrogate
    return (
        bool(text.strip(ASCII_WHITESPACE))
        and "\x00" not in text
        and base.isascii()
        and not any(c.isspace() for c in base)
    )


def test_wpt_inputs_as_img_src_harvest_to_the_standards_urls(ray_local, tmp_path):
    from conceptual.jobs import harvest

    cases = [c for c in json.loads(WPT.read_text(encoding="utf-8")) if isinstance(c, dict)]
    chosen = {f"case {n}": case for n, case in enumerate(cases) if in_a_page(case)}
    pages: dict[str, list[str]] = defaultdict(list)
    for alt, case in chosen.items():
        src = html.escape(case["input"], quote=True)
        pages[case.get("base") or "about:blank"].append(f'<img src="{src}" alt="{alt}">')
    records = [warcinfo()] + [
        response(base, f"<!DOCTYPE html><meta charset=utf-8><body>{''.join(imgs)}".encode())
        for base, imgs in pages.items()
    ]
    (tmp_path / "crawl").mkdir()
    warc = write_archive(tmp_path / "crawl" / "wpt.warc.gz", records)
    write_wat(warc, tmp_path / "crawl" / "wpt.wat.gz")

    code = harvest.main(["--input", str(tmp_path / "crawl"), "--output", str(tmp_path / "out")])
    assert code == 0
    rows = [r for p in sorted((tmp_path / "out" / "candidates").rglob("*.parquet")) for r in pq.read_table(p).to_pylist()]  # fmt: skip
    want = {alt: url for alt, case in chosen.items() if (url := expected(case)) is not None}
    assert len(chosen) > 700 and len(want) > 150
    for kind in ("warc", "wat"):
        got = {r["alt_text"]: r["image_url"] for r in rows if r["source"].endswith(f".{kind}.gz")}
        wrong = {alt: (chosen[alt]["input"], got.get(alt), want.get(alt)) for alt in chosen.keys() if got.get(alt) != want.get(alt)}  # fmt: skip
        assert not wrong, f"{kind}: {len(wrong)} of {len(chosen)} cases differ: {list(wrong.values())[:5]}"  # fmt: skip
        assert all(r["page_url"] == (chosen[r["alt_text"]].get("base") or "about:blank") for r in rows)  # fmt: skip
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert stats["images"]["harvested"] == 2 * len(want)
