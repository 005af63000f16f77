"""Variants of one model family trained on the same data, each with its own overrides of a
shared config, as child runs of one comparison run in one MLflow experiment: the one driver
of compare_captioners and compare_retrievers.

    DATA  ->  one training run per variant (training.train), scored as the family says
          ->  the variants ranked by that score, with a paired bootstrap p-value of each
              against the best (`<metric>.p_vs_best`: the same resamples for every variant)
          ->  the best registered, champion rule applied (or every variant, or none)
          ->  the comparison run: comparison.json (table), comparison.md, [comparison.png]

A variant is `name: key=value ...`, e.g. `mms-48: loss=mms batch_size=48`; a family may name
some variants, which are then given by their name alone (`rnn-1x1`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import mlflow
import numpy as np
from matplotlib.figure import Figure

from conceptual import tracking
from conceptual.config import Config, ConfigError, merge, parse_overrides
from conceptual.intervals import against_best
from conceptual.pipelines import training

REGISTER = ("best", "all", "none")
C = TypeVar("C", bound=Config)
T = TypeVar("T")


def parse_variant(text: str, config: C, named: Mapping[str, str] | None = None) -> tuple[str, C]:
    """`name: key=value ...` -> (name, the shared config with those overrides). A variant of
    `named` (name -> its overrides) may be given by its name alone."""
    name, sep, overrides = text.partition(":")
    name = name.strip()
    if not sep and named is not None:
        if name not in named:
            raise ConfigError(
                f"unknown variant {name!r}; the variants are {', '.join(named)}, or give "
                "'name: key=value ...'"
            )
        overrides = named[name]
    elif not sep or not name:
        raise ConfigError(f"a variant is 'name: key=value ...', not {text!r}")
    merged = merge(config.model_dump(mode="json"), parse_overrides(overrides.split()))
    try:
        return name, type(config).model_validate(merged)
    except ValueError as error:
        raise ConfigError(f"variant {name!r}: {error}") from error


def check_register(register: str) -> None:
    if register not in REGISTER:
        raise ConfigError(f"register must be one of {REGISTER}, not {register!r}")


def to_register(ranked: Sequence[T], register: str) -> Sequence[T]:
    """Which of the ranked (best first) become registry versions: the best (a comparison's
    losers are not worth a version), all or none."""
    check_register(register)
    return ranked if register == "all" else ranked[:1] if register == "best" else []


@dataclass
class Trained:
    """One variant of a comparison, trained and scored."""

    name: str
    config: Any
    result: dict[str, Any]  # training.train's
    seconds: float  # its training's
    scores: dict[str, float]  # what the family scores, with 95% intervals
    resampled: dict[str, np.ndarray]  # the scores on every resample
    evaluation: Any = None  # whatever else the family's scoring returned
    decision: dict[str, Any] | None = None  # the champion rule's, when registered


@dataclass(frozen=True)
class Comparison:
    """What a family brings to the driver."""

    recipe: training.Recipe
    stage: str  # the comparison run's `stage` tag: compare_captioners
    metric: str  # of `scores`: ranks the variants (higher is better), with its p-values
    # (name, config, train() result) -> (scores, their resamples, anything else kept)
    score: Callable[[str, Any, dict[str, Any]], tuple[dict, dict, Any]]
    row: Callable[[Trained], dict[str, Any]]  # a variant's row of the table
    table: Callable[[list[dict[str, Any]]], str]  # comparison.md
    plot: Callable[[list[dict[str, Any]]], Figure] | None = None  # comparison.png


def compare(
    comparison: Comparison,
    config: Config,
    variants: Sequence[tuple[str, Any]],
    data: Sequence[Any],
    params: dict[str, Any],
    register: str = "best",
    model_name: str | None = None,
) -> dict[str, Any]:
    """Train every (name, config) variant on `data` (train()'s arguments) and score it, as
    children of a comparison run that logs the shared `config` and `params`; register by
    to_register (under `model_name`, by default the recipe's); log the table. Returns
    `run_id` (the comparison run) and `rows` (one per variant, best first)."""
    check_register(register)  # before training
    metric, p_vs_best = comparison.metric, f"{comparison.metric}.p_vs_best"
    tags = {"stage": comparison.stage}
    with tracking.start_run(config.experiment, run_name="comparison", tags=tags) as parent:
        tracking.log_config(config)
        mlflow.log_params(params)
    parent_id = parent.info.run_id

    done = []
    with tracking.children_of(parent_id):
        for i, (name, variant_config) in enumerate(variants, 1):
            print(f"variant {i}/{len(variants)} {name}", flush=True)
            started = time.monotonic()
            result = training.train(comparison.recipe, variant_config, *data)
            seconds = time.monotonic() - started
            scored = comparison.score(name, variant_config, result)
            done.append(Trained(name, variant_config, result, seconds, *scored))
    done.sort(key=lambda t: t.scores[metric], reverse=True)
    for trained in to_register(done, register):
        trained.decision = training.publish(
            comparison.recipe, trained.result, trained.config, model_name
        )
    rows = [comparison.row(trained) for trained in done]
    p_values = against_best([t.scores[metric] for t in done], [t.resampled[metric] for t in done])
    for row, p_value in zip(rows, p_values):
        row[p_vs_best] = p_value

    with mlflow.start_run(run_id=parent_id):
        mlflow.log_table({k: [row.get(k) for row in rows] for k in rows[0]}, "comparison.json")
        mlflow.log_text(comparison.table(rows), "comparison.md")
        if comparison.plot is not None:
            mlflow.log_figure(comparison.plot(rows), "comparison.png")
        mlflow.log_metrics(
            {
                tracking.metric_key(row["variant"], key): row[key]
                for row in rows
                for key in (metric, f"{metric}.ci95_low", f"{metric}.ci95_high", p_vs_best)
                if row.get(key) is not None
            }
        )
        mlflow.set_tag("best_variant", rows[0]["variant"])
    return {"run_id": parent_id, "rows": rows}


def registered_columns(decision: dict[str, Any] | None) -> dict[str, Any]:
    """A row's registry columns: the version and the champion rule's reason (None if the
    variant was not registered)."""
    return {
        "version": None if decision is None else decision["version"],
        "champion": None if decision is None else decision["reason"],
    }
