"""The Makefile's housekeeping targets on a private state folder: clean-outputs removes
checkpoints and outputs and keeps the MLflow database, its artifacts and the ratings."""

from __future__ import annotations

import os
import subprocess

import pytest


def test_clean_outputs_keeps_the_tracking_store(repo, tmp_path):
    home, outputs = tmp_path / "home", tmp_path / "out"
    removed = [home / "train" / "run" / "checkpoint_000001", home / "models" / "run", outputs / "x"]
    kept = [
        home / "mlflow.db",
        home / "mlartifacts" / "1" / "model.safetensors",
        home / "ratings.db",
    ]
    for folder in removed:
        folder.mkdir(parents=True)
    for file in kept:
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(b"precious")

    env = {**os.environ, "CONCEPTUAL_HOME": str(home)}
    args = ["make", "-s", "clean-outputs", f"OUTPUTS={outputs}"]
    result = subprocess.run(args, cwd=repo, env=env, capture_output=True, text=True, timeout=120)

    assert result.returncode == 0, result.stderr
    assert all(f.read_bytes() == b"precious" for f in kept)
    assert not (home / "train").exists() and not (home / "models").exists()
    assert not outputs.exists()


@pytest.mark.slow  # a server's start: 10 s on an idle machine
def test_mlflow_ui_prints_its_address_once_it_answers(repo, tmp_path, free_port):
    import json
    import signal
    import urllib.request

    port = free_port()
    env = {**os.environ, "CONCEPTUAL_HOME": str(tmp_path), "MLFLOW_PORT": str(port)}
    env.pop("MLFLOW_TRACKING_URI", None)
    ui = subprocess.Popen(
        ["bash", "scripts/mlflow_ui.sh"],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        line = ui.stdout.readline()
        assert line.startswith(f"MLflow UI: http://127.0.0.1:{port}"), line
        search = f"http://127.0.0.1:{port}/api/2.0/mlflow/experiments/search?max_results=5"
        with urllib.request.urlopen(search, timeout=10) as answer:  # answering already
            assert "experiments" in json.load(answer)
    finally:
        os.killpg(ui.pid, signal.SIGTERM)
        ui.wait(timeout=30)
    assert (tmp_path / "mlflow.db").exists()  # the platform's store, not ./mlflow.db


@pytest.mark.slow  # MLflow's CLI creating a store: half a minute
def test_make_mlflow_runs_the_cli_on_the_platform_store(repo, tmp_path):
    env = {**os.environ, "CONCEPTUAL_HOME": str(tmp_path)}
    env.pop("MLFLOW_TRACKING_URI", None)
    args = ["make", "-s", "mlflow", "ARGS=experiments search"]
    result = subprocess.run(args, cwd=repo, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "Default" in result.stdout and (tmp_path / "mlflow.db").exists()
    assert not (repo / "mlflow.db").exists()


def test_test_fast_runs_the_unit_tests_alone(repo):
    """`make test-fast` is the README's "unit tests alone": tests/unit, not every folder
    with a marker filter (which ran integration tests left unmarked, 9 minutes)."""
    result = subprocess.run(
        ["make", "-n", "test-fast"], cwd=repo, capture_output=True, text=True, timeout=60
    )
    pytest_line = next(line for line in result.stdout.splitlines() if "pytest" in line)
    assert pytest_line.split()[-1] == "tests/unit", pytest_line


def test_the_readme_crawl_is_not_tracked(repo):
    """The README's crawl writes crawl/site.warc.gz in the working tree: git ignores it."""
    result = subprocess.run(
        ["git", "check-ignore", "-q", "crawl/site.warc.gz"], cwd=repo, timeout=60
    )
    assert result.returncode == 0
