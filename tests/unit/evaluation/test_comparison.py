"""The comparison driver's shared parts: one variant parser for every family, one rule for
which variants are registered, and the driver itself on variants that read their own data,
share a model or train nothing."""

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from conceptual.config import Config, ConfigError
from conceptual.pipelines.evaluation.comparison import (
    Variant,
    check_variants,
    parse_variant,
    to_register,
)
from conceptual.pipelines.families.captioner.compare_captioners import NAMED
from conceptual.pipelines.families.captioner.train_captioner import CaptionerTrainConfig


def test_a_captioner_variant_is_its_name_or_its_overrides():
    shared = CaptionerTrainConfig(epochs=3, experiment="shared")
    name, config = parse_variant("rnn-8x8", shared, NAMED)
    assert name == "rnn-8x8"
    assert (config.model.architecture, config.model.feature_map) == ("rnn", "8x8")
    assert (config.epochs, config.experiment) == (3, "shared")
    name, config = parse_variant("wide: model.d_model=64 model.architecture=rnn", shared, NAMED)
    assert name == "wide" and (config.model.d_model, config.model.architecture) == (64, "rnn")
    assert config.model.feature_map == shared.model.feature_map


def test_an_unknown_captioner_variant_names_the_known_ones():
    with pytest.raises(ConfigError, match="unknown variant 'cnn-4x4'; the variants are rnn-1x1"):
        parse_variant("cnn-4x4", CaptionerTrainConfig(experiment="x"), NAMED)


def test_the_best_all_or_no_variant_is_registered():
    ranked = ["first", "second", "third"]
    assert list(to_register(ranked, "best")) == ["first"]
    assert list(to_register(ranked, "all")) == ranked
    assert list(to_register(ranked, "none")) == []
    with pytest.raises(ConfigError, match="register must be one of"):
        to_register(ranked, "winners")


class Shared(Config):
    experiment: str = "test-comparison"


def test_variants_train_on_their_own_data_share_a_model_or_train_nothing(
    platform_home, monkeypatch
):
    """The driver without Ray (training.train and publish stand-ins): a variant scored on
    another's model, a baseline, a reference point never registered; without a metric the
    rows keep their order, every resampled score has its p-value against its column's best
    and the registered variant is the best by its dev metric."""
    import mlflow

    from conceptual.pipelines.evaluation import comparison

    trained_on, published = [], []

    def train(recipe, config, *data):
        trained_on.append(list(data))
        return {"run_id": f"run-{data[0]}", "best": {"CIDEr": config.dev}}

    def publish(recipe, result, config, name):
        published.append(result["run_id"])
        return {"version": len(published), "reason": "first_champion"}

    monkeypatch.setattr(comparison.training, "train", train)
    monkeypatch.setattr(comparison.training, "publish", publish)

    class Dev(Config):
        dev: float

    rng = np.random.default_rng(0)
    level = {"a": 0.2, "shared": 0.3, "b": 0.5, "reference": 0.9, "baseline": 0.1}

    def score(name, config, result):
        noise = rng.normal(0, 0.01, 50)
        resampled = {"m": level[name] + noise, "n": 1 - level[name] + noise}
        return {k: float(v.mean()) for k, v in resampled.items()}, resampled, name

    how = comparison.Comparison(
        recipe=SimpleNamespace(select_by="CIDEr"),
        job="compare_test",
        metric=None,
        score=score,
        row=lambda t: {"variant": t.name, "run_id": t.result and t.result["run_id"], **t.scores},
        table=lambda rows: " ".join(row["variant"] for row in rows),
        also_logged=("dev",),
        files=lambda trained: {"names.txt": ",".join(t.evaluation for t in trained)},
    )
    variants = [
        Variant("a", Dev(dev=0.7), ["a-data"]),
        Variant("shared", model_of="a"),
        Variant("b", Dev(dev=0.6), ["b-data"]),
        Variant("reference", Dev(dev=0.9), ["ref-data"], registrable=False),
        Variant("baseline"),
    ]
    result = comparison.compare(how, Shared(), variants, {"data": "x"})

    assert trained_on == [["a-data"], ["b-data"], ["ref-data"]]
    rows = result["rows"]
    assert [row["variant"] for row in rows] == ["a", "shared", "b", "reference", "baseline"]
    assert rows[1]["run_id"] == "run-a-data" and rows[4]["run_id"] is None
    assert published == ["run-a-data"]  # the best dev CIDEr of the registrable ones
    assert rows[3]["m.p_vs_best"] is None and rows[4]["n.p_vs_best"] is None  # each column's best
    assert rows[0]["m.p_vs_best"] < 0.05
    run = mlflow.MlflowClient().get_run(result["run_id"])
    assert {"a.m", "a.m.p_vs_best", "baseline.n"} <= set(run.data.metrics)
    assert "best_variant" not in run.data.tags
    assert mlflow.artifacts.load_text(f"runs:/{result['run_id']}/names.txt") == (
        "a,shared,b,reference,baseline"
    )

    # With a metric: ranked by it, its p-values alone, every registrable variant by it.
    published.clear()
    ranked = comparison.compare(replace(how, metric="m"), Shared(), variants, {}, "all")
    rows = ranked["rows"]
    assert [row["variant"] for row in rows] == ["reference", "b", "shared", "a", "baseline"]
    assert published == ["run-b-data", "run-a-data"]
    assert "m.p_vs_best" in rows[1] and "n.p_vs_best" not in rows[1]
    run = mlflow.MlflowClient().get_run(ranked["run_id"])
    assert run.data.tags["best_variant"] == "reference"


def test_a_variant_scored_on_a_model_names_an_earlier_one_that_trains():
    with pytest.raises(ConfigError, match="model_of='a' names no earlier variant"):
        check_variants(
            [Variant("b", model_of="a"), Variant("a", CaptionerTrainConfig(experiment="x"))]
        )
    with pytest.raises(ConfigError, match="two variants are named 'a'"):
        check_variants([Variant("a"), Variant("a")])


def test_a_variant_that_prepares_its_data_has_a_run_its_training_and_scoring_runs_are_under(
    platform_home, monkeypatch
):
    """The ablation's variants: each makes its data in a child run of the comparison run, its
    training and scoring runs are that run's children, and its row's scores land on it."""
    import mlflow

    from conceptual import tracking
    from conceptual.pipelines.evaluation import comparison

    def train(recipe, config, *data):
        with tracking.start_run("test-comparison", job="train") as run:
            pass
        return {"run_id": run.info.run_id, "best": {"m": 0.0}, "data": list(data)}

    monkeypatch.setattr(comparison.training, "train", train)
    prepared = {}

    def preparer(name):
        def prepare(run_id):
            prepared[name] = run_id
            return [f"{name}-features"]

        return prepare

    level = {"low": 0.2, "high": 0.6}

    def score(name, config, result):
        resampled = {"m": level[name] + np.random.default_rng(1).normal(0, 0.01, 50)}
        return {"m": float(resampled["m"].mean())}, resampled, result

    how = comparison.Comparison(
        recipe=SimpleNamespace(select_by="m"),
        job="ablate_test",
        metric="m",
        score=score,
        row=lambda t: {"variant": t.name, "data": t.result["data"], **t.scores},
        table=lambda rows: "",
    )
    variants = [Variant(n, Shared(), prepare=preparer(n), registrable=False) for n in level]
    result = comparison.compare(how, Shared(), variants, {}, "none")

    assert [row["data"] for row in result["rows"]] == [["high-features"], ["low-features"]]
    client = mlflow.MlflowClient()
    for row in result["rows"]:
        own = client.get_run(prepared[row["variant"]])
        assert own.data.tags[tracking.PARENT_TAG] == result["run_id"]
        assert own.info.run_name == row["variant"]
        children = client.search_runs(
            [own.info.experiment_id], f"tags.`{tracking.PARENT_TAG}` = '{own.info.run_id}'"
        )
        assert len(children) == 1 and children[0].data.tags["job"] == "train"
        assert own.data.metrics["m"] == pytest.approx(row["m"])
    assert client.get_run(prepared["low"]).data.metrics["m.p_vs_best"] < 0.05
