"""A crawl resumes where it stopped, for real: the curate job (its driver and the local Ray
cluster it started) is killed with SIGKILL about halfway through fetching, then started again
with the same command. The output equals a clean run's (ids, rows, funnel), and no image
the first attempt had finished is fetched again. Slow (three jobs, each starting Ray):
`make test-faults`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from ray_cli import ray_env

from conceptual import storage
from conceptual_demo.corpus import write_candidates
from conceptual_demo.images import build_images, demo_candidates, fetch_overrides
from conceptual_demo.server import serve_directory

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.faults]

SETTINGS = [
    "entity_frequency.more_than=1",
    "resources.batch_size=50",
    "resources.fetch_batch_size=8",
    "resources.fetch_tasks=2",
    "samples=0",
]


def journaled(folder: Path) -> int:
    """Rows a step has written to its journal so far (each file is whole: renamed in place)."""
    return sum(pq.ParquetFile(path).metadata.num_rows for path in folder.glob("*.parquet"))


def curate(input_path: Path, output: Path, overrides: list[str], log: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "conceptual.jobs.curate", "--input", str(input_path)]
    return subprocess.Popen(
        [*command, "--output", str(output), *overrides],
        env=ray_env(),
        stdout=open(log, "w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its Ray processes share its session: one kill ends them all
    )


def rows(output: Path) -> dict[str, list[dict]]:
    found = {}
    for part in ("curated", "rejected"):
        tables = [pq.read_table(p) for p in sorted((output / part).glob("*.parquet"))]
        found[part] = sorted(
            (r for t in tables for r in t.to_pylist()),
            key=lambda r: (r["id"], repr(sorted(r.items()))),
        )
    return found


def test_a_killed_curation_resumes_without_fetching_twice(platform_home, tmp_path):
    catalogue = build_images(tmp_path / "images")
    with serve_directory(catalogue.directory) as server:
        candidates = demo_candidates(catalogue, server.url, 600, seed=8)
        write_candidates(candidates, str(tmp_path / "in.tsv"), fmt="cc_tsv")
        overrides = [*fetch_overrides(catalogue), *SETTINGS]
        clean_job = curate(tmp_path / "in.tsv", tmp_path / "clean", overrides, tmp_path / "c.log")
        assert clean_job.wait(600) == 0, (tmp_path / "c.log").read_text()[-3000:]
        clean_requests = server.requests
        clean_stats = storage.read_json(str(tmp_path / "clean" / "stats.json"))
        to_fetch = next(r for r in clean_stats["funnel"] if r["stage"] == "hypernymize")["leaving"]

        # Killed once half of the fetch batches are in the journal.
        before = server.requests
        out, log = tmp_path / "out", tmp_path / "first.log"
        first = curate(tmp_path / "in.tsv", out, overrides, log)
        fetched = out / "_resume" / "step-1"
        deadline = time.monotonic() + 600
        while journaled(fetched) < to_fetch / 2:
            assert first.poll() is None, f"finished before the kill: {log.read_text()[-2000:]}"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(60)
        killed_requests = server.requests - before
        assert not (out / "_SUCCESS").exists()

        again = curate(tmp_path / "in.tsv", out, overrides, tmp_path / "again.log")
        assert again.wait(600) == 0, (tmp_path / "again.log").read_text()[-3000:]
        resumed_requests = server.requests - before - killed_requests

    stats = storage.read_json(str(out / "stats.json"))
    assert stats["resumed"] > 0
    for key in ("input", "kept", "rejected", "funnel", "splits"):
        assert stats[key] == clean_stats[key], key
    assert rows(out) == rows(tmp_path / "clean")
    # Fetched twice: asked for more often across both attempts than by a clean run.
    both = killed_requests + resumed_requests
    twice = Counter({p: n - clean_requests[p] for p, n in both.items() if n > clean_requests[p]})
    print(
        f"\nresume after kill: {stats['resumed']} of {stats['input']} candidates resumed; "
        f"{sum(killed_requests.values())} GETs before the kill, "
        f"{sum(resumed_requests.values())} after; fetched twice: {sum(twice.values())}"
    )
    # At most the batches in flight at the kill (fetch_tasks x fetch_batch_size, with retries).
    assert sum(twice.values()) <= 2 * 8 * 2
