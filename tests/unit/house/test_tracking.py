"""Where MLflow keeps what the platform tracks."""

from __future__ import annotations

import os
import subprocess
import sys

from conceptual.tracking import local_artifact_root
from conceptual.uris import redact

CREATE_EXPERIMENTS = """
import mlflow
from conceptual import tracking
with tracking.start_run("first"):
    mlflow.log_text("x", "a.txt")
tracking.ensure_experiment("second")  # after start_run set MLFLOW_TRACKING_URI itself
for e in mlflow.search_experiments():
    print(e.name, e.artifact_location)
"""


def test_every_experiment_keeps_its_artifacts_in_the_platform_home(tmp_path):
    """Run from an unrelated working directory, as a submitted job is: MLflow's fallback
    would put artifacts in <cwd>/mlruns, which Ray deletes with the job's working copy."""
    home, cwd = tmp_path / "home", tmp_path / "elsewhere"
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    env["CONCEPTUAL_HOME"] = str(home)
    result = subprocess.run(
        [sys.executable, "-c", CREATE_EXPERIMENTS],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    locations = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert set(locations) == {"Default", "first", "second"}
    for location in locations.values():
        assert location.removeprefix("file://").startswith(str(home / "mlartifacts")), location
    assert not (cwd / "mlruns").exists()
    assert list((home / "mlartifacts" / "first").rglob("a.txt"))


def test_a_tracking_server_decides_where_its_artifacts_go():
    assert local_artifact_root("http://127.0.0.1:5000") is None
    assert local_artifact_root("sqlite:////tmp/x.db").endswith("/mlartifacts")


def test_credentials_never_show():
    assert redact("http://user:S3cret@mlflow.internal:5000/") == "http://***@mlflow.internal:5000/"
    assert redact("sqlite:////tmp/mlflow.db") == "sqlite:////tmp/mlflow.db"


def test_experiments_are_model_development_ones_so_mlflow_opens_them_on_runs(platform_home):
    """MLflow 3 takes an experiment without `mlflow.experimentKind` for a GenAI one (traces);
    the platform's are created with it, and one made before gets it when next used."""
    from mlflow import MlflowClient

    from conceptual import tracking

    tracking.configure()
    client = MlflowClient()
    client.create_experiment("kind-older", tags={})
    client.create_experiment("kind-chosen", tags={tracking.KIND_TAG: "genai_development"})
    with tracking.start_run("kind-new"):
        pass
    tracking.ensure_experiment("kind-older")
    tracking.ensure_experiment("kind-chosen")

    def kind(name: str) -> str | None:
        return client.get_experiment_by_name(name).tags.get("mlflow.experimentKind")

    assert kind("kind-new") == kind("kind-older") == "custom_model_development"
    assert kind("kind-chosen") == "genai_development"  # a user's choice stands


def test_a_run_names_its_job_in_the_job_tag_and_old_stage_tagged_runs_still_read(platform_home):
    """`job=` tags the run and names it; a run logged before the tag was `job` (`stage`)
    still says its job through job_of, so lineage and rating tasks read old runs."""
    from mlflow import MlflowClient

    from conceptual import tracking

    tracking.configure()
    with tracking.start_run("job-tag", job="curate") as new:
        pass
    with tracking.start_run("job-tag", tags={tracking.OLD_JOB_TAG: "train_captioner"}) as old:
        pass
    client = MlflowClient()
    new_run, old_run = (client.get_run(r.info.run_id) for r in (new, old))
    assert new_run.data.tags[tracking.JOB_TAG] == "curate"
    assert new_run.info.run_name.startswith("curate 20")
    assert [tracking.job_of(r) for r in (new_run, old_run)] == ["curate", "train_captioner"]
    [found] = client.search_runs([new_run.info.experiment_id], "tags.job = 'curate'")
    assert found.info.run_id == new_run.info.run_id


def test_jobs_starting_together_on_a_fresh_home_share_one_new_database(tmp_path):
    """Jobs submitted side by side to a fresh home each create the local database on their
    first run: each must find the tables made, never fail on one the other just made
    ("table ... already exists")."""
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    env["CONCEPTUAL_HOME"] = str(home)
    start = "import mlflow; from conceptual import tracking; tracking.configure()"
    jobs = [
        subprocess.Popen([sys.executable, "-c", start], env=env, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    errors = [job.communicate(timeout=300)[1] for job in jobs]
    assert [job.returncode for job in jobs] == [0, 0, 0], "\n".join(errors)[-3000:]
