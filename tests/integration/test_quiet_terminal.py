"""Ray's and MLflow's own lines stay off a quiet job's terminal, under load too: the raylet's
`(raylet) WARNING: N PYTHON worker processes have been started...` goes to the job's log
file, and MLflow's `🏃 View run ...` (written to standard output) is not printed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from mlflow_server import MlflowServer  # tests/mlflow_server.py

pytestmark = pytest.mark.integration

# A job that starts more worker processes than the raylet expects: with one CPU (its
# startup concurrency, 1) and no IO workers (which the raylet does not count), 5 idle
# actors pass its 4x threshold. It waits for the warning in its log (Ray delivers it late).
MANY_WORKERS = """
import time
import ray
from conceptual import logs, runtime

with logs.job_output("notices") as log:
    runtime.init_ray(num_cpus=1)

    @ray.remote(num_cpus=0)
    class Idle:
        def ready(self):
            return True

    actors = [Idle.remote() for _ in range(5)]
    ray.get([a.ready.remote() for a in actors])
    deadline = time.monotonic() + 30
    while "worker processes have been started" not in log.read_text():
        if time.monotonic() > deadline:
            break
        time.sleep(0.5)
    print(f"log {log}")
"""


# A job whose run is on a tracking server (MLflow prints a run's links only for one).
RUN_ON_A_SERVER = """
from conceptual import logs, tracking

with logs.job_output("links") as log, tracking.start_run("links"):
    pass
print(f"log {log}")
"""


def run_job(tmp_path, script: str, **env: str) -> subprocess.CompletedProcess:
    env = {**{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}, **env}
    env["CONCEPTUAL_HOME"] = str(tmp_path)
    return subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_raylet_warning_goes_to_the_log_file_not_the_terminal(tmp_path):
    result = run_job(tmp_path, MANY_WORKERS, RAY_max_io_workers="0")
    assert result.returncode == 0, result.stderr[-3000:]
    terminal = result.stdout + result.stderr
    assert "(raylet)" not in terminal, terminal[-3000:]
    log = result.stdout.split("log ", 1)[1].strip()
    text = open(log).read()
    assert "(raylet)" in text and "worker processes have been started" in text


@pytest.mark.slow  # an MLflow server (about a minute); the raylet's lines stay in the default run
def test_mlflows_run_links_stay_off_the_terminal(tmp_path, free_port):
    server = MlflowServer(tmp_path, free_port(), str(tmp_path / "artifacts")).start()
    try:
        result = run_job(tmp_path, RUN_ON_A_SERVER, MLFLOW_TRACKING_URI=server.url)
    finally:
        server.stop()
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("log "), result.stdout  # no `🏃 View run ...` before it
