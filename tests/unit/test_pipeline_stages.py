"""The pipeline job's steps (pipelines/pipeline.py, listed by its `stages`): which lists it
takes, what it says of those it refuses, and which steps a changed key reruns (their
fingerprints). No Ray."""

from __future__ import annotations

import re

import pytest

from conceptual.config import load
from conceptual.pipelines.pipeline import (
    DEFAULT_JOB_STEPS,
    JOB_STEPS,
    TABLE,
    PipelineConfig,
    check_steps,
    fingerprints,
    prerequisites,
)

ALL = [*DEFAULT_JOB_STEPS, "speech", "train_retriever", "train_contrastive", "index"]
RETRIEVER = ["curate", "features", "speech", "train_retriever", "index"]


def config(stages: list[str], *overrides: str) -> PipelineConfig:
    """The config the job would load from these overrides."""
    return load(PipelineConfig, None, [f"stages=[{','.join(stages)}]", *overrides])


def test_the_default_is_the_captioners_five_stages():
    assert JOB_STEPS == tuple(ALL)
    assert PipelineConfig().stages == ["curate", "features", "train", "register", "evaluate"]
    check_steps(PipelineConfig())


def test_a_family_with_a_pipeline_step_is_a_step_with_its_own_section():
    """The registry's families with a pipeline_step (conceptual.families) are steps that read
    the features, configured by a section of their recipe's config named after the step."""
    contrastive = config(["curate", "features", "train_contrastive"], "train_contrastive.epochs=3")
    check_steps(contrastive)
    assert contrastive.train_contrastive.epochs == 3
    assert contrastive.train_contrastive.loss == "infonce"
    assert TABLE["train_contrastive"].needs == ("features",)
    assert prerequisites("train_contrastive", contrastive) == ("features",)  # no clips: text


def test_each_stage_reads_only_stages_before_it():
    for stage, row in TABLE.items():
        assert all(JOB_STEPS.index(need) < JOB_STEPS.index(stage) for need in row.needs), stage


@pytest.mark.parametrize(
    "stages, overrides",
    [
        ([], ()),
        (["curate", "features"], ()),
        (["curate", "speech"], ()),
        (RETRIEVER, ()),
        (["curate", "features", "train_retriever", "index"], ("train_retriever.modality=text",)),
        (ALL, ()),
    ],
)
def test_lists_in_order_with_their_prerequisites_are_taken(stages, overrides):
    check_steps(config(stages, *overrides))


@pytest.mark.parametrize(
    "stages, overrides, message",
    [
        (["curate", "train"], (), "stage train reads the output of features: add it to"),
        (["features"], (), "stage features reads the output of curate: add it to"),
        (["curate", "features", "evaluate"], (), "stage evaluate reads the output of train"),
        (
            ["curate", "features", "train_retriever"],
            (),
            "stage train_retriever reads the output of speech (train_retriever.modality=speech",
        ),
        (
            ["curate", "features", "index"],
            ("train_retriever.modality=text",),
            "stage index reads the output of train_retriever: add it to stages=[",
        ),
        (
            ["curate", "index"],
            (),
            "stage index reads the output of features and speech and train_retriever",
        ),
        (["features", "curate"], (), "pipeline order, each once: [curate,features], not"),
        (["curate", "curate"], (), "pipeline order, each once: [curate], not [curate,curate]"),
        (["curate", "speech", "features"], (), "[curate,features,speech], not"),
        (["curate", "retrieve"], (), "unknown stage retrieve: the stages are curate, features"),
    ],
)
def test_a_list_out_of_order_or_missing_a_prerequisite_says_what_is_wrong(
    stages, overrides, message
):
    with pytest.raises(ValueError, match=re.escape(message)):
        check_steps(config(stages, *overrides))


def test_only_a_speech_retriever_reads_the_clips():
    speech, text = config(RETRIEVER), config(RETRIEVER, "train_retriever.modality=text")
    assert prerequisites("train_retriever", speech) == ("features", "speech")
    assert prerequisites("train_retriever", text) == ("features",)
    assert prerequisites("index", speech) == ("features", "speech", "train_retriever")
    assert prerequisites("index", text) == ("features", "train_retriever")


def rerun(stages: list[str], *overrides: str) -> list[str]:
    """The stages whose fingerprint the overrides change: those a rerun runs again."""
    before = fingerprints(config(stages), "input")
    after = fingerprints(config(stages, *overrides), "input")
    return [stage for stage in stages if after[stage] != before[stage]]


@pytest.mark.parametrize(
    "override, stages",
    [
        ("train_retriever.epochs=2", ["train_retriever", "index"]),
        ("retriever_name=retriever-x", ["train_retriever", "index"]),
        ("train_contrastive.epochs=2", ["train_contrastive"]),
        ("index.approximate=true", ["index"]),
        ("speech.max_seconds=20", ["speech", "train_retriever", "index"]),
        ("train.epochs=2", ["train", "register", "evaluate"]),
        ("model_name=captioner-x", ["register"]),
        ("evaluate.beam=2", ["evaluate"]),
        (
            "features.seed=1",
            ["features", "train", "register", "evaluate", "train_retriever", "train_contrastive"]
            + ["index"],
        ),
        ("curate.samples=1", ALL),
        ("experiment=elsewhere", []),
    ],
)
def test_a_changed_key_reruns_its_stage_and_those_that_read_it(override, stages):
    assert rerun(ALL, override) == stages


def test_a_text_retriever_does_not_rerun_for_speech_keys():
    text = "train_retriever.modality=text"
    before = fingerprints(config(ALL, text), "input")
    after = fingerprints(config(ALL, text, "speech.max_seconds=20"), "input")
    assert [stage for stage in ALL if after[stage] != before[stage]] == ["speech"]


def test_another_input_reruns_every_stage():
    other = fingerprints(config(ALL), "another input")
    assert set(other.values()).isdisjoint(fingerprints(config(ALL), "input").values())
