"""Captioner training on a local Ray (one worker, two workers, resuming after a worker dies),
then the jobs around it: train and register, evaluate, compare variants. The features are
made up: four kinds of image, each with its own feature centre and its own captions, so a
tiny model learns them in a few epochs."""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
import signal
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from waiting import wait_until  # tests/waiting.py

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


# The same kinds in Chinese, as a Chinese import writes captions (words joined by spaces),
# each with a fluency score: the first caption fluent, the second not.
KINDS_ZH = [
    ("一只 狗 在 草地 上", "一只 棕色 的 狗 在 草地 上 跑"),
    ("一只 猫 在 沙发 上", "一只 小 猫 在 沙发 上 睡觉"),
    ("一条 船 在 湖 上", "一条 白色 的 船 在 湖 上 航行"),
    ("一辆 车 在 路 上", "一辆 红色 的 车 在 路 上 行驶"),
]
FLUENCY_ZH = (0.9, 0.3)


def write_features(
    directory, kinds=KINDS, language=None, fluency=(None, None), held_out="val"
) -> str:
    """24 images x 2 captions (one row per caption record, centre crop only): 16 images
    (32 rows) train, 8 `held_out`. The captions of `kinds`, with `language` and the
    captions' `fluency` scores (by caption number) as a Chinese import's features carry
    them. The same seed gives every call the same images."""
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(len(KINDS), CHANNELS))
    rows = []
    for kind, captions in enumerate(kinds):
        for image in range(IMAGES_PER_KIND):
            grid = (centres[kind] + 0.3 * rng.normal(size=(CELLS, CELLS, CHANNELS))).astype(
                np.float32
            )
            split = held_out if image < VAL_IMAGES_PER_KIND else "train"
            for n, caption in enumerate(captions):
                rows.append(
                    {
                        "id": f"{kind}-{image}-{n}",
                        "image_id": f"{kind}-{image}",
                        "split": split,
                        "caption": caption,
                        "crop": 0,
                        "pooled": grid.mean(axis=(0, 1)),
                        "grid": grid.ravel(),
                        "grid_shape": [CELLS, CELLS, CHANNELS],
                        "language": language,
                        "fluency": fluency[n],
                    }
                )
    features = directory / "features"
    features.mkdir(parents=True)
    table = pa.Table.from_pylist(rows, schema=FEATURES)
    pq.write_table(table, features / "part-0.parquet", row_group_size=16)
    summary = {"model": "efficientnet-lite0", "image_size": 32 * CELLS, "grid": CELLS}
    (directory / "features.json").write_text(json.dumps(summary))
    (directory / "_SUCCESS").write_text("{}")  # written last, as the features job does
    return str(directory)


@pytest.fixture(scope="module")
def features_uri(tmp_path_factory) -> str:
    return write_features(tmp_path_factory.mktemp("train-features"))


def tiny_config(model=None, **overrides):
    """A config for a tiny model; `model` updates its model.* keys."""
    from conceptual.pipelines.families.captioner.train_captioner import CaptionerTrainConfig

    tiny = {"d_model": 32, "layers": 1, "heads": 2, "ffn": 64, "dropout": 0.0}
    settings = {
        "model": {**tiny, **(model or {})},
        "min_count": 1,
        "min_eval_size": 1,  # the champion rule on these few dev photos, not the warning
        "optimizer": "adamw",
        "lr": 0.01,
        "batch_size": 8,
        "epochs": 3,
        # METEOR starts Java for seconds each epoch; the first test alone scores it.
        "eval_metrics": ["CIDEr", "BLEU-1", "BLEU-4", "ROUGE-L"],
        "beam": 2,
        "cpus_per_worker": 0.5,
        "max_failures": 1,
        "experiment": "test-captioning",
    }
    return CaptionerTrainConfig(**{**settings, **overrides})


def logged_table(run_id: str, artifact: str):
    """A table the run logged with mlflow.log_table, as a DataFrame."""
    from mlflow import MlflowClient

    client = MlflowClient()
    experiment_id = client.get_run(run_id).info.experiment_id
    return client.load_table(experiment_id, artifact, run_ids=[run_id])


def metric_steps(run_id: str, name: str) -> list[int]:
    from mlflow import MlflowClient

    return sorted(m.step for m in MlflowClient().get_metric_history(run_id, name))


def test_one_worker_trains_logs_and_saves_the_best_model(ray_local, platform_home, features_uri):
    from mlflow import MlflowClient

    from conceptual.metrics import find_java
    from conceptual.models.saving import load
    from conceptual.pipelines.families.captioner.train_captioner import EVAL_METRICS, RECIPE
    from conceptual.pipelines.training.training import train

    handler = signal.getsignal(signal.SIGINT)
    result = train(RECIPE, tiny_config(eval_metrics=EVAL_METRICS), features_uri)
    # Ray Train installs its own SIGINT handler; one Ctrl-C must still stop the process.
    assert signal.getsignal(signal.SIGINT) is handler

    history = result["history"]
    assert [h["epoch"] for h in history] == [1, 2, 3]
    assert history[-1]["loss"] < history[0]["loss"]
    assert result["best"]["CIDEr"] == max(h["CIDEr"] for h in history)

    run = MlflowClient().get_run(result["run_id"])
    assert run.data.params["model.architecture"] == "transformer"
    assert run.data.params["eval_images"] == "8"  # 8 val images, each with 2 references
    assert {"loss", "CIDEr", "BLEU-4", "ROUGE-L"} <= set(run.data.metrics)
    # the registered (best) epoch's scores, the runs table's columns to sort by
    assert run.data.metrics["best.CIDEr"] == result["best"]["CIDEr"]
    assert run.data.metrics["best.epoch"] == result["best"]["epoch"]
    if find_java():
        assert "METEOR" in run.data.metrics
    assert metric_steps(result["run_id"], "CIDEr") == [1, 2, 3]  # epochs counted from 1
    steps = metric_steps(result["run_id"], "loss")
    assert steps == list(range(len(steps))) and len(steps) == 3 * 4  # 32 train rows, batch 8
    artifacts = {a.path for a in MlflowClient().list_artifacts(result["run_id"], "model")}
    assert "model/config.json" in artifacts and "model/model.safetensors" in artifacts
    top = {a.path for a in MlflowClient().list_artifacts(result["run_id"])}
    assert {"learning_curve.png", "config.yaml", "samples.json"} <= top
    samples = logged_table(result["run_id"], "samples.json")
    assert len(samples) == 8 and set(samples.columns) == {"id", "generated", "references"}

    saved = load(result["model_dir"])
    model, vocab = saved.model, saved.vocab
    assert model.config.feature_dim == CHANNELS and "dog" in vocab.tokens
    # The features' CNN and image size travel with the model, for captioning images.
    saved = json.loads((Path(result["model_dir"]) / "config.json").read_text())
    assert saved["features"] == {"model": "efficientnet-lite0", "image_size": 256}


@pytest.mark.slow  # two workers (42 s): the default run keeps test_input_path's two-worker split
def test_two_workers_train_data_parallel(ray_local, platform_home, features_uri):
    import mlflow

    from conceptual.pipelines.families.captioner.train_captioner import RECIPE
    from conceptual.pipelines.training.training import train

    config = tiny_config({"architecture": "rnn"}, workers=2, epochs=1, grad_accumulation=2)
    result = train(RECIPE, config, features_uri)

    assert [h["epoch"] for h in result["history"]] == [1]
    params = mlflow.MlflowClient().get_run(result["run_id"]).data.params
    assert params["model.architecture"] == "rnn"
    assert not {"model.heads", "model.ffn"} & set(params)
    # Each worker reads half of the 32 train rows: two batches of 8 per epoch, whose
    # gradients accumulate (DDP synchronizes only the second) into one optimizer step.
    assert metric_steps(result["run_id"], "loss") == [0]
    assert result["best"]["CIDEr"] >= 0


@pytest.mark.slow
@pytest.mark.faults  # a fault test (51 s): make test-faults; test_resume's text run resumes by default
def test_a_killed_worker_resumes_from_the_latest_checkpoint(
    ray_local, platform_home, features_uri, tmp_path, monkeypatch
):
    from conceptual.pipelines.families.captioner.train_captioner import RECIPE
    from conceptual.pipelines.training.training import FAIL_AT_EPOCH_ENV, FAIL_MARKER_ENV, train

    marker = tmp_path / "failed-once"
    monkeypatch.setenv(FAIL_AT_EPOCH_ENV, "3")
    monkeypatch.setenv(FAIL_MARKER_ENV, str(marker))

    result = train(RECIPE, tiny_config({"feature_map": "1x1"}, lr_schedule="cosine"), features_uri)

    assert marker.exists()  # the worker did die during epoch 3 (of 3)
    assert [h["epoch"] for h in result["history"]] == [1, 2, 3]
    # The learning-rate schedule carries on where it was: epoch 3 runs at its own rate.
    cosine = [0.01 * (1 + math.cos(math.pi * epoch / 3)) / 2 for epoch in range(3)]
    assert [h["lr"] for h in result["history"]] == pytest.approx(cosine)
    # Resumed from a checkpoint, not restarted: epoch 1 ran once. (Epoch 2 may have run
    # twice, when its report was not yet collected as the worker died: see the module.)
    epochs = metric_steps(result["run_id"], "CIDEr")
    assert epochs.count(1) == 1 and sorted(set(epochs)) == [1, 2, 3]
    assert metric_steps(result["run_id"], "loss").count(0) == 1


@pytest.mark.slow  # 37 s; the seeded draw itself: tests/unit/training/test_retrieval_data.py
def test_train_fraction_trains_on_a_seeded_draw_of_the_train_images(
    ray_local, platform_home, features_uri
):
    """Figure 3's runs on part of the data: half the 16 train images, each with both its
    captions (16 of the 32 rows: 2 steps of 8), the dev set whole; the draw is the
    retriever's (splits.drawn_subset over the sorted ids, by seed)."""
    from mlflow import MlflowClient

    from conceptual.pipelines.families.captioner.train_captioner import RECIPE
    from conceptual.pipelines.features.features_data import drawn_train, feature_files
    from conceptual.pipelines.training.training import train
    from conceptual.splits import drawn_subset

    config = tiny_config({"feature_map": "1x1"}, epochs=1, train_fraction=0.5)
    result = train(RECIPE, config, features_uri)

    params = MlflowClient().get_run(result["run_id"]).data.params
    assert params["train_images"] == "8" and params["eval_images"] == "8"
    assert metric_steps(result["run_id"], "loss") == [0, 1]
    images, captions = drawn_train(feature_files(features_uri), features_uri, 0.5, config.seed)
    train_ids = [f"{k}-{i}" for k in range(4) for i in range(VAL_IMAGES_PER_KIND, IMAGES_PER_KIND)]
    assert images == sorted(drawn_subset(train_ids, 0.5, config.seed)) and len(captions) == 16


@pytest.fixture
def tracking_server(tmp_path, free_port, monkeypatch):
    """A real `mlflow server` the run logs to (MLFLOW_TRACKING_URI), which the test may stop
    and start again."""
    from mlflow_server import MlflowServer  # tests/mlflow_server.py

    server = MlflowServer(tmp_path, free_port(), str(tmp_path / "artifacts")).start()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", server.url)
    yield server
    server.stop()


def logged_epochs(server) -> int:
    """Epochs whose metrics reached the server's database."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(server.folder / "mlflow.db")) as db:
        return db.execute("SELECT count(*) FROM metrics WHERE key = 'epoch'").fetchone()[0]


def checkpointed_epochs(storage: Path) -> int:
    """The most epochs any checkpoint under `storage` holds (rank 0 writes one per epoch)."""
    done = 0
    for progress in storage.glob("**/progress.json"):
        with contextlib.suppress(OSError, ValueError):  # one being written
            done = max(done, json.loads(progress.read_text())["epochs_done"])
    return done


def stop_during_training(server, storage: Path, epochs: int, back: bool) -> threading.Thread:
    """Kill the server (as a crash does) once the first epoch is logged; with `back`, start
    it again once every epoch is trained (the run logged none of the others meanwhile)."""

    def outage() -> None:
        wait_until(lambda: logged_epochs(server) >= 1, "the first epoch's metrics")
        server.stop(signal.SIGKILL)
        if back:
            wait_until(lambda: checkpointed_epochs(storage) == epochs, "the last epoch", 300)
            server.start()

    thread = threading.Thread(target=outage, daemon=True)
    thread.start()
    return thread


@pytest.mark.faults
@pytest.mark.slow
def test_a_tracking_server_down_during_training_costs_no_metric_and_no_model(
    ray_local, platform_home, features_uri, tracking_server, tmp_path
):
    from mlflow import MlflowClient

    from conceptual.pipelines.families.captioner.train_captioner import RECIPE
    from conceptual.pipelines.training.training import train

    epochs, storage = 6, tmp_path / "train"
    config = tiny_config({"feature_map": "1x1"}, epochs=epochs, storage=str(storage))
    outage = stop_during_training(tracking_server, storage, epochs, back=True)
    result = train(RECIPE, config, features_uri)
    outage.join(5)
    assert not outage.is_alive()

    run = MlflowClient().get_run(result["run_id"])
    assert run.info.status == "FINISHED"
    # Epochs 2-6 were trained while the server was down; every metric reached it after.
    assert metric_steps(result["run_id"], "CIDEr") == list(range(1, epochs + 1))
    assert metric_steps(result["run_id"], "loss") == list(range(epochs * 4))
    artifacts = {a.path for a in MlflowClient().list_artifacts(result["run_id"], "model")}
    assert "model/model.safetensors" in artifacts


@pytest.mark.faults
@pytest.mark.slow
def test_a_tracking_server_that_stays_down_fails_the_run_with_the_model_saved(
    ray_local, platform_home, features_uri, tracking_server, tmp_path, monkeypatch
):
    from conceptual.pipelines.families.captioner.train_captioner import RECIPE
    from conceptual.pipelines.training.training import train
    from conceptual.storage import TrackingUnreachable
    from conceptual.tracking import WAIT_ENV

    monkeypatch.setenv(WAIT_ENV, "3")
    epochs, storage = 3, tmp_path / "train"
    config = tiny_config({"feature_map": "1x1"}, epochs=epochs, storage=str(storage))
    stop_during_training(tracking_server, storage, epochs, back=False)
    with pytest.raises(TrackingUnreachable, match="has not answered for 3 s") as stopped:
        train(RECIPE, config, features_uri)
    saved = Path(re.search(r"saved at (\S+) \(", str(stopped.value)).group(1))
    assert (saved / "model.safetensors").is_file()


JOB_MODEL = "captioner-job-test"


def job_overrides(**changes) -> list[str]:
    """The tiny config as the command line gives it: model.d_model=32 ..."""
    from conceptual.config import flatten

    settings = flatten(tiny_config(**changes))
    del settings["eval_metrics"]
    return [f"{k}={v}" for k, v in settings.items() if v is not None] + ["eval_metrics=[CIDEr]"]


@pytest.fixture(scope="module")
def train_job_output(ray_local, platform_home, features_uri):
    from conceptual.jobs import train_captioner

    # Three epochs: after one, dev CIDEr is 0, and a zero score makes no champion; after two
    # it was 0 too in one full run of several (the input path draws a new block order each
    # epoch, unseeded), which left the tests below without a champion.
    argv = ["--features", features_uri, "--model-name", JOB_MODEL, *job_overrides(epochs=3)]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = train_captioner.main(argv)
    return code, out.getvalue()


def test_train_job_registers_and_crowns_the_first_model(train_job_output, platform_home):
    """The job end to end: train, register with the variant tag, the champion rule, and a
    model URI that resolves to a loadable model."""
    import mlflow

    from conceptual.models.saving import load
    from conceptual.registry import resolve

    code, out = train_job_output
    assert code == 0
    assert "champion: first_champion" in out
    version = mlflow.MlflowClient().get_model_version_by_alias(JOB_MODEL, "champion")
    assert version.tags["variant"] == "transformer-8x8"
    saved = load(resolve(f"models:/{JOB_MODEL}@champion"))
    model, vocab = saved.model, saved.vocab
    assert len(vocab) == model.config.vocab_size
    # What a finished run leaves on disk: the model, not its checkpoints or optimizer state.
    run_id = version.run_id
    local_copy = Path(re.search(r"^model:\s+(\S+)", out, re.M).group(1)).parent
    assert (local_copy / "model").is_dir() and not (local_copy / "optimizer.pt").exists()
    assert not list((platform_home / "train").glob(f"*{run_id}"))


def test_evaluate_job_scores_the_champion_beside_the_baseline(
    train_job_output, features_uri, capsys, tmp_path
):
    import json

    import mlflow

    from conceptual.jobs import evaluate_captioner
    from conceptual.registry import score_tag

    model = f"models:/{JOB_MODEL}@champion"
    argv = [
        "--model",
        model,
        "--features",
        features_uri,
        "--split",
        "val",
        "metrics=[CIDEr,BLEU-4]",
        "--results-json",
        str(tmp_path / "results.json"),
        "--json",
    ]
    assert evaluate_captioner.main(argv) == 0
    out = capsys.readouterr().out
    result = json.loads(out[: out.index("\n}") + 2])
    assert result["images"] == 8
    # the COCO results JSON (COCO.loadRes's input): one caption per image, by image_id
    results = json.loads((tmp_path / "results.json").read_text())
    assert [sorted(r) for r in results] == [["caption", "image_id"]] * 8
    assert len({r["image_id"] for r in results}) == 8 and all(r["caption"] for r in results)
    assert mlflow.artifacts.load_dict(f"runs:/{result['run_id']}/results.json") == results
    # Each score has its 95% bootstrap interval over the images beside it.
    intervals = {f"{m}.ci95_{end}" for m in ("CIDEr", "BLEU-4") for end in ("low", "high")}
    assert set(result["scores"]) == {"CIDEr", "BLEU-4", *intervals}
    for metric in ("CIDEr", "BLEU-4"):
        low, high = result["scores"][f"{metric}.ci95_low"], result["scores"][f"{metric}.ci95_high"]
        assert low <= result["scores"][metric] <= high
    # The made-up features put every image of a kind near its centre: the nearest training
    # image has the right captions, so the baseline is strong here.
    assert result["baseline"]["CIDEr"] > 1.0
    client = mlflow.MlflowClient()
    version = client.get_model_version_by_alias(JOB_MODEL, "champion")
    assert result["version"] == str(version.version)
    assert float(version.tags[score_tag(result["eval_set"])]) == result["scores"]["CIDEr"]
    run = client.get_run(result["run_id"])
    assert run.data.tags["job"] == "evaluate_captioner"
    assert run.data.metrics["baseline.CIDEr"] == result["baseline"]["CIDEr"]
    assert run.data.metrics["CIDEr.ci95_low"] == result["scores"]["CIDEr.ci95_low"]
    assert "baseline.CIDEr.ci95_high" in run.data.metrics
    samples = logged_table(result["run_id"], "samples.json")
    assert set(samples.columns) == {"id", "generated", "baseline", "references"}


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--model", "models:/no-such-model@champion", "--split", "val"], "cannot resolve"),
        (["--model", f"models:/{JOB_MODEL}@champion", "--split", "test"], "no 'test' rows"),
        (["--model", f"models:/{JOB_MODEL}/1", "beam=zero"], "invalid CaptionerEvalConfig"),
    ],
)
def test_evaluate_job_refuses_clearly(train_job_output, features_uri, capsys, argv, message):
    from conceptual.jobs import evaluate_captioner

    assert evaluate_captioner.main([*argv, "--features", features_uri]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.slow  # two trainings; the submitted compare job runs by default (tests/e2e)
def test_compare_job_trains_variants_as_children_of_one_comparison_run(
    ray_local, platform_home, features_uri, capsys
):
    import mlflow

    from conceptual.jobs import compare_captioners

    name = "captioner-compare-test"
    variants = "rnn-1x1,transformer-8x8"
    overrides = job_overrides(epochs=1, experiment="test-comparison")
    argv = ["--features", features_uri, "--variants", variants, "--model-name", name, *overrides]
    assert compare_captioners.main(argv) == 0
    out = capsys.readouterr().out
    assert "| variant | CIDEr |" in out and "| p vs best |" in out
    assert "variant 1/2 rnn-1x1" in out and "variant 2/2 transformer-8x8" in out

    client = mlflow.MlflowClient()
    experiment = client.get_experiment_by_name("test-comparison")
    [parent] = client.search_runs([experiment.experiment_id], "tags.job = 'compare_captioners'")
    children = client.search_runs(
        [experiment.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'"
    )
    assert sorted(run.data.tags["variant"] for run in children) == ["rnn-1x1", "transformer-8x8"]
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"comparison.json", "comparison.md", "comparison.png"} <= artifacts
    table = logged_table(parent.info.run_id, "comparison.json")
    assert list(table["CIDEr"]) == sorted(table["CIDEr"], reverse=True)
    assert parent.data.tags["best_variant"] == table["variant"][0]
    # Dev CIDEr with its interval; the runner-up's paired p-value against the winner.
    assert (table["CIDEr.ci95_low"] <= table["CIDEr"]).all()
    p_values = table["CIDEr.p_vs_best"]
    assert p_values.isna()[0] and 0 < p_values[1] <= 1
    # Only the comparison's winner becomes a registry version (--register all: each).
    versions = client.search_model_versions(f"name = '{name}'")
    assert [v.tags["variant"] for v in versions] == [table["variant"][0]]
    champion = client.get_model_version_by_alias(name, "champion")
    assert champion.tags["variant"] == table["variant"][0]  # ties keep the first trained


def test_compare_job_refuses_an_unknown_variant_before_training(features_uri, capsys):
    from conceptual.jobs import compare_captioners

    assert compare_captioners.main(["--features", features_uri, "--variants", "cnn-4x4"]) == 2
    assert "unknown variant 'cnn-4x4'" in capsys.readouterr().err


def tiny_fluency_model(directory):
    """An untrained fluency classifier, saved: its scores are numbers in [0, 1]."""
    from conceptual.fluency.model import VIEWS, FluencyConfig, FluencyModel
    from conceptual.models.saving import save_fluency
    from conceptual.models.vocab import Vocabulary

    words = Vocabulary.build(["一只 狗 在 草地 上", "dog grass"], min_count=1)
    config = FluencyConfig(vocab_sizes=dict.fromkeys(VIEWS, len(words)), embed_dim=8, hidden=8)
    return save_fluency(FluencyModel(config), dict.fromkeys(VIEWS, words), directory)


@pytest.mark.slow  # 40 s; the strategies: tests/unit/fluency/test_fluency_strategies.py, a Chinese run: the recipe's test
def test_chinese_captioner_with_rejection_sampling_registers_as_captioner_zh(
    ray_local, platform_home, features_uri, tmp_path
):
    """language=zh on scored Chinese features: trained with rejection sampling, saved with
    its language, registered as captioner-zh, scored on words and on characters beside the
    baseline; features in another language, or unscored for a strategy, are refused."""
    import mlflow

    from conceptual.models.saving import load
    from conceptual.pipelines.families.captioner.evaluate_captioner import (
        CaptionerEvalConfig,
        evaluate,
    )
    from conceptual.pipelines.families.captioner.train_captioner import RECIPE
    from conceptual.pipelines.training.training import publish, train
    from conceptual.registry import resolve

    chinese = write_features(tmp_path / "zh", KINDS_ZH, "zh", FLUENCY_ZH)
    config = tiny_config(language="zh", fluency="rejection", epochs=2)
    result = train(RECIPE, config, chinese)
    run = mlflow.MlflowClient().get_run(result["run_id"])
    assert run.data.metrics["train_fluent_share"] == 0.5
    assert run.data.params["fluency"] == "rejection"
    decision = publish(RECIPE, result, config)
    version = mlflow.MlflowClient().get_model_version_by_alias("captioner-zh", "champion")
    assert str(version.version) == str(decision["version"])
    saved = load(resolve("models:/captioner-zh@champion"))
    model, vocab = saved.model, saved.vocab
    assert model.config.language == "zh" and "狗" in vocab.tokens

    fluency = str(tiny_fluency_model(tmp_path / "fluency"))
    scores = evaluate(
        "models:/captioner-zh@champion",
        chinese,
        CaptionerEvalConfig(
            split="val", metrics=["CIDEr", "BLEU-4", "METEOR"], samples=2, fluency_model=fluency
        ),
    )
    metrics = {"CIDEr", "BLEU-4", "char.CIDEr", "char.BLEU-4", "fluency", "fluent_share"}
    intervals = {f"{m}.ci95_{end}" for m in metrics for end in ("low", "high")}
    assert set(scores["scores"]) == metrics | intervals
    assert 0 <= scores["scores"]["fluency"] <= 1
    assert "English" in scores["unavailable"]["METEOR"]
    assert {"CIDEr", "char.CIDEr", "fluency"} <= set(scores["baseline"])

    with pytest.raises(ValueError, match=r"writing 'zh' scored on captions in \['en'\]"):
        evaluate("models:/captioner-zh@champion", features_uri, CaptionerEvalConfig(split="val"))
    with pytest.raises(ValueError, match=r"captions are in \['en'\], not language=zh"):
        train(RECIPE, tiny_config(language="zh"), features_uri)
    unscored = write_features(tmp_path / "unscored", KINDS_ZH, "zh")
    with pytest.raises(ValueError, match="fluency=weighted needs a fluency score"):
        train(RECIPE, tiny_config(language="zh", fluency="weighted"), unscored)


@pytest.mark.slow  # five trainings and their evaluations: minutes
def test_compare_fluency_scores_six_approaches_in_one_experiment(
    ray_local, platform_home, features_uri, tmp_path
):
    """Late translation (an English captioner, its captions translated by Flickr8k-CN's
    provided translations), its fluency re-ranking, two fluency strategies and the
    nearest-neighbour baseline, scored against a test set of Chinese references with a
    (tiny, untrained) fluency classifier; the best Chinese captioner is registered."""
    import json

    import mlflow

    from conceptual.fluency.translation import ProvidedTranslations
    from conceptual.pipelines.families.fluency.compare_fluency import (
        FluencyComparisonConfig,
        compare,
    )

    chinese = write_features(tmp_path / "zh", KINDS_ZH, "zh", FLUENCY_ZH)
    references = write_features(tmp_path / "refs", KINDS_ZH, "zh", held_out="test")
    cn = tmp_path / "cn"
    cn.mkdir()
    pairs = [(en, zh) for kind, kind_zh in zip(KINDS, KINDS_ZH) for en, zh in zip(kind, kind_zh)]
    (cn / "flickr8kenc.caption.txt").write_text(
        "".join(f"{i}.jpg#enc#0 {en} .\n" for i, (en, _) in enumerate(pairs))
    )
    (cn / "flickr8kzhb.caption.txt").write_text(
        "".join(f"{i}.jpg#zhb#0 {zh.replace(' ', '')}。\n" for i, (_, zh) in enumerate(pairs))
    )
    fluency_dir = tiny_fluency_model(tmp_path / "fluency")

    train = tiny_config(model={"architecture": "rnn", "feature_map": "1x1"}, epochs=2)
    config = FluencyComparisonConfig(
        train=train.model_copy(update={"eval_metrics": ["CIDEr"]}),
        strategies=["none", "rejection"],
        rerank=2,
        beam=2,
        fluency_model=str(fluency_dir),
        experiment="test-fluency",
    )
    result = compare(
        chinese,
        {"refs": references},
        config,
        english_features=features_uri,
        translator=ProvidedTranslations(cn, nearest=True),
        manual_features=write_features(tmp_path / "manual", KINDS_ZH, "zh"),
    )

    rows = {row["approach"]: row for row in result["rows"]}
    assert list(rows) == [
        "late translation",
        "late translation rerank",
        "without fluency",
        "rejection sampling",
        "Manual Flickr8k-cn",
        "nearest neighbour",
    ]
    assert rows["Manual Flickr8k-cn"]["version"] is None  # not trained on translations
    for row in rows.values():
        assert {"refs.BLEU-4", "refs.ROUGE-L", "refs.CIDEr", "refs.char.CIDEr"} <= set(row)
        assert 0 <= row["fluency"] <= 1 and 0 <= row["fluent_share"] <= 1
    # The nearest training image has the right Chinese captions: a strong baseline here.
    assert rows["nearest neighbour"]["refs.CIDEr"] > 1.0
    client = mlflow.MlflowClient()
    artifacts = {a.path for a in client.list_artifacts(result["run_id"])}
    assert {"comparison.json", "comparison.md", "comparison.png", "captions.json"} <= artifacts
    captions = json.loads(mlflow.artifacts.load_text(f"runs:/{result['run_id']}/captions.json"))
    # Late translation writes Chinese words, translated from the English captioner's.
    translated = {c.replace(" ", "") for c in captions["late translation"].values()}
    assert translated <= {zh.replace(" ", "") for _, zh in pairs}, translated
    children = client.search_runs(
        [client.get_experiment_by_name("test-fluency").experiment_id],
        f"tags.`mlflow.parentRunId` = '{result['run_id']}'",
    )
    assert len(children) == 4  # the English captioner, two Chinese ones and the manual one
    registered = [row for row in rows.values() if row["version"] is not None]
    assert len(registered) == 1 and registered[0]["approach"] in {
        "without fluency",
        "rejection sampling",
    }
    version = client.get_model_version("captioner-zh", registered[0]["version"])
    assert version.run_id == registered[0]["run_id"]


def test_the_fluency_papers_recipe_trains_a_chinese_captioner(
    ray_local, platform_home, repo, tmp_path
):
    """configs/recipes/fluency_captioner.yaml on scored Chinese features (small for the test):
    one LSTM reading the image first, saved and loaded as such, the rate the paper's."""
    import mlflow

    from conceptual.config import load
    from conceptual.models.saving import SavedCaptioner
    from conceptual.models.saving import load as load_model
    from conceptual.pipelines.families.captioner.train_captioner import RECIPE, CaptionerTrainConfig
    from conceptual.pipelines.training.training import train

    chinese = write_features(tmp_path / "zh", KINDS_ZH, "zh", FLUENCY_ZH)
    small = ["model.d_model=32", "min_count=1", "min_eval_size=1", "epochs=2", "beam=2"]
    small += ["eval_metrics=[CIDEr]", "cpus_per_worker=0.5", "experiment=test-captioning"]
    config = load(
        CaptionerTrainConfig, repo / "configs" / "recipes" / "fluency_captioner.yaml", small
    )
    result = train(RECIPE, config, chinese)
    run = mlflow.MlflowClient().get_run(result["run_id"])
    assert run.data.params["model.image_input"] == "first_step"
    assert run.data.params["lr_schedule"] == "exponential_epochs"
    assert run.data.metrics["lr"] == pytest.approx(0.001)
    saved = load_model(result["model_dir"], kind=SavedCaptioner)
    assert saved.model.config.image_input == "first_step" and saved.model.config.l2_normalize
    assert saved.model.core.encoder is None and saved.model.config.language == "zh"
    assert run.data.params["optimizer"] == "sgd"
    assert saved.beam == 2  # the beam its dev scores were decoded at, kept for serving
