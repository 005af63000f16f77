"""Captioner training on a local Ray: one worker, two workers, and resuming after a worker
dies. The features are made up: four kinds of image, each with its own feature centre and
its own captions, so a tiny model learns them in a few epochs."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conceptual.records import FEATURES

pytestmark = pytest.mark.integration

CHANNELS, CELLS = 16, 8
KINDS = [
    ("a dog on the grass", "a brown dog running on the grass"),
    ("a cat on the sofa", "a small cat sleeping on the sofa"),
    ("a boat on the lake", "a white boat sailing on the lake"),
    ("a car on the road", "a red car driving on the road"),
]
IMAGES_PER_KIND, VAL_IMAGES_PER_KIND = 6, 2


def write_features(directory) -> str:
    """24 images x 2 captions (one row per caption record, centre crop only), 8 of them val."""
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(len(KINDS), CHANNELS))
    rows = []
    for kind, captions in enumerate(KINDS):
        for image in range(IMAGES_PER_KIND):
            grid = (centres[kind] + 0.3 * rng.normal(size=(CELLS, CELLS, CHANNELS))).astype(
                np.float32
            )
            split = "val" if image < VAL_IMAGES_PER_KIND else "train"
            for n, caption in enumerate(captions):
                rows.append(
                    {
                        "id": f"{kind}-{image}-{n}",
                        "split": split,
                        "caption": caption,
                        "crop": 0,
                        "pooled": grid.mean(axis=(0, 1)),
                        "grid": grid.ravel(),
                        "grid_shape": [CELLS, CELLS, CHANNELS],
                    }
                )
    features = directory / "features"
    features.mkdir(parents=True)
    table = pa.Table.from_pylist(rows, schema=FEATURES)
    pq.write_table(table, features / "part-0.parquet", row_group_size=16)
    return str(directory)


@pytest.fixture(scope="module")
def features_uri(tmp_path_factory) -> str:
    return write_features(tmp_path_factory.mktemp("train-features"))


def tiny_config(**overrides):
    from conceptual.pipelines.train_captioner import TrainConfig

    settings = {
        "d_model": 32,
        "layers": 1,
        "heads": 2,
        "ffn": 64,
        "dropout": 0.0,
        "min_count": 1,
        "optimizer": "adamw",
        "lr": 0.01,
        "batch_size": 8,
        "epochs": 4,
        "beam": 2,
        "cpus_per_worker": 0.5,
        "max_failures": 1,
        "experiment": "test-captioning",
    }
    return TrainConfig(**{**settings, **overrides})


def metric_steps(run_id: str, name: str) -> list[int]:
    from mlflow import MlflowClient

    return sorted(m.step for m in MlflowClient().get_metric_history(run_id, name))


def test_one_worker_trains_logs_and_saves_the_best_model(ray_local, platform_home, features_uri):
    from mlflow import MlflowClient

    from conceptual.models.saving import load_model
    from conceptual.pipelines.train_captioner import train

    result = train(features_uri, tiny_config())

    history = result["history"]
    assert [h["epoch"] for h in history] == [0, 1, 2, 3]
    assert history[-1]["loss"] < history[0]["loss"]
    assert result["best"]["CIDEr"] == max(h["CIDEr"] for h in history)

    run = MlflowClient().get_run(result["run_id"])
    assert run.data.params["architecture"] == "transformer"
    assert run.data.params["eval_images"] == "8"  # 8 val images, each with 2 references
    assert {"loss", "CIDEr", "BLEU-4", "ROUGE-L"} <= set(run.data.metrics)
    assert metric_steps(result["run_id"], "CIDEr") == [0, 1, 2, 3]
    steps = metric_steps(result["run_id"], "loss")
    assert steps == list(range(len(steps))) and len(steps) >= 4  # every step, once
    artifacts = {a.path for a in MlflowClient().list_artifacts(result["run_id"], "model")}
    assert "model/config.json" in artifacts and "model/model.safetensors" in artifacts
    top = {a.path for a in MlflowClient().list_artifacts(result["run_id"])}
    assert {"learning_curve.png", "config.yaml"} <= top

    model, vocab = load_model(result["model_dir"])
    assert model.config.feature_dim == CHANNELS and "dog" in vocab.tokens


def test_two_workers_train_data_parallel(ray_local, platform_home, features_uri):
    from conceptual.pipelines.train_captioner import train

    result = train(features_uri, tiny_config(workers=2, epochs=2, architecture="rnn"))

    assert [h["epoch"] for h in result["history"]] == [0, 1]
    assert result["best"]["CIDEr"] >= 0


def test_a_killed_worker_resumes_from_the_latest_checkpoint(
    ray_local, platform_home, features_uri, tmp_path, monkeypatch
):
    from conceptual.pipelines.train_captioner import FAIL_AT_EPOCH_ENV, FAIL_MARKER_ENV, train

    marker = tmp_path / "failed-once"
    monkeypatch.setenv(FAIL_AT_EPOCH_ENV, "2")
    monkeypatch.setenv(FAIL_MARKER_ENV, str(marker))

    result = train(features_uri, tiny_config(features="1x1", epochs=4))

    assert marker.exists()  # the worker did die at epoch 2
    assert [h["epoch"] for h in result["history"]] == [0, 1, 2, 3]
    # Resumed, not restarted: no epoch and no step was logged twice.
    assert metric_steps(result["run_id"], "CIDEr") == [0, 1, 2, 3]
    steps = metric_steps(result["run_id"], "loss")
    assert steps == list(range(len(steps)))
