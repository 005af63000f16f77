"""The pipeline job's steps (pipelines/pipeline.py, listed by its `steps`): which lists it
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


def config(steps: list[str], *overrides: str) -> PipelineConfig:
    """The config the job would load from these overrides."""
    return load(PipelineConfig, None, [f"steps=[{','.join(steps)}]", *overrides])


def test_the_default_is_the_captioners_five_stages():
    assert JOB_STEPS == tuple(ALL)
    assert PipelineConfig().steps == ["curate", "features", "train", "register", "evaluate"]
    check_steps(PipelineConfig())


def test_a_family_with_a_pipeline_step_is_a_step_with_its_own_section():
    """The registry's families with a pipeline_step (conceptual.pipelines.families) are steps that read
    the features, configured by a section of their recipe's config named after the step."""
    contrastive = config(["curate", "features", "train_contrastive"], "train_contrastive.epochs=3")
    check_steps(contrastive)
    assert contrastive.train_contrastive.epochs == 3
    assert contrastive.train_contrastive.loss == "infonce"
    assert TABLE["train_contrastive"].needs == ("features",)
    assert prerequisites("train_contrastive", contrastive) == ("features",)  # no clips: text


def test_each_stage_reads_only_stages_before_it():
    for step, row in TABLE.items():
        assert all(JOB_STEPS.index(need) < JOB_STEPS.index(step) for need in row.needs), step


@pytest.mark.parametrize(
    "steps, overrides",
    [
        ([], ()),
        (["curate", "features"], ()),
        (["curate", "speech"], ()),
        (RETRIEVER, ()),
        (["curate", "features", "train_retriever", "index"], ("train_retriever.modality=text",)),
        (ALL, ()),
    ],
)
def test_lists_in_order_with_their_prerequisites_are_taken(steps, overrides):
    check_steps(config(steps, *overrides))


@pytest.mark.parametrize(
    "steps, overrides, message",
    [
        (["curate", "train"], (), "step train reads the output of features: add it to"),
        (["features"], (), "step features reads the output of curate: add it to"),
        (["curate", "features", "evaluate"], (), "step evaluate reads the output of train"),
        (
            ["curate", "features", "train_retriever"],
            (),
            "step train_retriever reads the output of speech (train_retriever.modality=speech",
        ),
        (
            ["curate", "features", "index"],
            ("train_retriever.modality=text",),
            "step index reads the output of train_retriever: add it to steps=[",
        ),
        (
            ["curate", "index"],
            (),
            "step index reads the output of features and speech and train_retriever",
        ),
        (["features", "curate"], (), "pipeline order, each once: [curate,features], not"),
        (["curate", "curate"], (), "pipeline order, each once: [curate], not [curate,curate]"),
        (["curate", "speech", "features"], (), "[curate,features,speech], not"),
        (["curate", "retrieve"], (), "unknown step retrieve: the steps are curate, features"),
    ],
)
def test_a_list_out_of_order_or_missing_a_prerequisite_says_what_is_wrong(
    steps, overrides, message
):
    with pytest.raises(ValueError, match=re.escape(message)):
        check_steps(config(steps, *overrides))


def test_only_a_speech_retriever_reads_the_clips():
    speech, text = config(RETRIEVER), config(RETRIEVER, "train_retriever.modality=text")
    assert prerequisites("train_retriever", speech) == ("features", "speech")
    assert prerequisites("train_retriever", text) == ("features",)
    assert prerequisites("index", speech) == ("features", "speech", "train_retriever")
    assert prerequisites("index", text) == ("features", "train_retriever")


def rerun(steps: list[str], *overrides: str) -> list[str]:
    """The steps whose fingerprint the overrides change: those a rerun runs again."""
    before = fingerprints(config(steps), "input")
    after = fingerprints(config(steps, *overrides), "input")
    return [step for step in steps if after[step] != before[step]]


@pytest.mark.parametrize(
    "override, steps",
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
def test_a_changed_key_reruns_its_step_and_those_that_read_it(override, steps):
    assert rerun(ALL, override) == steps


def test_a_text_retriever_does_not_rerun_for_speech_keys():
    text = "train_retriever.modality=text"
    before = fingerprints(config(ALL, text), "input")
    after = fingerprints(config(ALL, text, "speech.max_seconds=20"), "input")
    assert [step for step in ALL if after[step] != before[step]] == ["speech"]


def test_another_input_reruns_every_stage():
    other = fingerprints(config(ALL), "another input")
    assert set(other.values()).isdisjoint(fingerprints(config(ALL), "input").values())


def test_the_old_key_stages_is_still_read_with_a_note(capsys, tmp_path):
    """`stages`, the old name of `steps`, for one release: from an override or a file, with
    a line saying so; the job's early key check takes it too."""
    from conceptual.config import check_keys

    old = load(PipelineConfig, None, ["stages=[curate,features]"])
    assert old.steps == ["curate", "features"]
    assert "note: `stages` is now `steps`" in capsys.readouterr().err
    file = tmp_path / "old.yaml"
    file.write_text("stages: [curate]\n")
    assert load(PipelineConfig, file).steps == ["curate"]
    check_keys("pipeline.yaml", ["stages=[curate]"], file)
    with pytest.raises(ValueError, match="stages and steps are one key"):
        load(PipelineConfig, file, ["steps=[curate]"])


def test_a_manifest_where_the_last_release_wrote_it_still_counts(tmp_path, platform_home):
    """A step finished under the old name (OUTPUT/stages/<step>.json) is not run again;
    OUTPUT/steps/ is read first, and a changed fingerprint still reruns."""
    import json

    from conceptual import tracking
    from conceptual.pipelines.pipeline import MANIFESTS, _finished

    tracking.configure()
    (tmp_path / "stages").mkdir()
    (tmp_path / "stages" / "speech.json").write_text(json.dumps({"fingerprint": "f", "result": {}}))
    assert _finished("speech", str(tmp_path), "f", None) == {"fingerprint": "f", "result": {}}
    assert _finished("speech", str(tmp_path), "g", None) is None
    (tmp_path / MANIFESTS).mkdir()
    (tmp_path / MANIFESTS / "speech.json").write_text(
        json.dumps({"fingerprint": "g", "result": {}})
    )
    assert _finished("speech", str(tmp_path), "g", None)["fingerprint"] == "g"
