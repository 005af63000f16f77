"""Harvest speed (issue 47, 4; issue 60, 2): pages/s per core on WAT and on WARC against
cc2dataset's extraction, run side by side on the same WAT, and peak memory against file size.

    .venv/bin/pytest -m benchmark tests/benchmarks/test_harvest_speed.py -s

A generated crawl (HARVEST_BENCH_PAGES pages, default 150,000, in the WAT; the first
HARVEST_BENCH_WARC_PAGES, default 30,000, in the WARC too, whose HTML costs five times as
much a page) of realistic size: each page tens of KB of HTML (a style sheet, scripts, a
navigation of 80 links, paragraphs of real captions from ../shared/data) with 7 to 9
`<img>`: captioned ones with relative, root-relative, protocol-relative and absolute URLs,
an icon without alt, a spacer with an empty alt, sometimes one twice. Written as a WARC
(gzip per record, as Common Crawl ships them) and as its WAT, whose link lists the generator
writes from what it put in each page. The defaults make one harvest of the WAT, and of the
WARC, 10 CPU-seconds or more.

Each measure runs in a process of its own on one core (harvest_archive, no Ray: the per-core
rate, what a Ray task per file does), timed in CPU-seconds of that process, so that other
work on the machine changes it little; its start-up (the interpreter and its imports) is
measured apart. The baseline, cc2dataset's `process_wat`, runs in a virtual environment of
its own made at benchmark time (<state>/benchmarks/harvest-baseline; never a project
dependency); if cc2dataset does not install, warcio + BeautifulSoup over the WARC stand in,
and the result says so. The two run in pairs, interleaved (ours, theirs, ours, theirs:
HARVEST_BENCH_PAIRS pairs, default 3, each with a harvest of the WARC after it), so that
what the machine does at one moment weighs on both: the result is each pair's ratio of
pages per CPU-second, min / median / max, the median as `speedup_pages_per_s`. Those runs
consume the tool's rows and write nothing (its own rate); each pair is run again with the
rows written out as JSON lines for the comparison, and those ratios are reported beside
(`with_pairs_written`: the harness's encoding, the same for both, in each). Both outputs
are compared as sets of (alt-text, image URL, page URL): the pairs they differ in are
counted, each explained (a URL the URL Standard writes otherwise than urllib, an alt-text
whose whitespace the harvest collapses, a URL that is none by the standard) or failing the
test; the WARC and its WAT must give the same set. Peak memory: a file of 1/8 of the WARC's
pages against the whole, for each format.
"""

from __future__ import annotations

import csv
import gzip
import html
import json
import os
import random
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))  # tests/web_archives.py, also from the worker process

PAGES = int(os.environ.get("HARVEST_BENCH_PAGES", "150000"))
WARC_PAGES = min(PAGES, int(os.environ.get("HARVEST_BENCH_WARC_PAGES", "30000")))
PAIRS = int(os.environ.get("HARVEST_BENCH_PAIRS", "3"))
# A folder holding an earlier run's generated files (HARVEST_BENCH_CRAWL=DIR): reused as they
# are (the page counts must be the ones they were written with), else written there.
CRAWL = os.environ.get("HARVEST_BENCH_CRAWL")
NAMES = ("wat", "warc", "warc_wat", "small_warc", "small_wat")
SMALL_SHARE = 8  # the small files hold 1/8 of the WARC's pages: peak memory against file size
# One monthly Common Crawl: about 90,000 WAT files of ~2.7 billion pages, ~30,000 a file.
CC_MONTH_PAGES = 90_000 * 30_000
WORKER = Path(__file__).with_name("harvest_workers.py")  # stdlib imports only: any venv runs it
CSS = "".join(f".c{i} {{ margin: {i % 7}px; color: #{i * 4099 % 0xFFFFFF:06x}; }}\n" for i in range(120))  # fmt: skip
SCRIPT = (
    "window.dataLayer = window.dataLayer || [];\n"
    'function lazy(e) { e.innerHTML = \'<img src="/track.gif" alt="tracking pixel">\'; }\n'
) * 20


def captions(real_data: Path) -> list[str]:
    """Real captions: the released Conceptual Captions validation alt-texts and Flickr8k's."""
    texts = []
    with open(real_data / "cc_val_captions.tsv", encoding="utf-8") as f:
        texts += [line.split("\t")[0] for line in f if line.strip()]
    with open(real_data / "flickr8k_mini" / "captions.csv", encoding="utf-8") as f:
        texts += [row["caption"] for row in csv.DictReader(f)]
    return [" ".join(t.replace(" .", "").split()) for t in texts if t.strip()]


def page(i: int, texts: list[str], with_html: bool = True) -> tuple[str, bytes, list[dict]]:
    """(URL, HTML, the WAT's IMG links) of page i, each drawn from a generator of its own (so
    a page is the same whether its HTML is written or not: b"" when not)."""
    rng = random.Random(i)
    host = f"site{i % 997}.example"
    url = f"http://{host}/articles/{i}.html"
    links, parts = [], []
    sources = [
        lambda k: f"img/{k}.jpg",
        lambda k: f"/media/{k}.jpg",
        lambda k: f"//cdn{k % 5}.example/{k}.jpg",
        lambda k: f"https://static.example/{host}/{k}.jpg",
    ]
    for n in range(rng.randint(5, 6)):
        alt, src = rng.choice(texts), sources[n % 4](i * 10 + n)
        links.append({"path": "IMG@/src", "url": src, "alt": alt})
    if rng.random() < 0.3:
        links.append(dict(links[0]))  # the same image twice
    links.append({"path": "IMG@/src", "url": "/icons/rss.png"})  # no alt
    links.append({"path": "IMG@/src", "url": "/spacer.gif", "alt": ""})
    if not with_html:
        return url, b"", links
    nav = "".join(f'<li><a href="/section/{k}.html">{rng.choice(texts)[:30]}</a></li>' for k in range(80))  # fmt: skip
    for image in links:
        paragraph = " ".join(rng.choice(texts) for _ in range(30))
        alt = f' alt="{html.escape(image["alt"])}"' if "alt" in image else ""
        parts.append(f'<p class="c{rng.randint(0, 119)}">{html.escape(paragraph)}</p>')
        parts.append(f'<figure><img src="{image["url"]}"{alt} width="640"></figure>')
    body = (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{rng.choice(texts)}'
        f"</title><style>{CSS}</style><script>{SCRIPT}</script></head><body><nav><ul>{nav}</ul>"
        f"</nav><article>{''.join(parts)}</article><footer>{'&copy; 2026 ' * 20}</footer>"
        "</body></html>"
    )
    return url, body.encode(), links


def write_crawl(directory: Path, pages: int, warc_pages: int, texts: list[str]) -> dict[str, Path]:
    """wat.gz of `pages` pages; warc.gz of the first `warc_pages` and warc_wat.gz, their
    WAT; small_warc.gz and small_wat.gz of the first 1/8 of those. As Common Crawl's, each
    page is a request, a response and a metadata record in the WARC, and in the WAT a JSON
    record describing each of the three."""
    from web_archives import request, response, warcinfo, wat_document, wat_record

    paths = {k: directory / f"{k}.gz" for k in NAMES}
    files = {k: open(p, "wb") for k, p in paths.items()}
    status = {"Version": "HTTP/1.1", "Status": "200", "Reason": "OK"}
    answer = {"Response-Message": status, "Headers": {"Content-Type": "text/html; charset=utf-8"}}
    fetch = {"fetchTimeMs": "412", "charset-detected": "UTF-8", "languages-cld2": '{"reliable":true}'}  # fmt: skip
    try:
        for name in files:
            files[name].write(gzip.compress(warcinfo(), 1))
        for i in range(pages):
            url, body, links = page(i, texts, with_html=i < warc_pages)
            html = {"Head": {"Title": "", "Metas": []}, "Links": links}
            described = [
                wat_document({"WARC-Type": "request", "WARC-Target-URI": url}, "crawl.warc.gz", 0, request=True),
                wat_document({"WARC-Type": "response", "WARC-Target-URI": url}, "crawl.warc.gz", 0, answer, html),
                wat_document({"WARC-Type": "metadata", "WARC-Target-URI": url, **fetch}, "crawl.warc.gz", 0),
            ]  # fmt: skip
            wat = b"".join(gzip.compress(wat_record(url, d), 1) for d in described)
            files["wat"].write(wat)
            if i < warc_pages:
                warc = gzip.compress(request(url), 1) + gzip.compress(response(url, body), 1)
                files["warc"].write(warc)
                files["warc_wat"].write(wat)
            if i < warc_pages // SMALL_SHARE:
                files["small_warc"].write(warc)
                files["small_wat"].write(wat)
    finally:
        for f in files.values():
            f.close()
    return paths


def run_worker(python: str, *args: str, env: dict | None = None) -> dict:
    result = subprocess.run(
        [python, str(WORKER), *args], capture_output=True, text=True, timeout=3600, env=env
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def baseline_python(state: Path) -> tuple[str, str]:
    """(python, which baseline) of the baseline's own virtual environment, made once."""
    venv = state / "benchmarks" / "harvest-baseline"
    python = str(venv / "bin" / "python")
    if not Path(python).exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    for packages, name in ((["cc2dataset"], "cc2dataset"), (["warcio", "beautifulsoup4"], "warcio+bs4")):  # fmt: skip
        check = "import cc2dataset.main" if name == "cc2dataset" else "import warcio, bs4"
        if subprocess.run([python, "-c", check], capture_output=True).returncode == 0:
            return python, name
        subprocess.run([python, "-m", "pip", "install", "-q", *packages], capture_output=True)
        if subprocess.run([python, "-c", check], capture_output=True).returncode == 0:
            return python, name
    pytest.skip("neither cc2dataset nor warcio + BeautifulSoup installs here")


def read_pairs(path: Path) -> set[tuple]:
    with open(path) as lines:
        return {tuple(json.loads(line)) for line in lines}


def differences(ours: set[tuple], theirs: set[tuple]) -> dict:
    """The pairs the two outputs differ in, each explained: the baseline's pair written as the
    harvest writes it (alt-text whitespace collapsed, the URL by the URL Standard) is one of
    ours, or its URL is none by the standard (the harvest's not_http); `unexplained`, the
    rest, with a few of each."""
    from conceptual.harvest.pages import collapse
    from conceptual.weburl import web_url

    only_ours, only_theirs = ours - theirs, theirs - ours
    written = {}
    for alt, url, page_url in only_theirs:
        written[(alt, url, page_url)] = (collapse(alt), web_url(url) or url, page_url)
    rewritten = {p for p, w in written.items() if w in ours and w != p}
    refused = {p for p in only_theirs if web_url(p[1]) is None}
    unexplained = (only_theirs - rewritten - refused) | (only_ours - set(written.values()))
    return {
        "pairs_only_ours": len(only_ours),
        "pairs_only_baseline": len(only_theirs),
        "baseline_pairs_written_otherwise": len(rewritten),
        "baseline_pairs_not_web_urls": len(refused),
        "unexplained": len(unexplained),
        "examples": {
            "written_otherwise": [[*p, written[p][1]] for p in sorted(rewritten)[:5]],
            "not_web_urls": sorted(refused)[:5],
            "unexplained": sorted(unexplained)[:5],
        },
    }


def load_average() -> str:
    """/proc/loadavg's 1, 5 and 15-minute load averages."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def spread(values: list[float]) -> dict:
    return {"min": min(values), "median": round(statistics.median(values), 2), "max": max(values)}


@pytest.mark.timeout(7200)  # about 30 minutes on 2 busy cores, 4 of them writing the crawl
def test_harvest_speed_against_cc2dataset(real_data, tmp_path, record):
    from conceptual.paths import state_dir

    directory = Path(CRAWL) if CRAWL else tmp_path
    crawl = {k: directory / f"{k}.gz" for k in NAMES}
    if not all(path.exists() for path in crawl.values()):
        directory.mkdir(parents=True, exist_ok=True)
        crawl = write_crawl(directory, PAGES, WARC_PAGES, captions(real_data))
    sizes = {k: round(p.stat().st_size / 2**20, 1) for k, p in crawl.items()}
    python, baseline = baseline_python(state_dir())
    kind = "wat" if baseline == "cc2dataset" else "warc"

    def rate(run: dict, pages: int) -> float:  # per CPU-second: a core's rate
        return round(pages / run["cpu_seconds"], 1)

    load = [load_average()]  # the machine's load beside the figures (others' work on it)
    ours, theirs, ours_writing, theirs_writing, warc = [], [], [], [], []
    for _ in range(PAIRS):  # interleaved: ours, theirs, ours, theirs (and the WARC after each)
        ours.append(run_worker(sys.executable, "harvest", str(crawl[kind]), "-"))
        theirs.append(run_worker(python, baseline, str(crawl[kind]), "-"))
        ours_writing.append(run_worker(sys.executable, "harvest", str(crawl[kind]), str(tmp_path / "ours.pairs")))  # fmt: skip
        theirs_writing.append(run_worker(python, baseline, str(crawl[kind]), str(tmp_path / "baseline.pairs")))  # fmt: skip
        if kind == "wat":
            warc.append(run_worker(sys.executable, "harvest", str(crawl["warc"]), str(tmp_path / "warc.pairs")))  # fmt: skip
    load.append(load_average())
    pages = ours[0]["pages"]  # the same file: cc2dataset does not count pages

    def ratios_of(a: list[dict], b: list[dict]) -> list[float]:
        return [round(rate(x, pages) / rate(y, pages), 2) for x, y in zip(a, b)]

    ratios, ratios_writing = ratios_of(ours, theirs), ratios_of(ours_writing, theirs_writing)
    once = {k: run_worker(sys.executable, "harvest", str(crawl[k]), str(tmp_path / f"{k}.pairs")) for k in ("warc_wat", "small_warc", "small_wat")}  # fmt: skip
    if kind == "warc":
        warc = ours
    warc_rates = [rate(run, WARC_PAGES) for run in warc]
    wat_rate = round(statistics.median(rate(run, pages) for run in ours), 1)
    warc_pairs = tmp_path / ("warc.pairs" if kind == "wat" else "ours.pairs")
    same_warc_wat = read_pairs(warc_pairs) == read_pairs(tmp_path / "warc_wat.pairs")
    differ = differences(read_pairs(tmp_path / "ours.pairs"), read_pairs(tmp_path / "baseline.pairs"))  # fmt: skip
    results = {
        "pages": PAGES,
        "warc_pages": WARC_PAGES,
        "command": f"HARVEST_BENCH_PAGES={PAGES} HARVEST_BENCH_WARC_PAGES={WARC_PAGES} HARVEST_BENCH_PAIRS={PAIRS} .venv/bin/pytest -m benchmark tests/benchmarks/test_harvest_speed.py -s",  # fmt: skip
        "file_mb": sizes,
        "load_average_start_end": load,
        "baseline": baseline,
        "paired_runs": {
            "file": kind,
            "ours_pages_per_s": [rate(run, pages) for run in ours],
            "baseline_pages_per_s": [rate(run, pages) for run in theirs],
            "ours_cpu_seconds": [run["cpu_seconds"] for run in ours],
            "baseline_cpu_seconds": [run["cpu_seconds"] for run in theirs],
            "ratios": ratios,
            "ratio": spread(ratios),
            "ours_candidates": ours[0]["candidates"],
            "baseline_candidates": theirs[0]["candidates"],
            # the same pairs, each run writing its pairs out as JSON lines (what the
            # comparison below reads), the harness's encoding counted in both
            "with_pairs_written": {
                "ours_pages_per_s": [rate(run, pages) for run in ours_writing],
                "baseline_pages_per_s": [rate(run, pages) for run in theirs_writing],
                "ratios": ratios_writing,
                "ratio": spread(ratios_writing),
            },
        },
        "speedup_pages_per_s": round(statistics.median(ratios), 2),
        "startup_cpu_seconds": {
            "ours": round(statistics.median(run["startup_cpu_seconds"] for run in ours), 2),
            "baseline": round(statistics.median(run["startup_cpu_seconds"] for run in theirs), 2),
        },
        "pages_per_s": {"wat": wat_rate, "warc": spread(warc_rates)},
        "peak_mb": {
            "wat": [once["small_wat"]["peak_mb"], ours[0]["peak_mb"]],
            "warc": [once["small_warc"]["peak_mb"], warc[0]["peak_mb"]],
            "baseline": theirs[0]["peak_mb"],
        },
        "pairs_differ": differ,
        "same_pairs_warc_and_wat": same_warc_wat,
        # One monthly Common Crawl (CC_MONTH_PAGES), at the median rates measured here.
        "cc_month_core_hours": {
            "wat": round(CC_MONTH_PAGES / wat_rate / 3600, 1),
            "warc": round(CC_MONTH_PAGES / statistics.median(warc_rates) / 3600, 1),
        },
    }
    record("harvest_speed", results)
    assert same_warc_wat, "the WARC and its WAT gave different pairs"
    assert not differ["unexplained"], f"{baseline} gave pairs that differ unexplained: {differ}"
