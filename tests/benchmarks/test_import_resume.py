"""import_conceptual at scale, killed halfway and resumed: images/s, and how many images the
two attempts fetched twice.

    BENCHMARK_IMPORT_ROWS=50000 .venv/bin/pytest -m benchmark \
        tests/benchmarks/test_import_resume.py -s

The input is released-format TSV (`caption<TAB>url`): the released validation captions
(../shared/data/cc_val_captions.tsv, cycled) with URLs on a local image server. The server
answers /img/N.jpg with one of the shared photos (coco_mini and flickr8k_mini, upscaled
past 400 px once at start) carrying a JPEG comment that names N, so every URL is a
distinct image (nothing is a duplicate); every 20th URL is gone (404). Three jobs run as a
user runs them (`python -m conceptual.jobs.import_conceptual`, each starting its own
Ray): an uninterrupted one, for the images/s and the reference output; one killed with
SIGKILL (with the Ray it started) once half of the rows have been fetched; and the same
command again, which resumes. Fetched twice counts the URLs the two attempts asked for
more often than the uninterrupted run did.
"""

from __future__ import annotations

import csv
import io
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from PIL import Image

from conceptual import storage

ROWS = int(os.environ.get("BENCHMARK_IMPORT_ROWS", "50000"))
GONE_EVERY = 20


def journaled(folder: Path) -> int:
    """Rows a step has written to its journal so far (each file is whole: renamed in place)."""
    return sum(pq.ParquetFile(path).metadata.num_rows for path in folder.glob("*.parquet"))


def photos(data: Path, n: int = 40) -> list[bytes]:
    """JPEGs of real photos, the short side 480 px."""
    paths = sorted((data / "coco_mini").rglob("*.jpg"))[: n // 2]
    paths += sorted((data / "flickr8k_mini" / "images").glob("*.jpg"))[: n - len(paths)]
    out = []
    for path in paths:
        with Image.open(path) as image:
            scale = 480 / min(image.size)
            image = image.convert("RGB").resize(
                (round(image.width * scale), round(image.height * scale))
            )
            out.append(_jpeg(image))
    return out


def _jpeg(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=88)
    return buffer.getvalue()


class Images(BaseHTTPRequestHandler):
    """/img/N.jpg: photo N mod the pool, with a comment naming N; every GET is counted."""

    photos: list[bytes] = []
    requests: Counter = Counter()
    lock = threading.Lock()

    def do_GET(self) -> None:
        with self.lock:
            self.requests[self.path] += 1
        number = self.path.removeprefix("/img/").removesuffix(".jpg")
        if not number.isdigit() or int(number) % GONE_EVERY == GONE_EVERY - 1:
            self.send_error(404)
            return
        comment = f"image {number}".encode()
        photo = self.photos[int(number) % len(self.photos)]
        body = photo[:2] + b"\xff\xfe" + (len(comment) + 2).to_bytes(2, "big") + comment + photo[2:]
        self.send_response(200)
        self.send_header("Content-Type", "image/jpeg")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def start(output: Path, tsv: Path, log: Path) -> subprocess.Popen:
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    command = [sys.executable, "-m", "conceptual.jobs.import_conceptual", "--input", str(tsv)]
    command += ["--output", str(output), "--split", "validation"]
    command += ["samples=0", "fetch.allow_hosts=[127.0.0.1]"]  # the images' server
    return subprocess.Popen(
        command, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True
    )


def curated_ids(output: Path) -> list[tuple[str, str]]:
    rows = []
    for part in ("curated", "rejected"):
        for path in sorted((output / part).glob("*.parquet")):
            table = pq.read_table(path, columns=["id"])
            rows += [(part, i) for i in table["id"].to_pylist()]
    return sorted(rows)


@pytest.mark.timeout(7200)
def test_import_killed_and_resumed(tmp_path, real_data, record):
    Images.photos = photos(real_data)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Images)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    with open(real_data / "cc_val_captions.tsv", encoding="utf-8") as f:
        captions = [row["caption"] for row in csv.DictReader(f, delimiter="\t")]
    tsv = tmp_path / "Validation_GCC-1.1.0-Validation.tsv"
    with open(tsv, "w", encoding="utf-8") as f:
        for n in range(ROWS):
            f.write(f"{captions[n % len(captions)]}\t{base}/img/{n}.jpg\n")

    started = time.perf_counter()
    clean = start(tmp_path / "clean", tsv, tmp_path / "clean.log")
    assert clean.wait(7000) == 0, (tmp_path / "clean.log").read_text()[-3000:]
    clean_seconds = time.perf_counter() - started
    clean_requests = Counter(Images.requests)
    Images.requests.clear()

    out = tmp_path / "out"
    first = start(out, tsv, tmp_path / "first.log")
    fetched = out / "_resume" / "step-1"
    while journaled(fetched) < ROWS / 2:
        assert first.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
        time.sleep(0.05)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(60)
    killed_requests = Counter(Images.requests)
    Images.requests.clear()

    started = time.perf_counter()
    again = start(out, tsv, tmp_path / "again.log")
    assert again.wait(7000) == 0, (tmp_path / "again.log").read_text()[-3000:]
    resumed_seconds = time.perf_counter() - started
    resumed_requests = Counter(Images.requests)
    server.shutdown()

    stats = storage.read_json(str(out / "stats.json"))
    clean_stats = storage.read_json(str(tmp_path / "clean" / "stats.json"))
    both = killed_requests + resumed_requests
    twice = sum(max(0, n - clean_requests[path]) for path, n in both.items())
    results = {
        "rows": ROWS,
        "cores": len(os.sched_getaffinity(0)),
        "kept": clean_stats["kept"],
        "uninterrupted_seconds": round(clean_seconds, 1),
        "images_per_s": round(ROWS / clean_seconds, 1),
        "images_per_s_per_core": round(ROWS / clean_seconds / len(os.sched_getaffinity(0)), 1),
        "requests_before_kill": sum(killed_requests.values()),
        "requests_after_resume": sum(resumed_requests.values()),
        "resumed_candidates": stats["resumed"],
        "resumed_seconds": round(resumed_seconds, 1),
        "fetched_twice": twice,
        "same_funnel": all(
            stats[k] == clean_stats[k] for k in ("input", "kept", "rejected", "funnel")
        ),
        "same_ids": curated_ids(out) == curated_ids(tmp_path / "clean"),
        "seconds_by_phase": clean_stats["seconds_by_phase"],
    }
    record("import_resume", results)
    assert results["same_funnel"] and results["same_ids"]
