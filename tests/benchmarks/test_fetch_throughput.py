"""Image fetch throughput: how much the thread pool of `Fetcher.fetch_many` buys.

    .venv/bin/pytest -m benchmark tests/benchmarks/test_fetch_throughput.py -s

A local ThreadingHTTPServer on 127.0.0.1 serves 200 distinct URLs, each a JPEG body of
about 100 KB, after a fixed 20 ms sleep per response that stands in for the network's
latency (real image hosts take tens to hundreds of ms). The same 200 URLs are fetched
sequentially (threads=1, the baseline) and with 4, 16 and 64 threads. Server and client
share this machine's cores, so the figures are a floor for a real crawl, where the waiting
happens elsewhere.
"""

from __future__ import annotations

import io
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from PIL import Image

from conceptual.vision.fetch import FetchConfig, Fetcher

IMAGES = 200
LATENCY_S = 0.02
THREAD_LEVELS = (1, 4, 16, 64)


def noisy_jpeg(target_bytes: int = 100_000) -> bytes:
    """Random pixels compress badly, so a small JPEG reaches the target size."""
    side = int((target_bytes / 0.9) ** 0.5)  # about 0.9 bytes per noisy pixel at quality 90
    pixels = np.random.default_rng(0).integers(0, 256, (side, side, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", quality=90)
    return out.getvalue()


@pytest.fixture(scope="module")
def image_server():
    body = noisy_jpeg()

    class SlowImages(BaseHTTPRequestHandler):
        def do_GET(self):
            time.sleep(LATENCY_S)
            self.send_response(200)
            self.send_header("Content-Type", "image/jpeg")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 128  # 64 clients connect at once; the default backlog is 5

    httpd = Server(("127.0.0.1", 0), SlowImages)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", len(body)
    httpd.shutdown()
    httpd.server_close()


def test_fetch_throughput(image_server, record):
    base, body_bytes = image_server
    urls = [f"{base}/images/{i}.jpg" for i in range(IMAGES)]
    rates = {}
    for threads in THREAD_LEVELS:
        # One host stands for a crawl's many: fetch.per_host would otherwise cap the pool.
        config = FetchConfig(threads=threads, per_host=threads, allow_hosts=["127.0.0.1"])
        fetcher = Fetcher(config)
        start = time.perf_counter()
        results = fetcher.fetch_many(urls)
        elapsed = time.perf_counter() - start
        assert all(r.data is not None and len(r.data) == body_bytes for r in results)
        rates[threads] = IMAGES / elapsed
    record(
        "fetch_throughput",
        {
            "images": IMAGES,
            "body_bytes": body_bytes,
            "latency_ms": LATENCY_S * 1000,
            "levels": {
                f"threads={threads}": {
                    "images_per_s": round(rate, 1),
                    "vs_sequential": round(rate / rates[1], 2),
                }
                for threads, rate in rates.items()
            },
        },
    )
