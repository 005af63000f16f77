"""The curation pipeline as a list of steps (pipelines/dataflow/steps.py, pipelines/curation/curation.py):
the funnel's order, what each stage declares, and the rows the steps hand on (no Ray)."""

from __future__ import annotations

import re

import pytest

from conceptual.candidates import READ_REASONS
from conceptual.config import load
from conceptual.pipelines.curation import curation
from conceptual.pipelines.curation.curation import READ_COLUMNS, STAGES, nothing_kept_hint, steps
from conceptual.pipelines.curation.curation_config import CurationConfig, ImportConceptualConfig
from conceptual.pipelines.dataflow.rows import table
from conceptual.pipelines.dataflow.steps import GlobalStep, checked, per_candidate
from conceptual.records import IN_FLIGHT, PROCESSED
from conceptual.text import hypernymize
from conceptual.text.filters import FILTER_NAMES
from conceptual.vision import fetch, images

ALL = (
    "read",
    "text",
    "syntax",
    "hypernymize",
    "fetch",
    "image",
    "overlap",
    "deduplicate",
    "entity_frequency",
)


def test_the_funnel_follows_the_steps():
    assert STAGES == ALL
    without_images = CurationConfig(with_images=False)
    assert curation.stages(without_images) == (
        "read",
        "text",
        "syntax",
        "hypernymize",
        "deduplicate",
        "entity_frequency",
    )
    assert len(per_candidate(steps(without_images))) == 1
    # A rule that is off has no row (an import's funnel listed overlap and entity_frequency).
    imported = curation.stages(ImportConceptualConfig())
    assert "overlap" not in imported and "entity_frequency" not in imported
    assert "deduplicate" in imported


def test_each_stage_declares_its_reasons_and_settings():
    stages = curation.funnel_stages(CurationConfig())
    assert all(stage.reasons and stage.settings for stage in stages)
    by_name = {stage.name: stage for stage in stages}
    assert by_name["text"].reasons + by_name["syntax"].reasons == FILTER_NAMES
    assert by_name["read"].reasons == READ_REASONS


def table_reasons(doc: str) -> list[str]:
    return re.findall(r"^\| (\w+) \|", doc, re.MULTILINE)[1:]  # the header row first


def test_declared_reasons_are_the_documented_ones():
    assert fetch.FETCH_REASONS == tuple(table_reasons(fetch.__doc__))
    assert images.IMAGE_REASONS == tuple(table_reasons(images.__doc__))
    documented = re.findall(r'^- "(\w+)":', hypernymize.__doc__, re.MULTILINE)
    assert curation.HYPERNYMIZE.reasons == tuple(documented)


def test_the_steps_fill_every_column_a_stage_adds():
    added = {column for step in steps(CurationConfig()) for column in step.adds}
    # the split and labels of the released dataset come with the input (IN_FLIGHT)
    assert added == set(PROCESSED.names) - set(IN_FLIGHT.names) | {"image", "labels"}


@pytest.mark.parametrize(
    "config",
    [
        CurationConfig(),
        CurationConfig(with_images=False),
        CurationConfig(captions="released"),
        CurationConfig.model_validate({"image": {"resize": {"short_side": 256}}}),
    ],
)
def test_every_step_finds_the_columns_it_needs(config):
    table = steps(config)  # checked as it is built
    assert all(step.needs for step in table)
    assert checked(table, READ_COLUMNS) == table


def test_a_step_before_the_one_that_fills_its_columns_is_refused():
    text, fetching, vision, *_ = steps(CurationConfig())
    with pytest.raises(ValueError, match=r"the image step needs caption, types, entities, which"):
        checked((fetching, vision, text), READ_COLUMNS)
    with pytest.raises(ValueError, match=r"the text step needs alt_text, which neither"):
        checked((text,), ("id",))


def test_the_global_steps_are_entries_of_the_list_after_the_others():
    table = steps(CurationConfig())
    global_steps = [step for step in table if isinstance(step, GlobalStep)]
    assert [step.name for step in global_steps] == ["deduplicate", "entity_frequency"]
    assert table[-2:] == tuple(global_steps)
    text, deduplicate = table[0], global_steps[0]
    with pytest.raises(ValueError, match=r"the text step comes after a global step"):
        checked((deduplicate, text), READ_COLUMNS + ("caption", "types", "image_id"))
    with pytest.raises(ValueError, match=r"the entity_frequency step needs types"):
        checked(global_steps, READ_COLUMNS + ("image_id",))


def test_a_column_no_stage_filled_is_empty():
    row = dict.fromkeys(IN_FLIGHT.names) | {"id": "a", "caption": "a dog", "types": ["dog"]}
    [filled] = table([row]).to_pylist()
    assert filled["types"] == ["dog"] and filled["caption"] == "a dog"
    assert filled["entities"] == filled["labels"] == filled["matched"] == []
    assert filled["width"] is None and filled["split"] is None


@pytest.mark.parametrize("stage", ALL)
def test_nothing_kept_names_the_settings_of_the_last_stage(stage):
    stats = {
        "input": 3,
        "funnel": [{"stage": s, "entering": 3, "rejected": 3 * (s == stage)} for s in ALL],
        "rejected": {stage: {"some_reason": 3}},
    }
    [declared] = [s for s in curation.funnel_stages(CurationConfig()) if s.name == stage]
    hint = nothing_kept_hint(stats, CurationConfig())
    assert hint.startswith(f"the {stage} stage rejected the last 3 (some_reason 3): see ")
    assert declared.settings in hint


def test_nothing_kept_gives_every_hint_in_one_run():
    """A small local crawl: the fetch stage refused every port, and the entity-frequency rule
    after it, which saw nothing, would have rejected them all next run (issue 58: three runs
    for two hints). Both come at once; at a threshold the input can pass, only the first."""
    stats = {
        "input": 12,
        "funnel": [{"stage": s, "entering": 12, "rejected": 12 * (s == "fetch")} for s in ALL],
        "rejected": {"fetch": {"refused_port": 12}},
    }
    first, then = nothing_kept_hint(stats, CurationConfig()).splitlines()
    assert first.startswith("the fetch stage rejected the last 12 (refused_port 12): see ")
    assert "fetch.allow_hosts=[127.0.0.1]" in first
    assert "entity_frequency" in then and "more_than=100" in then
    small = load(CurationConfig, overrides=["entity_frequency.more_than=0"])
    assert len(nothing_kept_hint(stats, small).splitlines()) == 1
