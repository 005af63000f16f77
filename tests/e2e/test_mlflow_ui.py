"""MLflow's UI as the place to compare training runs: `make mlflow-ui` over the platform's
store with two training-like runs, read through the REST API the UI uses and in headless
Chromium. docs/images/mlflow-runs.png is this test's screenshot."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.parse
import urllib.request

import pytest

CHROMIUM = shutil.which("chromium")
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None, reason="needs Chromium (Debian: apt-get install chromium)"
    ),
]

# Two runs as training logs them: the first peaks at epoch 2 (the checkpoint registered),
# so its last epoch's CIDEr is below the second run's and its best is above.
TWO_RUNS = """
from conceptual import tracking
from conceptual.pipelines.training.training_metrics import epoch_metrics, log_outcome

for variant, curve in (("rnn-1x1", [5.1, 7.306, 7.027]), ("transformer-1x1", [4.0, 6.2, 7.1])):
    tags = {"job": "train_captioner", "variant": variant}
    with tracking.start_run("captioner", run_name=variant, tags=tags) as run:
        tracking.log_params({"model.architecture": variant.split("-")[0]})
        for epoch, cider in enumerate(curve, 1):
            metrics = {"epoch": epoch, "loss": 1 / epoch, "CIDEr": cider}
            tracking.send_metrics(run.info.run_id, epoch_metrics(epoch, [1 / epoch], metrics))
        best = curve.index(max(curve))
        log_outcome(run.info.run_id, "CIDEr", {"epoch": best + 1, "CIDEr": curve[best]})
print(tracking.ensure_experiment("captioner"))
"""


@pytest.fixture
def mlflow_ui(repo, tmp_path, free_port):
    """`make mlflow-ui`'s script over a store of its own; yields (its URL, the experiment)."""
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    env.update(CONCEPTUAL_HOME=str(tmp_path / "home"), MLFLOW_PORT=str(free_port()))
    made = subprocess.run(
        [sys.executable, "-c", TWO_RUNS], env=env, capture_output=True, text=True, timeout=300
    )
    assert made.returncode == 0, made.stderr[-3000:]
    server = subprocess.Popen(
        ["bash", "scripts/mlflow_ui.sh"],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        line = server.stdout.readline()  # printed once the UI answers (2 minutes at most)
        assert line.startswith("MLflow UI: "), line
        yield line.split()[2], made.stdout.split()[-1]
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)


def api(url: str, path: str, body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"{url}/api/2.0/mlflow/{path}", data=data, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.load(answer)


def test_the_ui_opens_a_training_experiment_on_its_runs_sorted_by_the_best_epoch(
    mlflow_ui, tmp_path
):
    url, experiment_id = mlflow_ui
    experiment = api(url, f"experiments/get?experiment_id={experiment_id}")["experiment"]
    tags = {t["key"]: t["value"] for t in experiment["tags"]}
    assert tags["mlflow.experimentKind"] == "custom_model_development"
    order = {"experiment_ids": [experiment_id], "order_by": ["metrics.`best.CIDEr` DESC"]}
    runs = api(url, "runs/search", order)["runs"]
    assert [r["info"]["run_name"] for r in runs] == ["rnn-1x1", "transformer-1x1"]
    metrics = {m["key"]: m["value"] for m in runs[0]["data"]["metrics"]}
    assert metrics["best.CIDEr"] == 7.306 and metrics["CIDEr"] == 7.027  # best, and last

    # MLflow 3.17's UI opens every experiment in its GenAI view unless told otherwise (its
    # "Model training" switch, or this query): the runs table, sorted by best.CIDEr.
    query = urllib.parse.urlencode(
        {"workflowType": "machine_learning", "orderByKey": "metrics.`best.CIDEr`"}
    )
    page = f"{url}/#/experiments/{experiment_id}/runs?{query}&orderByAsc=false"
    screenshot = tmp_path / "mlflow-runs.png"
    shown = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'chromium'}",
            "--window-size=1600,700",
            "--virtual-time-budget=15000",  # the page's scripts and API calls settle
            f"--screenshot={screenshot}",
            "--dump-dom",
            page,
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert shown.returncode == 0, shown.stderr[-3000:]
    dom = shown.stdout
    assert ">Runs<" in dom and "Traces 0" not in dom
    assert "rnn-1x1" in dom and "transformer-1x1" in dom and "best.CIDEr" in dom
    assert screenshot.stat().st_size > 10_000
