"""A page costs at most its budget (issue 57, 1): pages built to grow the HTML5 parser's
tree (the formatting elements each paragraph re-opens, nesting over several MiB, 500,000
images) are counted as page_too_complex and the file goes on, within 300 MB of the
worker's rest; a page's images and metas are read in one pass. No Ray."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from web_archives import quadratic, response, write_archive  # tests/web_archives.py

from conceptual.harvest.budget import PageParser, PageTooComplex, page_from_html

MiB = 1 << 20


def captioned(n: int) -> bytes:
    """n images with alt-texts and n `<meta name>`: linear to read, quadratic to index."""
    metas = '<meta name="keywords" content="k">' * n
    images = "".join(f'<img src="/{i}.jpg" alt="photo {i}">' for i in range(n))
    return f"<html><head>{metas}</head><body>{images}</body></html>".encode()


HOSTILE = {
    "quadratic": quadratic(3000),  # 56 KB of HTML; 3.6 GB in a harvest worker before
    "a_p": b"<a><p>" * (6 * MiB // 6),
    "b_i": b"<b><i>" * (6 * MiB // 6),
    "div": b"<div>" * (6 * MiB // 5),
    "img": b"<img>" * 500_000,
}

# The harvest of one archive in a fresh process, its memory measured there: the peak above
# what it held once imported, and the peak of the parser's process (reaped at the end).
# Its address space is capped at 4 GiB, so that a parse without a budget fails the test
# rather than the machine.
MEASURE = """
import json, resource, sys, time
from collections import Counter
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
from conceptual.harvest import HarvestRules, harvest_archive, budget
path = sys.argv[1]
def open_at(offset):
    stream = open(path, "rb")
    stream.seek(offset)
    return stream
counts = Counter()
rest = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.monotonic()
rows = list(harvest_archive(open_at, path, HarvestRules(), counts))
seconds = time.monotonic() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
budget.PARSER.close()
parser = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"counts": counts, "rows": len(rows), "last": rows[-1]["alt_text"],
                  "above_rest_mb": (peak - rest + parser) / 1024, "seconds": seconds}))
"""


def test_hostile_pages_are_too_complex_within_300_mb_and_the_file_goes_on(tmp_path):
    pages = [response(f"http://a.example/{name}", body) for name, body in HOSTILE.items()]
    pages += [
        response("http://a.example/captioned", captioned(20_000)),
        response("http://a.example/good", b'<img src="good.jpg" alt="the last page">'),
    ]
    path = write_archive(tmp_path / "hostile.warc.gz", pages)
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(path)],
        capture_output=True,
        text=True,
        timeout=300,  # seconds, on a busy machine; without the budget, hours
    )
    assert done.returncode == 0, done.stderr[-3000:]
    measured = json.loads(done.stdout)
    counts = measured["counts"]
    assert counts["page_too_complex"] == len(HOSTILE) and "internal_error" not in counts
    assert counts["html_pages"] == 2 and measured["rows"] == 20_001
    assert measured["last"] == "the last page"
    assert measured["above_rest_mb"] < 300, measured
    print(measured)  # the figures, with -s


def test_a_page_past_the_budget_is_refused_and_the_next_one_parsed():
    with pytest.raises(PageTooComplex):
        page_from_html(quadratic(3000), "http://a.example/")
    page = page_from_html(b'<img src="a.jpg" alt="next">', "http://a.example/")
    assert [(i.alt, i.url) for i in page.images] == [("next", "a.jpg")]


def test_a_page_past_the_deadline_is_refused():
    parser = PageParser(seconds=0.001)
    with pytest.raises(PageTooComplex, match="not parsed within"):
        parser.parse(b"<p>text</p>" * 50_000)
    parser.seconds = 30
    assert parser.parse(b'<img src="a.jpg" alt="a">')[0] == [("a", "a.jpg")]
    parser.close()


def test_every_html_parse_is_under_the_budget(repo):
    """The same budget wherever HTML is parsed: the parser is imported by html.py alone, and
    html.read_page is called only in the parser's process (html.serve)."""
    parsing = {}
    for folder in ("platform", "pipelines", "jobs", "serve"):
        for path in (repo / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            if "resiliparse.parse.html" in text or "read_page(" in text:
                parsing[path.relative_to(repo).as_posix()] = text.count("read_page(")
    # read_page's definition and its one call, in serve
    assert parsing == {"platform/conceptual/harvest/html.py": 2}


def test_a_parser_that_cannot_start_is_an_error_not_a_complex_page(monkeypatch):
    """No page's doing: the harvest counts it as internal_error, with its traceback."""
    monkeypatch.setattr(sys, "executable", "/bin/false")
    with pytest.raises(RuntimeError, match="did not start"):
        PageParser().parse(b'<img src="a.jpg" alt="a">')
