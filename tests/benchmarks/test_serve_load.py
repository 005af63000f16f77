"""Load test of the captioning service on Ray Serve (issue 5): closed-loop HTTP clients on
127.0.0.1, each sending its next request as soon as the last one is answered, for a bounded
time (requests time out after REQUEST_TIMEOUT_S, so a run always stops).

    .venv/bin/pytest -m benchmark tests/benchmarks/test_serve_load.py -s
    # SERVE_BENCH_CLIENTS=8 SERVE_BENCH_SECONDS=20 by default

The model is an untrained transformer captioner (2 layers, width 256, 8x8 grid features):
an untrained decoder rarely stops early, so every caption costs the full 17 steps. The CNN
is the real EfficientNet-lite0. Phases, on the same photos and at beam 3:
1. one replica: the model called in-process beside it (decode and captions, one image per
   call, on one thread as a 0.5-CPU replica runs torch), then one HTTP client, one request
   at a time: the difference is what Serve adds;
2. the same replica under load, batching on (max_batch_size 8), then off (1);
3. autoscaling 1..2 replicas under load for AUTOSCALE_SECONDS, the replica states sampled
   from serve.status() during the load and after it, until the autoscaler has scaled back
   down (or COOLDOWN_S passes).
`test_serve_under_a_flood_of_clients` (issue 32) runs separately:
    .venv/bin/pytest -m benchmark tests/benchmarks/test_serve_load.py -s -k flood
    # SERVE_BENCH_FLOOD_CLIENTS=200 SERVE_BENCH_FLOOD_SECONDS=30 by default
The load generator runs on the same cores as the replicas.

With SERVE_BENCH_PROFILE=DIR, -k overhead also samples Serve's proxy and each replica with
py-spy during a second pass of the one-client phase over HTTP: DIR gets each process's collapsed stacks
(flamegraph input) and profile.json, the Python CPU milliseconds each process spent per request and
the functions that spent them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import skimage.data
import torch
from PIL import Image
from ray import serve

from conceptual import registry
from conceptual.models.captioner import Captioner, CaptionerConfig
from conceptual.models.inference import ImageCaptioner, read_image
from conceptual.models.saving import save_model
from conceptual.models.vocab import Vocabulary
from conceptual.serve.app import APP_NAME, ServeConfig, start
from conceptual.serve.captioner_deployment import CaptionerDeployment, CaptioningSettings
from conceptual.serve.front_door import FrontDoor, FrontDoorConfig
from conceptual.tracking import start_run
from conceptual_demo.images import good_jpeg

# Serve's handles and replicas report their load to the autoscaler every 10 s by default:
# every second here, so that the autoscaling phase fits a short run. Ray's processes read
# these when Ray starts, which is after pytest has imported this module.
os.environ.setdefault("RAY_SERVE_HANDLE_AUTOSCALING_METRIC_PUSH_INTERVAL_S", "1")
os.environ.setdefault("RAY_SERVE_REPLICA_AUTOSCALING_METRIC_PUSH_INTERVAL_S", "1")

CLIENTS = int(os.environ.get("SERVE_BENCH_CLIENTS", "8"))
SECONDS = float(os.environ.get("SERVE_BENCH_SECONDS", "20"))
AUTOSCALE_SECONDS = 2 * SECONDS  # time for the autoscaler to react and a replica to start
REQUEST_TIMEOUT_S = 60.0
COOLDOWN_S = 60.0
BEAM = 3
SEQUENTIAL_REQUESTS = 20  # for the in-process and one-client latencies
MODEL_NAME = "bench-captioner"
PROFILE_DIR = os.environ.get("SERVE_BENCH_PROFILE")
PROFILE_RATE = 250  # samples/s: one sample is 4 ms of a process's time holding the GIL
CAPTIONS = [
    "a cup of coffee on a saucer beside a spoon",
    "a cat sleeps on a striped cushion",
    "an astronaut stands beside the flag on the moon",
    "a man with a camera on a tripod in a field",
]
ONE_REPLICA = {"num_replicas": 1, "autoscaling_config": None}
AUTOSCALING = {
    "min_replicas": 1,
    "max_replicas": 2,
    "target_ongoing_requests": 2,
    "upscale_delay_s": 2,
    "downscale_delay_s": 5,
    "look_back_period_s": 3,
}


@pytest.fixture(scope="module")
def model_dir(platform_home, log_captioner):
    """The captioner, saved locally for the in-process phase and registered as champion."""
    torch.manual_seed(0)
    vocab = Vocabulary.build(CAPTIONS * 4, min_count=1)
    config = CaptionerConfig(
        architecture="transformer",
        features="8x8",
        vocab_size=len(vocab),
        d_model=256,
        layers=2,
        heads=4,
        ffn=1024,
    )
    model = Captioner(config).eval()
    with start_run("serve-benchmark") as run:
        log_captioner(model, vocab)
    version = registry.register(run.info.run_id, {"variant": "transformer-8x8"}, name=MODEL_NAME)
    registry.promote_if_better(version, 1.0, "benchmark", name=MODEL_NAME)  # 0 never promotes
    with tempfile.TemporaryDirectory() as directory:
        yield save_model(model, vocab, directory)


@pytest.fixture(scope="module")
def photos() -> list[bytes]:
    names = ("coffee", "chelsea", "astronaut", "camera")
    return [good_jpeg(Image.fromarray(getattr(skimage.data, n)()).convert("RGB")) for n in names]


def percentiles(latencies_s: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(latencies_s, n=100, method="inclusive")
    return {f"p{q}_ms": round(cuts[q - 1] * 1000, 1) for q in (50, 95, 99)}


def timed(call) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def in_process(model_dir, photos: list[bytes]) -> dict:
    """The model called directly, as a replica does, one image per call (decode included)."""
    captioner = ImageCaptioner(model_dir)
    size = captioner.image_size
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in a replica: Ray sets OMP_NUM_THREADS=1 below 1 CPU
    try:
        captioner.captions([read_image(photos[0], size)], beam=BEAM)  # warm-up
        latencies = [
            timed(
                lambda i=i: captioner.captions(
                    [read_image(photos[i % len(photos)], size)], beam=BEAM
                )
            )
            for i in range(SEQUENTIAL_REQUESTS)
        ]
        batch = [read_image(photos[i % len(photos)], size) for i in range(8)]
        batch_s = timed(lambda: captioner.captions(batch, beam=BEAM))
    finally:
        torch.set_num_threads(threads)
    return {
        **percentiles(latencies),
        "images_per_s_one_at_a_time": round(len(latencies) / sum(latencies), 2),
        "images_per_s_batch_of_8": round(8 / batch_s, 2),
    }


def deploy(port: int, max_batch_size: int, captioner_options: dict) -> str:
    """The application's URL once its champion is loaded (/readyz 200)."""
    settings = CaptioningSettings(
        models={"en": MODEL_NAME}, max_batch_size=max_batch_size, poll_seconds=1
    )
    url = start(ServeConfig(captioning=settings), port=port, captioner_options=captioner_options)
    deadline = time.monotonic() + REQUEST_TIMEOUT_S
    while httpx.get(f"{url}/readyz", timeout=REQUEST_TIMEOUT_S).status_code != 200:
        assert time.monotonic() < deadline, "the champion did not load"
        time.sleep(0.5)
    return url


def closed_loop(url: str, photos: list[bytes], clients: int, seconds: float) -> dict:
    """`clients` threads, each posting its next photo when the last is answered, until
    `seconds` have passed: throughput, latency percentiles and statuses."""
    deadline = time.monotonic() + seconds

    def client(first: int) -> tuple[list[float], Counter]:
        latencies, statuses = [], Counter()
        with httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT_S) as http:
            index = first
            while time.monotonic() < deadline:
                started = time.perf_counter()
                try:
                    status = http.post("/v1/captions", content=photos[index % len(photos)])
                    statuses[str(status.status_code)] += 1
                except httpx.HTTPError as error:
                    statuses[type(error).__name__] += 1
                latencies.append(time.perf_counter() - started)
                index += 1
        return latencies, statuses

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        results = list(pool.map(client, range(clients)))
    elapsed = time.perf_counter() - started
    latencies = [latency for client_latencies, _ in results for latency in client_latencies]
    statuses = sum((client_statuses for _, client_statuses in results), Counter())
    return {
        "clients": clients,
        "seconds": round(elapsed, 1),
        "requests": len(latencies),
        "requests_per_s": round(len(latencies) / elapsed, 2),
        **percentiles(latencies),
        "statuses": dict(statuses),  # HTTP statuses, or the client's error for no answer
        "errors": sum(n for status, n in statuses.items() if not status.startswith("2")),
    }


def replica_states() -> dict[str, int]:
    """The captioner's replicas by state (STARTING, RUNNING, STOPPING...), from Serve."""
    deployment = serve.status().applications[APP_NAME].deployments[CaptionerDeployment.name]
    return {str(state): count for state, count in deployment.replica_states.items()}


def scaled_down() -> bool:
    states = replica_states()
    return set(states) == {"RUNNING"} and states["RUNNING"] == AUTOSCALING["min_replicas"]


class ReplicaSampler:
    """Samples the captioner's replica states from serve.status() about once a second."""

    def __init__(self):
        self.samples: list[tuple[float, dict[str, int]]] = []
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def elapsed(self) -> float:
        return round(time.monotonic() - self.started, 1)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self.samples.append((self.elapsed(), replica_states()))

    def stop(self) -> list[tuple[float, dict[str, int]]]:
        self._stop.set()
        self._thread.join()
        return self.samples


def autoscaling_run(url: str, photos: list[bytes]) -> dict:
    """Load for AUTOSCALE_SECONDS, then quiet until the deployment is back to its minimum."""
    sampler = ReplicaSampler()
    load = closed_loop(url, photos, CLIENTS, AUTOSCALE_SECONDS)
    load_ended_at = sampler.elapsed()
    give_up = time.monotonic() + COOLDOWN_S
    while not scaled_down() and time.monotonic() < give_up:
        time.sleep(1.0)
    back_to_min_at = sampler.elapsed() if scaled_down() else None
    samples = sampler.stop()
    running = [states.get("RUNNING", 0) for at, states in samples if at <= load_ended_at]
    return {
        "config": AUTOSCALING,
        "load": load,
        "load_ended_at_s": load_ended_at,
        "running_replicas_max_during_load": max(running, default=0),
        "back_to_min_replicas_at_s": back_to_min_at,
        "samples": [{"at_s": at, **states} for at, states in samples],
    }


def server_timing(header: str) -> dict[str, float]:
    """{name: ms} of a Server-Timing header (`body;dur=1.2, handle;dur=110.0, ...`)."""
    parts = (entry.strip().split(";dur=") for entry in header.split(","))
    return {name: float(ms) for name, ms in parts}


def sequential(url: str, photos: list[bytes]) -> dict:
    """One client, one request at a time: the latency Serve adds to a model call, and the
    median of each part of it the service reports (Server-Timing)."""
    latencies, parts = [], {}
    with httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT_S) as http:
        http.post("/v1/captions", content=photos[0], params={"beam_size": BEAM})  # warm-up
        for i in range(SEQUENTIAL_REQUESTS):
            started = time.perf_counter()
            response = http.post("/v1/captions", content=photos[i % len(photos)])
            total_ms = (time.perf_counter() - started) * 1000
            latencies.append(total_ms / 1000)
            timing = server_timing(response.headers["server-timing"])
            # Per request, so that a busy machine slowing the model does not hide it: all
            # but what the in-process call also does (decode, model).
            timing["overhead"] = total_ms - timing["decode"] - timing["model"]
            timing["proxy_and_http"] = total_ms - timing["body"] - timing["handle"]
            timing["handle_hop"] = timing["handle"] - timing["replica"]
            for name, ms in timing.items():
                parts.setdefault(name, []).append(ms)
    medians = {name: round(statistics.median(values), 1) for name, values in parts.items()}
    return {**percentiles(latencies), "server_timing_p50_ms": medians}


def serve_processes() -> dict[str, int]:
    """Serve's proxy and replica processes on this machine, by their Ray process titles
    (`ray::ServeReplica:APP:Captioner` -> `Captioner`)."""
    listed = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True)
    found = {}
    for line in listed.stdout.splitlines():
        pid, _, title = line.strip().partition(" ")
        if title.startswith("ray::ProxyActor"):
            found["proxy"] = int(pid)
        elif title.startswith("ray::ServeReplica:"):
            found[title.split()[0].rsplit(":", 1)[-1]] = int(pid)
    return found


@contextlib.contextmanager
def profiled(directory: Path):
    """py-spy sampling each Serve process while the block runs: only threads holding the GIL,
    so that threads blocked in Ray's C++ core do not count as busy."""
    directory.mkdir(parents=True, exist_ok=True)
    spy = Path(sys.executable).with_name("py-spy")
    samplers = {
        name: subprocess.Popen(
            [
                spy,
                "record",
                "--pid",
                str(pid),
                "--rate",
                str(PROFILE_RATE),
                "--format",
                "raw",
                "--gil",
                "--nonblocking",
                "--output",
                str(directory / f"{name}.txt"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for name, pid in serve_processes().items()
    }
    time.sleep(1)  # attached
    try:
        yield
    finally:
        for sampler in samplers.values():
            sampler.send_signal(signal.SIGINT)  # py-spy writes its file and exits
        for sampler in samplers.values():
            sampler.wait(timeout=60)


def profile_summary(directory: Path, requests: int, top: int = 12) -> dict:
    """Per process: Python CPU ms per request, and the functions (leaf frames) that spent
    most of it."""
    summary = {}
    for stacks in sorted(directory.glob("*.txt")):
        leaves, total = Counter(), 0
        for line in stacks.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            leaves[stack.rsplit(";", 1)[-1]] += int(count)
            total += int(count)
        summary[stacks.stem] = {
            "cpu_ms_per_request": round(total * 1000 / PROFILE_RATE / requests, 1),
            "top_ms_per_request": {
                frame: round(n * 1000 / PROFILE_RATE / requests, 2)
                for frame, n in leaves.most_common(top)
            },
        }
    (directory / "profile.json").write_text(json.dumps(summary, indent=2))
    return summary


def overhead(model_dir, photos: list[bytes], url: str, door_port: int) -> dict:
    """Phase 1: the in-process call, then one client over HTTP to Serve, then through the
    front door (nginx) in front of it, one request at a time, in one run."""
    direct = in_process(model_dir, photos)
    one_client = sequential(url, photos)
    if PROFILE_DIR:  # a pass of its own: sampling slows the processes it samples
        with profiled(Path(PROFILE_DIR)):
            sequential(url, photos)
        profile_summary(Path(PROFILE_DIR), SEQUENTIAL_REQUESTS + 1)  # with the warm-up
    door = FrontDoor(
        FrontDoorConfig(listen=f"127.0.0.1:{door_port}", upstream=url.removeprefix("http://"))
    )
    try:
        through_door = sequential(door.url, photos)
    finally:
        door.stop()
    return {
        "beam_size": BEAM,
        "in_process": direct,
        "one_client_over_http": one_client,
        "serve_overhead_p50_ms": round(one_client["p50_ms"] - direct["p50_ms"], 1),
        "one_client_through_front_door": through_door,
        "front_door_overhead_p50_ms": round(through_door["p50_ms"] - direct["p50_ms"], 1),
    }


def test_serve_overhead(model_dir, photos, ray_local, free_port, record):
    """Phase 1 alone (-k overhead): what Serve and the front door add to one model call."""
    try:
        url = deploy(free_port(), max_batch_size=8, captioner_options=ONE_REPLICA)
        results = overhead(model_dir, photos, url, free_port())
    finally:
        serve.shutdown()
    record("serve_overhead", results)
    assert results["one_client_over_http"]["p50_ms"] > 0


def test_serve_under_load(model_dir, photos, ray_local, free_port, record):
    port = free_port()
    try:
        url = deploy(port, max_batch_size=8, captioner_options=ONE_REPLICA)
        sequential_results = overhead(model_dir, photos, url, free_port())
        batched = closed_loop(url, photos, CLIENTS, SECONDS)
        deploy(port, max_batch_size=1, captioner_options=ONE_REPLICA)
        unbatched = closed_loop(url, photos, CLIENTS, SECONDS)
        deploy(port, max_batch_size=8, captioner_options={"autoscaling_config": AUTOSCALING})
        autoscaling = autoscaling_run(url, photos)
    finally:
        serve.shutdown()

    results = {
        **sequential_results,
        "one_replica_batching_on": batched,
        "one_replica_batching_off": unbatched,
        "batching_throughput_ratio": round(
            batched["requests_per_s"] / unbatched["requests_per_s"], 2
        ),
        "autoscaling": autoscaling,
    }
    record("serve_load", results)
    for run in (batched, unbatched, autoscaling["load"]):
        assert run["requests"] > 0
        assert all(status.isdigit() and int(status) < 500 for status in run["statuses"]), run


# --- 200 clients at once (issue 32): refused fast, health answered ------------------------

FLOOD_CLIENTS = int(os.environ.get("SERVE_BENCH_FLOOD_CLIENTS", "200"))
FLOOD_SECONDS = float(os.environ.get("SERVE_BENCH_FLOOD_SECONDS", "30"))
HEALTH_EVERY_S = 0.25


def probe_health(url: str, until: float) -> list[tuple[float, int]]:
    """(latency s, status) of GET /healthz every HEALTH_EVERY_S until `until`, on a thread
    of its own: the load's event loop cannot delay it."""
    found = []
    with httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT_S) as http:
        while time.monotonic() < until:
            started = time.perf_counter()
            try:
                status = http.get("/healthz").status_code
            except httpx.HTTPError:
                status = 0
            found.append((time.perf_counter() - started, status))
            time.sleep(HEALTH_EVERY_S)
    return found


async def flood(url: str, photos: list[bytes], clients: int, seconds: float) -> dict:
    """`clients` closed-loop clients on one event loop (a 503 waits its Retry-After, as a
    well-behaved client does) and a health probe every HEALTH_EVERY_S, for `seconds`."""
    deadline = time.monotonic() + seconds
    answered, refused, statuses = [], [], Counter()
    in_service = []  # body + handle of each answered request, as the ingress timed it (s)
    limits = httpx.Limits(max_connections=clients + 1, max_keepalive_connections=clients + 1)
    async with httpx.AsyncClient(base_url=url, timeout=REQUEST_TIMEOUT_S, limits=limits) as http:

        async def client(first: int) -> None:
            index = first
            while time.monotonic() < deadline:
                started = time.perf_counter()
                try:
                    response = await http.post("/v1/captions", content=photos[index % len(photos)])
                except httpx.HTTPError as error:
                    statuses[type(error).__name__] += 1
                    continue
                statuses[str(response.status_code)] += 1
                if response.status_code == 503:
                    refused.append(time.perf_counter() - started)
                    await asyncio.sleep(float(response.headers.get("retry-after", "1")))
                else:
                    answered.append(time.perf_counter() - started)
                if response.status_code == 200:
                    timing = server_timing(response.headers["server-timing"])
                    in_service.append((timing["body"] + timing["handle"]) / 1000)
                index += 1

        prober = asyncio.get_running_loop().run_in_executor(None, probe_health, url, deadline)
        await asyncio.gather(*(client(i) for i in range(clients)))
        health = await prober
    total = sum(statuses.values())
    return {
        "clients": clients,
        "seconds": seconds,
        "requests": total,
        "answered": {"count": len(answered), **percentiles(answered)} if answered else {},
        # Without the load generator's own delays (one event loop for every client).
        "answered_in_the_ingress": percentiles(in_service) if in_service else {},
        "refused_share": round(statuses["503"] / total, 3) if total else None,
        "refused": {"count": len(refused), **percentiles(refused)} if refused else {},
        "statuses": dict(statuses),
        "health": {
            "probes": len(health),
            "not_200": sum(status != 200 for _, status in health),
            **percentiles([latency for latency, _ in health]),
            "max_ms": round(max(latency for latency, _ in health) * 1000, 1),
        },
    }


def test_serve_under_a_flood_of_clients(model_dir, photos, ray_local, free_port, record):
    """The shipped settings (captioner autoscaling 1..2, max_queued_requests, the ingress's
    max_in_flight) behind the front door (requests_in_progress); one address stands in for
    FLOOD_CLIENTS clients, so the per-client connection limit is lifted above it."""
    upstream = deploy(free_port(), max_batch_size=8, captioner_options={})
    door = FrontDoor(
        FrontDoorConfig(
            listen=f"127.0.0.1:{free_port()}",
            upstream=upstream.removeprefix("http://"),
            connections_per_client=FLOOD_CLIENTS + 8,
        )
    )
    try:
        results = asyncio.run(flood(door.url, photos, FLOOD_CLIENTS, FLOOD_SECONDS))
    finally:
        door.stop()
        serve.shutdown()
    record("serve_flood", results)
    assert results["health"]["not_200"] == 0
    assert results["health"]["p99_ms"] < 1000
    assert not [s for s in results["statuses"] if s.isdigit() and s not in {"200", "503"}]
