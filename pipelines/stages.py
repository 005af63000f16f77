"""A pipeline as a list of stages (docs/design.md), after NeMo Curator's ProcessingStage but
smaller. A `Stage` is a row of the funnel: the name a rejected row carries in `stage`, the
reasons it may give, and the settings that decide them. A `Step` is one Ray Data operator and
the stages it decides (one spaCy parse serves three: text, syntax, hypernymize). A pipeline
is its steps in order (pipelines/curation.py, `steps`); its STAGES and its funnel follow
from them, and `run_steps` runs them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import ray.data

from conceptual.pipelines.executors import Resources


@dataclass(frozen=True)
class Stage:
    """A row of the funnel."""

    name: str  # what a row it rejects carries in `stage`
    reasons: tuple[str, ...]  # what such a row carries in `reason`: metric names, never reworded
    settings: str  # what decides its rejections: the setting to change when it rejects all


@dataclass(frozen=True)
class Step:
    """An operator over pyarrow batches of rows, marking those it rejects (pipelines/rows.py):
    a class runs as actors (what it loads, it loads once per actor), a function as tasks.
    `kwargs` go to the class's constructor or to the function with each batch."""

    stages: tuple[Stage, ...]  # the funnel's stages it decides, in order
    operator: Callable
    kwargs: Mapping[str, Any]
    resources: Resources
    adds: tuple[str, ...] = ()  # the columns it fills
    materialize: bool = False  # all its output before the next step starts


def run_steps(dataset: ray.data.Dataset, steps: Iterable[Step]) -> ray.data.Dataset:
    for step in steps:
        arguments = "fn_constructor_kwargs" if isinstance(step.operator, type) else "fn_kwargs"
        dataset = dataset.map_batches(
            step.operator,
            **{arguments: dict(step.kwargs)},
            batch_size=step.resources.batch_size,
            batch_format="pyarrow",
            **step.resources.placement(),
        )
        if step.materialize:
            dataset = dataset.materialize()
    return dataset
