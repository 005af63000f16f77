"""`ray job submit` against `ray start --head`, exactly as a user runs the stages."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory, platform_home, free_port):
    """A head node started with `ray start --head --block`; stopping that process stops
    the cluster it started (and only that one, unlike `ray stop`)."""
    dashboard = free_port()
    # As with an activated venv: the job's `python` is the one the platform is installed in.
    path = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "PATH": path, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    log = open(tmp_path_factory.mktemp("ray") / "head.log", "w")
    head = subprocess.Popen(
        [
            BIN / "ray",
            "start",
            "--head",
            "--block",
            f"--port={free_port()}",
            "--num-cpus=2",
            "--include-dashboard=true",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={dashboard}",
            "--disable-usage-stats",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    address = f"http://127.0.0.1:{dashboard}"
    deadline = time.monotonic() + 120
    while subprocess.run(
        [BIN / "ray", "job", "list", "--address", address], env=env, capture_output=True
    ).returncode:
        if head.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"ray head did not come up; see {log.name}")
        time.sleep(2)
    yield {"address": address, "env": env}
    head.send_signal(signal.SIGTERM)
    try:
        head.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(head.pid, signal.SIGKILL)
    log.close()


def submit(cluster, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            BIN / "ray",
            "job",
            "submit",
            "--address",
            cluster["address"],
            "--working-dir",
            str(REPO),
            "--",
            "python",
            "-m",
            *args,
        ],
        env=cluster["env"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_curate_and_features_jobs_submitted_to_a_cluster(ray_cluster, tmp_path):
    """The whole funnel as a user runs it: images fetched by the cluster from an HTTP server
    on 127.0.0.1, then the features of what was kept."""
    from conceptual.demo.corpus import write_candidates
    from conceptual.demo.images import build_images, demo_candidates, fetch_overrides
    from conceptual.demo.server import serve_directory

    catalogue = build_images(tmp_path / "images")
    out = tmp_path / "out"
    with serve_directory(catalogue.directory) as server:
        rows = demo_candidates(catalogue, server.url, 300, seed=3)
        write_candidates(rows, str(tmp_path / "in.tsv"), fmt="cc_tsv")
        result = submit(
            ray_cluster,
            "conceptual.jobs.curate",
            "--input",
            str(tmp_path / "in.tsv"),
            "--output",
            str(out),
            "entity_frequency.more_than=1",
            *fetch_overrides(catalogue),
        )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    stats = json.loads((out / "stats.json").read_text())
    assert stats["input"] == 300 and 0 < stats["kept"] < 300
    assert {"fetch", "image", "overlap"} <= set(stats["rejected"])
    assert (out / "_SUCCESS").exists()
    assert "kept" in result.stdout and "mlflow" in result.stdout

    features = submit(
        ray_cluster,
        "conceptual.jobs.features",
        "--data",
        str(out),
        "--output",
        str(tmp_path / "features"),
    )
    assert features.returncode == 0, features.stdout[-4000:] + features.stderr[-4000:]
    summary = json.loads((tmp_path / "features" / "features.json").read_text())
    assert summary["images"] == stats["kept"] and summary["grid"] == 8


def test_hypernymize_job_submitted_to_a_cluster(ray_cluster, tmp_path):
    lines = ["Crowd at a concert in Los Angeles", "", "#tbt www.example.com"]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    result = submit(
        ray_cluster, "conceptual.jobs.hypernymize", "--filters", str(tmp_path / "in.txt")
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    out = [
        line
        for line in result.stdout.splitlines()
        if line == "crowd at a concert" or line.startswith("REJECT\t")
    ]
    assert out[0] == "crowd at a concert"
    assert out[1] == "REJECT\ttext\tempty"
    assert out[2].startswith("REJECT\ttext\t")
