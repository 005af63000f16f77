"""The champion rule against a real MLflow registry (SQLite in the private platform home)."""

from __future__ import annotations

import json
import uuid

import mlflow
import pytest
import torch

from conceptual import registry
from conceptual.models.captioner import Captioner, CaptionerConfig
from conceptual.models.saving import load
from conceptual.models.vocab import Vocabulary
from conceptual.tracking import start_run

pytestmark = pytest.mark.integration

CAPTIONS = ["a dog runs on the grass", "a cat sleeps on a mat"] * 4


def tiny_captioner(seed: int, vocab: Vocabulary) -> Captioner:
    torch.manual_seed(seed)
    config = CaptionerConfig(architecture="rnn", features="1x1", vocab_size=len(vocab), d_model=16)
    return Captioner(config).eval()


def logits(model: Captioner) -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    features = torch.randn(2, 1, model.config.feature_dim, generator=generator)
    tokens = torch.randint(0, model.config.vocab_size, (2, 5), generator=generator)
    with torch.no_grad():
        return model(features, tokens)


@pytest.fixture(scope="module")
def logged(platform_home, log_captioner):
    """Two different tiny captioners, each saved in its own run: [(run_id, model)]."""
    vocab = Vocabulary.build(CAPTIONS)
    runs = []
    for seed in (0, 1):
        model = tiny_captioner(seed, vocab)
        with start_run("registry-tests") as run:
            uri = log_captioner(model, vocab)
        assert uri == f"runs:/{run.info.run_id}/model"
        runs.append((run.info.run_id, model))
    return runs


def champion_score(eval_set: str, name: str) -> float | None:
    """The champion's recorded score on `eval_set` (a tag of its version), None without one."""
    tag = registry.champion_version(name).tags.get(registry.score_tag(eval_set))
    return None if tag is None else float(tag)


@pytest.fixture
def name(logged) -> str:
    """A registered model name of its own, so tests sharing the database do not interact."""
    return f"captioner-{uuid.uuid4().hex[:8]}"


def test_log_register_resolve_round_trip_gives_identical_logits(logged, name, tmp_path):
    run_id, model = logged[0]
    version = registry.register(run_id, {"variant": "rnn-1x1"}, name=name)
    assert version.tags["variant"] == "rnn-1x1"
    for uri in (f"models:/{name}/{version.version}", f"runs:/{run_id}/model"):
        saved = load(registry.resolve(uri, tmp_path / uri.split(":")[0]))
        restored, vocab = saved.model, saved.vocab
        assert torch.equal(logits(restored), logits(model))
        assert len(vocab) == model.config.vocab_size


def test_first_version_becomes_champion(logged, name):
    version = registry.register(logged[0][0], {}, name=name)
    decision = registry.promote_if_better(version, 0.4, "val", name=name)
    assert decision["promoted"] and decision["reason"] == "first_champion"
    assert decision["champion"] is None
    assert champion_score("val", name) == 0.4


def test_only_a_better_challenger_on_the_same_set_moves_the_alias(logged, name):
    first, second, third = (registry.register(logged[0][0], {}, name=name) for _ in range(3))
    registry.promote_if_better(first, 0.5, "val", name=name)

    worse = registry.promote_if_better(second, 0.3, "val", name=name)
    assert not worse["promoted"] and worse["reason"] == "not_better"
    assert worse["champion"] == {"version": first.version, "score": 0.5}
    assert champion_score("val", name) == 0.5

    better = registry.promote_if_better(third.version, 0.7, "val", name=name)
    assert better["promoted"] and better["reason"] == "better"
    assert champion_score("val", name) == 0.7


def test_champion_without_a_score_on_the_challengers_set_is_kept(logged, name):
    champion, challenger = (registry.register(logged[0][0], {}, name=name) for _ in range(2))
    registry.promote_if_better(champion, 0.5, "val-a", name=name)

    decision = registry.promote_if_better(challenger, 0.9, "val-b", name=name)
    assert not decision["promoted"] and decision["reason"] == "champion_unscored"
    assert "val-b" in decision["detail"]
    assert champion_score("val-b", name) is None

    # Once the champion is scored on that set, the comparison is fair and the better one wins.
    kept = registry.promote_if_better(champion, 0.6, "val-b", name=name)
    assert kept["reason"] == "already_champion"
    assert registry.promote_if_better(challenger, 0.9, "val-b", name=name)["promoted"]


def test_decision_is_logged_to_the_active_run(logged, name):
    version = registry.register(logged[0][0], {}, name=name)
    with start_run("registry-tests") as run:
        decision = registry.promote_if_better(version, 0.4, "val", name=name)
    uri = f"runs:/{run.info.run_id}/{registry.DECISION_ARTIFACT}"
    assert json.loads(mlflow.artifacts.load_text(uri)) == decision
    assert mlflow.get_run(run.info.run_id).data.tags["champion_decision"] == "first_champion"


def test_champion_alias_resolves_to_the_promoted_version(logged, name):
    (first_run, _), (second_run, second_model) = logged
    first = registry.register(first_run, {}, name=name)
    second = registry.register(second_run, {}, name=name)
    registry.promote_if_better(first, 0.2, "val", name=name)
    registry.promote_if_better(second, 0.8, "val", name=name)

    restored = load(registry.resolve(f"models:/{name}@{registry.CHAMPION}")).model
    assert torch.equal(logits(restored), logits(second_model))


def test_a_registry_uri_names_its_version_and_records_a_score(logged, name):
    first, second = (registry.register(logged[0][0], {}, name=name) for _ in range(2))
    registry.promote_if_better(first, 0.2, "val", name=name)
    assert registry.registered_version(f"models:/{name}@champion").version == first.version
    assert str(registry.registered_version(f"models:/{name}/2").version) == str(second.version)
    assert registry.registered_version(f"runs:/{logged[0][0]}/model") is None
    assert registry.champion_version(name).version == first.version

    # Scoring the champion on a new set (what evaluate_captioner does) lets a challenger
    # scored on that set be judged.
    registry.record_score(registry.registered_version(f"models:/{name}@champion"), 0.3, "test")
    assert champion_score("test", name) == 0.3
    assert registry.promote_if_better(second, 0.5, "test", name=name)["reason"] == "better"
    with pytest.raises(ValueError, match="cannot resolve"):
        registry.registered_version(f"models:/{name}@nobody")


def test_a_version_is_judged_among_its_own_models_whatever_name_is_given(logged, name):
    # A ModelVersion carries its registered name: the champion rule reads and moves that
    # model's alias, never the default model's.
    version = registry.register(logged[0][0], {}, name=name)
    decision = registry.promote_if_better(version, 0.4, "val")
    assert decision["reason"] == "first_champion"
    assert registry.champion_version(name).version == version.version
    by_number = registry.register(logged[1][0], {}, name=name)
    assert registry.promote_if_better(by_number.version, 0.6, "val", name=name)["promoted"]
    assert champion_score("val", name) == 0.6


def test_unknown_alias_or_version_is_a_clear_error(logged, name):
    registry.register(logged[0][0], {}, name=name)
    for uri in (f"models:/{name}@nobody", f"models:/{name}/99"):
        with pytest.raises(ValueError, match=uri):
            registry.resolve(uri)


def test_a_zero_score_or_a_too_small_set_makes_no_champion(logged, name):
    small = registry.eval_set_name("/data/features", "val", 6, ["refs"])
    assert registry.eval_set_size(small) == 6
    version = registry.register(logged[0][0], {}, name=name)
    decision = registry.promote_if_better(version, 0.9, small, name=name, min_eval_size=20)
    assert not decision["promoted"] and decision["reason"] == "eval_set_too_small"
    assert "holds 6 items, fewer than min_eval_size=20" in decision["detail"]
    large = registry.eval_set_name("/data/features", "val", 500, ["refs"])
    zero = registry.promote_if_better(version, 0.0, large, name=name, min_eval_size=20)
    assert not zero["promoted"] and zero["reason"] == "zero_score"
    assert registry.champion_version(name) is None
    assert registry.promote_if_better(version, 0.1, large, name=name, min_eval_size=20)["promoted"]
