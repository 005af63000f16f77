"""The ablation (pipelines/curation/ablation.py) before anything runs: its config file and example,
every variant checked (an unknown curation key is said at once, naming the variant and the
key meant), each variant's pipeline config, and the table and plot from its rows."""

from __future__ import annotations

import numpy as np
import pytest
from alignment_scorers import saved_scorer  # tests/alignment_scorers.py

from conceptual.config import ConfigError, load
from conceptual.pipelines.curation.ablation import AblateConfig, Planned, markdown_table, plot
from conceptual.vision.alignment import ScorerError
from conceptual.vision.cnn import FEATURE_CHANNELS

PATHS = ["input=/data/candidates", "eval_features=/data/held-out", "output=/out"]


@pytest.fixture(scope="module")
def scorer(tmp_path_factory) -> str:
    """A scorer in a folder: the example's `models:/contrastive@champion` stands for it."""
    vectors = np.random.default_rng(0).random((2, FEATURE_CHANNELS), dtype=np.float32)
    folder = tmp_path_factory.mktemp("scorer") / "contrastive"
    return str(saved_scorer(folder, ["a dog", "a red car"], vectors, steps=1))


@pytest.fixture
def planned(repo, scorer):
    def plan(*overrides: str) -> Planned:
        given = [*PATHS, f"curate.alignment.scorer={scorer}", *overrides]
        return Planned(load(AblateConfig, repo / "examples" / "ablate_flickr8k.yaml", given))

    return plan


def test_each_variant_is_the_shared_curation_with_its_own_overrides(planned, scorer):
    plan = planned()
    shared = plan.curation
    assert list(plan.curations) == [
        "labels",
        "no-overlap",
        "alignment-top-70",
        "alignment-top-50",
        "either",
        "near-dedup",
    ]
    assert plan.curations["labels"] == shared
    assert plan.curations["no-overlap"] == shared.model_copy(
        update={"overlap": shared.overlap.model_copy(update={"enabled": False})}
    )
    top = plan.curations["alignment-top-50"]
    assert (top.overlap.rule, top.alignment.keep_fraction) == ("alignment", 0.5)
    assert plan.curations["near-dedup"].dedup.near.enabled
    assert shared.image.min_side == 100  # the example's shared keys, in every variant
    assert {c.alignment.scorer for c in plan.curations.values()} == {scorer}
    # One seed and budget for every variant, its runs in the ablation's experiment.
    assert (plan.train.seed, plan.train.epochs, plan.train.experiment) == (0, 10, "ablation")
    assert all(v.config is plan.train for v in plan.variants())


def test_a_variant_curates_and_extracts_features_in_a_folder_of_its_own(planned):
    plan = planned()
    config = plan.pipeline_config("no-overlap")
    assert (config.input, config.output) == ("/data/candidates", "/out/variants/no-overlap")
    assert config.steps == ["curate", "features"]
    assert config.curate.overlap.enabled is False
    assert config.experiment == "ablation"
    assert plan.pipeline_config("labels").curate.overlap.enabled is True


def test_a_missing_scorer_is_said_before_any_variant_runs(repo, tmp_path):
    missing = f"curate.alignment.scorer={tmp_path / 'nothing'}"
    config = load(AblateConfig, repo / "examples" / "ablate_flickr8k.yaml", [*PATHS, missing])
    with pytest.raises(ScorerError, match="python -m conceptual.jobs.train_contrastive"):
        Planned(config)


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        (
            ["variants={a: '', b: 'overlap.enabeld=false'}"],
            "variant 'b': invalid CurationConfig: overlap.enabeld: unknown key, did you mean "
            "overlap.enabled?",
        ),
        (["variants={a: '', b: 'dedup.by_image=maybe'}"], "variant 'b'.*dedup.by_image"),
        (["variants=null"], "at least 2 variants, not 0"),
        (["variants={a: '', 'b c': ''}"], "variant names are letters.*'b c'"),
        (["family=captioner"], "family 'captioner' is not one.*contrastive"),
        (["curate.image.min_sid=3"], "curate.image.min_sid: unknown key.*curate.image.min_side"),
        (["train.epoch=3"], "epoch: unknown key, did you mean epochs?"),
        (["train.modality=speech"], "modality"),
        (["input=null"], "the ablation needs input=URI"),
    ],
)
def test_a_mistake_in_any_variant_or_setting_is_said_before_anything_runs(planned, overrides, said):
    with pytest.raises(ConfigError, match=said):
        planned(*overrides)


def test_the_job_refuses_a_bad_variant_before_ray_starts(repo, scorer, capsys):
    from conceptual.jobs import ablate

    config = str(repo / "examples" / "ablate_flickr8k.yaml")
    bad = "variants={default: '', typo: 'entity_frequency.more_thn=3'}"
    given = ["--config", config, *PATHS, f"curate.alignment.scorer={scorer}", bad]
    assert ablate.main(given) == 2
    err = capsys.readouterr().err
    assert "variant 'typo'" in err and "did you mean entity_frequency.more_than?" in err


def rows() -> list[dict]:
    """Two variants' rows as the comparison driver returns them, best first."""

    def row(name: str, overrides: str, kept: int, score: float, p: float | None) -> dict:
        return {
            "variant": name,
            "overrides": overrides,
            "kept": kept,
            "text_to_image.R@10": score - 0.02,
            "image_to_text.R@10": score + 0.02,
            "mean_R@10": score,
            "mean_R@10.ci95_low": score - 0.1,
            "mean_R@10.ci95_high": score + 0.1,
            "mean_R@10.p_vs_best": p,
            "chance text_to_image.R@10": 0.0625,
            "chance image_to_text.R@10": 0.0625,
            "train_seconds": 12.0,
            "eval_set": "held-out test (16 images)",
        }

    return [
        row("no-dedup", "dedup.by_image=false", 200, 0.5, None),
        row("default", "", 40, 0.45, 0.3),
    ]


def test_the_table_ranks_the_variants_with_intervals_and_p_values_against_the_best():
    lines = markdown_table(rows()).splitlines()
    assert lines[0].startswith("| variant | overrides | kept | text_to_image.R@10 |")
    assert lines[2] == (
        "| no-dedup | dedup.by_image=false | 200 | 0.480 | 0.520 | 0.500 [0.400, 0.600] |  | 12.000 |"
    )
    assert "| default |  | 40 |" in lines[3] and "| 0.300 ~ |" in lines[3]  # inside the noise
    assert lines[4].startswith("| chance |  |  | 0.062 | 0.062 |")
    assert "Evaluation set: held-out test (16 images)" in markdown_table(rows())


def test_the_plot_shows_each_variants_score_and_what_it_kept():
    figure = plot(rows())
    scores, kept = figure.axes
    assert [t.get_text() for t in scores.get_xticklabels()] == ["no-dedup", "default"]
    assert [bar.get_height() for bar in kept.patches] == [200, 40]
