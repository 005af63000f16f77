"""The measures of tests/benchmarks/test_harvest_speed.py, each run in a process of its own
(`python harvest_workers.py KIND ARCHIVE PAIRS_OUT`, PAIRS_OUT `-` to write none), printing
one JSON line: pages, candidates, seconds, the CPU-seconds of its start-up (the interpreter
and the imports, before the first record) and peak resident memory (VmHWM; the harvest's
adds its HTML parser's process, and its CPU seconds). Imports only the standard library at
the top, so that the baseline's own virtual environment (cc2dataset, or warcio +
BeautifulSoup) runs it too."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path


def _peak_kb(process: str = "self") -> int:
    for line in Path(f"/proc/{process}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


@contextlib.contextmanager
def _pairs(pairs_out: str):
    """write(alt, url, page_url): a JSON line each into `pairs_out`, or, for "-", nothing:
    the tool's own rate, without the harness's encoding (about 10 us a page, both alike)."""
    if pairs_out == "-":
        yield lambda alt, url, page_url: None
        return
    with open(pairs_out, "w") as out:
        yield lambda alt, url, page_url: out.write(json.dumps([alt, url, page_url]) + "\n")


def _ours(path: str, pairs_out: str) -> dict:
    import resource
    import time
    from collections import Counter

    from conceptual.harvest import HarvestRules, budget, harvest_archive

    startup = time.process_time()  # the interpreter and the harvest's imports
    counts: Counter = Counter()

    def open_at(offset: int):
        stream = open(path, "rb")
        stream.seek(offset)
        return stream

    started, cpu = time.perf_counter(), time.process_time()
    with _pairs(pairs_out) as write:  # streamed out: the worker's memory is the harvest's
        for row in harvest_archive(open_at, path, HarvestRules(), counts):
            write(row["alt_text"], row["image_url"], row["page_url"])
            counts["candidates"] += 1
    seconds = time.perf_counter() - started
    # The HTML parser's process (harvest/budget.py) is the harvest's too: its peak memory,
    # and its CPU once reaped (its ru_maxrss would count this process's, copied at the fork).
    peak_kb = _peak_kb() + (_peak_kb(budget.PARSER._process.pid) if budget.PARSER._process else 0)
    budget.PARSER.close()
    parser = resource.getrusage(resource.RUSAGE_CHILDREN)
    # the per-core rate, whatever else runs
    cpu_seconds = time.process_time() - cpu + parser.ru_utime + parser.ru_stime
    return {"pages": counts["html_pages"], "candidates": counts["candidates"], "seconds": round(seconds, 2), "cpu_seconds": round(cpu_seconds, 2), "startup_cpu_seconds": round(startup, 2), "peak_mb": round(peak_kb / 1024, 1)}  # fmt: skip


def _cc2dataset(path: str, pairs_out: str) -> dict:
    import time

    from cc2dataset.main import process_wat

    startup = time.process_time()  # the interpreter and cc2dataset's imports
    started, cpu, found = time.perf_counter(), time.process_time(), 0
    with _pairs(pairs_out) as write:
        for _uid, url, alt, _file, page_url in process_wat(path, "image"):
            write(alt, url, page_url)
            found += 1
    seconds = time.perf_counter() - started
    cpu_seconds = time.process_time() - cpu  # the per-core rate, whatever else runs
    return {"pages": None, "candidates": found, "seconds": round(seconds, 2), "cpu_seconds": round(cpu_seconds, 2), "startup_cpu_seconds": round(startup, 2), "peak_mb": round(_peak_kb() / 1024, 1)}  # fmt: skip


def _warcio_bs4(path: str, pairs_out: str) -> dict:
    import time
    from urllib.parse import urljoin

    from bs4 import BeautifulSoup
    from warcio.archiveiterator import ArchiveIterator

    started, cpu, found, pages = time.perf_counter(), time.process_time(), 0, 0
    with open(path, "rb") as stream, _pairs(pairs_out) as write:
        for record in ArchiveIterator(stream):
            if record.rec_type != "response":
                continue
            page_url = record.rec_headers.get_header("WARC-Target-URI")
            soup = BeautifulSoup(record.content_stream().read(), "html.parser")
            pages += 1
            base = soup.find("base", href=True)
            base_url = urljoin(page_url, base["href"]) if base else page_url
            for img in soup.find_all("img", src=True):
                alt = " ".join((img.get("alt") or "").split())
                url = urljoin(base_url, img["src"])
                if alt and url.startswith(("http://", "https://")):
                    write(alt, url, page_url)
                    found += 1
    seconds = time.perf_counter() - started
    cpu_seconds = time.process_time() - cpu  # the per-core rate, whatever else runs
    return {"pages": pages, "candidates": found, "seconds": round(seconds, 2), "cpu_seconds": round(cpu_seconds, 2), "peak_mb": round(_peak_kb() / 1024, 1)}  # fmt: skip


if __name__ == "__main__":
    kind, path, pairs_out = sys.argv[1:4]
    worker = {"harvest": _ours, "cc2dataset": _cc2dataset, "warcio+bs4": _warcio_bs4}[kind]
    print(json.dumps(worker(path, pairs_out)))
