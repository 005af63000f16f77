"""The pipeline job: every stage in order, then a rerun that skips what is done, and a
changed key that reruns its stage and those after it."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def candidates(tmp_path_factory, captioned_folder) -> str:
    """The demo's good photos with captions that fit them, as candidates with their image
    bytes (the import job's output): curation needs no fetch."""
    from conceptual.jobs import import_captions

    root = tmp_path_factory.mktemp("pipeline-input")
    captioned_folder(root / "dataset", captions_per_photo=3)
    assert import_captions.main(["--folder", str(root / "dataset"), "--output", str(root)]) == 0
    return str(root / "candidates")


def settings(output, *extra: str) -> list[str]:
    return [
        f"input={output[0]}",
        f"output={output[1]}",
        "model_name=captioner-pipeline-test",
        "experiment=test-pipeline",
        "curate.entity_frequency.more_than=0",
        "curate.split.train=0.6",
        "curate.split.val=0.2",
        "curate.split.test=0.2",
        "train.model.d_model=32",
        "train.model.layers=1",
        "train.model.heads=2",
        "train.model.ffn=64",
        "train.min_count=1",
        "train.epochs=1",
        "train.batch_size=16",
        "train.eval_metrics=[CIDEr]",
        "train.beam=2",
        "train.cpus_per_worker=0.5",
        "evaluate.metrics=[CIDEr]",
        "evaluate.beam=2",
        *extra,
    ]


def run_job(capsys, args: list[str]) -> dict:
    from conceptual.jobs import pipeline

    assert pipeline.main(args) == 0, capsys.readouterr().err[-3000:]
    out = capsys.readouterr().out
    start = out.rindex("\n{\n") + 1  # the summary, after the stages' own progress lines
    return json.loads(out[start : out.rindex("}") + 1])


def test_stages_run_once_and_a_changed_key_reruns_from_its_stage(
    ray_local, platform_home, candidates, tmp_path, capsys
):
    import mlflow

    paths = (candidates, str(tmp_path / "out"))
    first = run_job(capsys, settings(paths))
    assert [s for s, r in first.items() if r["skipped"]] == []
    assert first["curate"]["result"]["kept"] > 0
    assert str(first["register"]["result"]["version"]) == "1"
    assert "CIDEr" in first["evaluate"]["result"]["scores"]
    assert (tmp_path / "out" / "curated" / "_SUCCESS").exists()
    assert (tmp_path / "out" / "features" / "_SUCCESS").exists()

    again = run_job(capsys, settings(paths))
    assert all(r["skipped"] for r in again.values())
    assert again["train"]["result"] == first["train"]["result"]

    changed = run_job(capsys, settings(paths, "train.epochs=2"))
    assert [s for s, r in changed.items() if not r["skipped"]] == ["train", "register", "evaluate"]
    assert str(changed["register"]["result"]["version"]) == "2"

    # Every stage's run is a child of its pipeline's run, in the pipeline's experiment.
    client = mlflow.MlflowClient()
    experiment = client.get_experiment_by_name("test-pipeline")
    pipelines = client.search_runs([experiment.experiment_id], "tags.stage = 'pipeline'")
    first_run = min(pipelines, key=lambda r: r.info.start_time)
    children = client.search_runs(
        [experiment.experiment_id], f"tags.`mlflow.parentRunId` = '{first_run.info.run_id}'"
    )
    assert {r.data.tags["stage"] for r in children} == {
        "curate",
        "features",
        "train_captioner",
        "evaluate_captioner",
    }


def test_a_stage_list_that_skips_a_stage_is_refused(candidates, tmp_path, capsys):
    from conceptual.jobs import pipeline

    args = settings((candidates, str(tmp_path / "out")), "stages=[curate,train]")
    assert pipeline.main(args) == 2
    assert "prefix" in capsys.readouterr().err
