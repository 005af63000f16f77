"""What makes the pipeline job run a step again: the tracking store for the steps whose
result lives there, and the input's bytes, not only its names, sizes and times."""

from __future__ import annotations

import os

from conceptual.pipelines.pipeline import PipelineConfig, fingerprints, input_fingerprint
from conceptual.pipelines.training.training_metrics import small_eval_warning


def test_another_tracking_store_reruns_only_the_steps_kept_there(monkeypatch):
    config = PipelineConfig(input="in", output="out")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///a.db")
    first = fingerprints(config, "input")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://user:secret@other:5000")
    second = fingerprints(config, "input")
    changed = [step for step in config.steps if first[step] != second[step]]
    assert changed == ["train", "register", "evaluate"]  # curate, features: folders
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://user:other-secret@other:5000")
    assert fingerprints(config, "input") == second  # credentials are no part of it


def test_an_input_rewritten_with_the_same_size_and_time_is_another_input(tmp_path):
    path = tmp_path / "candidates.tsv"
    path.write_text("A dog on the grass\thttp://127.0.0.1/a.jpg\n")
    stat = path.stat()
    before = input_fingerprint(str(tmp_path))
    path.write_text("A cat on the grass\thttp://127.0.0.1/a.jpg\n")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
    assert input_fingerprint(str(tmp_path)) != before


def test_a_small_dev_set_is_named_with_its_size():
    assert small_eval_warning(50, 20, "CIDEr") is None
    few = small_eval_warning(6, 20, "CIDEr")
    assert "holds 6 items" in few and "min_eval_size=20" in few and "champion" in few
    recall = small_eval_warning(8, 5, "mean_R@10")
    assert "R@10 over 8 items is 1 for any model" in recall and "champion" not in recall


def test_a_stage_whose_run_or_version_was_deleted_is_not_skipped(platform_home):
    from mlflow import MlflowClient

    from conceptual.pipelines.pipeline import _still_recorded
    from conceptual.tracking import start_run

    with start_run("test-fingerprints") as run:
        run_id = run.info.run_id
    assert _still_recorded({"run_id": run_id})
    assert not _still_recorded({"run_id": run_id, "name": "no-such-model", "version": "1"})
    MlflowClient().delete_run(run_id)
    assert not _still_recorded({"run_id": run_id})
