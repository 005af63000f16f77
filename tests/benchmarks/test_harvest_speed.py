"""Harvest speed (issue 47, 4): pages/s and candidates/s per core on WARC and on WAT, peak
memory against file size, and cc2dataset's extraction side by side on the same WAT.

    HARVEST_BENCH_PAGES=50000 .venv/bin/pytest -m benchmark tests/benchmarks/test_harvest_speed.py -s

A generated crawl of HARVEST_BENCH_PAGES pages (default 50,000) of realistic size: each page
tens of KB of HTML (a style sheet, scripts, a navigation of 80 links, paragraphs of real
captions from ../shared/data) with 7 to 9 `<img>`: captioned ones with relative,
root-relative, protocol-relative and absolute URLs, an icon without alt, a spacer with an
empty alt, sometimes one twice. Written as a WARC (gzip per record, as Common Crawl ships
them) and as its WAT, whose link lists the generator writes from what it put in each page.

Each measure runs in a process of its own on one core (harvest_archive, no Ray: the per-core
rate, what a Ray task per file does), and reports its peak resident memory (VmHWM). The
baseline, cc2dataset's `process_wat`, runs in a virtual environment of its own made at
benchmark time (<state>/benchmarks/harvest-baseline; never a project dependency); if
cc2dataset does not install, warcio + BeautifulSoup over the WARC stand in, and the result
says so. Both outputs are compared as sets of (alt-text, image URL, page URL).
"""

from __future__ import annotations

import csv
import gzip
import html
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))  # tests/web_archives.py, also from the worker process

PAGES = int(os.environ.get("HARVEST_BENCH_PAGES", "50000"))
SMALL_SHARE = 8  # the small file holds 1/8 of the pages: peak memory against file size
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


def page(i: int, rng: random.Random, texts: list[str]) -> tuple[str, bytes, list[dict]]:
    """(URL, HTML, the WAT's IMG links) of page i."""
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


def write_crawl(directory: Path, pages: int, texts: list[str]) -> dict[str, Path]:
    """crawl.warc.gz and crawl.wat.gz of `pages` pages, and small.* of the first 1/8. As
    Common Crawl's, each page is a request, a response and a metadata record in the WARC,
    and in the WAT a JSON record describing each of the three."""
    from web_archives import request, response, warcinfo, wat_document, wat_record

    paths = {k: directory / f"{k}.gz" for k in ("warc", "wat", "small_warc", "small_wat")}
    files = {k: open(p, "wb") for k, p in paths.items()}
    rng = random.Random(47)
    status = {"Version": "HTTP/1.1", "Status": "200", "Reason": "OK"}
    answer = {"Response-Message": status, "Headers": {"Content-Type": "text/html; charset=utf-8"}}
    fetch = {"fetchTimeMs": "412", "charset-detected": "UTF-8", "languages-cld2": '{"reliable":true}'}  # fmt: skip
    try:
        for name in files:
            files[name].write(gzip.compress(warcinfo(), 1))
        for i in range(pages):
            url, body, links = page(i, rng, texts)
            warc = gzip.compress(request(url), 1) + gzip.compress(response(url, body), 1)
            html = {"Head": {"Title": "", "Metas": []}, "Links": links}
            described = [
                wat_document({"WARC-Type": "request", "WARC-Target-URI": url}, "crawl.warc.gz", 0, request=True),
                wat_document({"WARC-Type": "response", "WARC-Target-URI": url}, "crawl.warc.gz", 0, answer, html),
                wat_document({"WARC-Type": "metadata", "WARC-Target-URI": url, **fetch}, "crawl.warc.gz", 0),
            ]  # fmt: skip
            wat = b"".join(gzip.compress(wat_record(url, d), 1) for d in described)
            files["warc"].write(warc)
            files["wat"].write(wat)
            if i < pages // SMALL_SHARE:
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


def test_harvest_speed_against_cc2dataset(real_data, tmp_path, record):
    from conceptual.paths import state_dir

    crawl = write_crawl(tmp_path, PAGES, captions(real_data))
    sizes = {k: round(p.stat().st_size / 2**20, 1) for k, p in crawl.items()}
    ours = {k: run_worker(sys.executable, "harvest", str(p), str(tmp_path / f"{k}.pairs")) for k, p in crawl.items()}  # fmt: skip
    python, baseline = baseline_python(state_dir())
    kind = "wat" if baseline == "cc2dataset" else "warc"
    theirs = {
        size: run_worker(python, baseline, str(crawl[size]), str(tmp_path / f"baseline-{size}.pairs"))
        for size in (kind, f"small_{kind}")
    }  # fmt: skip

    def pairs(name: str) -> set:
        with open(tmp_path / name) as lines:
            return {tuple(json.loads(line)) for line in lines}

    same_warc_wat = pairs("warc.pairs") == pairs("wat.pairs")
    same_as_baseline = pairs(f"{kind}.pairs") == pairs(f"baseline-{kind}.pairs")
    for size, run in theirs.items():
        run["pages"] = ours[size]["pages"]  # the same file: cc2dataset does not count pages
    for run in (*ours.values(), *theirs.values()):
        # per CPU-second of the process: a core's rate, however busy the machine was
        run["pages_per_s"] = round(run["pages"] / run["cpu_seconds"], 1)
        run["candidates_per_s"] = round(run["candidates"] / run["cpu_seconds"], 1)
    rate = ours[kind]["candidates_per_s"]
    results = {
        "pages": PAGES,
        "command": f"HARVEST_BENCH_PAGES={PAGES} .venv/bin/pytest -m benchmark tests/benchmarks/test_harvest_speed.py -s",  # fmt: skip
        "file_mb": sizes,
        "ours": ours,
        "baseline": {"name": baseline, **theirs},
        "same_pairs_warc_and_wat": same_warc_wat,
        "same_pairs_as_baseline": same_as_baseline,
        "speedup_candidates_per_s": round(rate / theirs[kind]["candidates_per_s"], 2),
        # One monthly Common Crawl: about 90,000 WAT files of ~2.7 billion pages, so about
        # 30,000 pages a file, at the WAT rate measured here.
        "cc_month_core_hours": round(90_000 * 30_000 / ours["wat"]["pages_per_s"] / 3600, 1),
    }
    record("harvest_speed", results)
    assert same_warc_wat, "the WARC and its WAT gave different pairs"
    assert same_as_baseline, f"{baseline} gave different pairs"
