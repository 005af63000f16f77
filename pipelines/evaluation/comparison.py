"""Variants of one model family trained and scored side by side, as child runs of one
comparison run in one MLflow experiment: the one driver of compare_captioners,
compare_retrievers and compare_fluency.

    DATA  ->  one training run per variant (training.train), scored as the family says
          ->  the table: the variants ranked by the family's metric, with a paired bootstrap
              p-value of each against the best (`<metric>.p_vs_best`: the same resamples
              for every variant); or, without one metric, in the order given, every
              resampled score with its p-value against its column's best
          ->  the best registered, champion rule applied (or every variant, or none)
          ->  the comparison run: comparison.json (table), comparison.md, [comparison.png]

A variant is `name: key=value ...` over a shared config, e.g. `mms-48: loss=mms
batch_size=48`; a family may name some variants, which are then given by their name alone
(`rnn-1x1`). A variant may also read data of its own (compare_fluency's English captioner),
be scored on the model another variant trained (the late translation, re-ranked), train
nothing (a baseline), or make its data when its turn comes, in a run of its own that its
training and scoring runs are children of (the ablation's curation of one curation config:
pipelines/curation/ablation.py).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import mlflow
import numpy as np
from matplotlib.figure import Figure

from conceptual import tracking
from conceptual.config import Config, ConfigError, merge, parse_overrides, validated
from conceptual.intervals import (
    HIGH,
    LOW,
    NOISE_P,
    WITHIN_NOISE,
    against_best,
    interval_cell,
    p_cell,
)
from conceptual.pipelines.training import training

REGISTER = ("best", "all", "none")
C = TypeVar("C", bound=Config)
T = TypeVar("T")


@dataclass(frozen=True)
class Variant:
    """One row of a comparison: a model trained with `config` on `data` (train()'s
    arguments); or, without a config, the model the variant named `model_of` trained, scored
    another way; or, without either, nothing trained (a baseline)."""

    name: str
    config: Any = None
    data: Sequence[Any] = ()
    model_of: str | None = None
    registrable: bool = True  # may become a version (not a reference point, not a helper)
    # Makes `data` when the variant's turn comes: given the id of the variant's own run (a
    # child of the comparison run, and the parent of its training and scoring runs), returns
    # train()'s data arguments.
    prepare: Callable[[str], Sequence[Any]] | None = None


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
        return name, validated(type(config), merged)
    except ConfigError as error:
        raise ConfigError(f"variant {name!r}: {error}") from error


def parse_variants(
    texts: Sequence[str],
    config: Config,
    data: Sequence[Any],
    named: Mapping[str, str] | None = None,
) -> list[Variant]:
    """Every text a variant (parse_variant) trained on `data`: all of them parsed, so a
    mistake in the last one is said before the first one trains."""
    return [Variant(*parse_variant(text, config, named), data) for text in texts]


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
    config: Any  # its model's training config (None: a baseline)
    result: dict[str, Any] | None  # its model's training.train result
    seconds: float | None  # its model's training time
    scores: dict[str, float]  # what the family scores, with 95% intervals
    resampled: dict[str, np.ndarray]  # the scores on every resample
    evaluation: Any = None  # whatever else the family's scoring returned
    decision: dict[str, Any] | None = None  # the champion rule's, when registered
    run_id: str | None = None  # the variant's own run (a variant that prepares its data)


@dataclass(frozen=True)
class Comparison:
    """What a family brings to the driver."""

    recipe: training.Recipe
    job: str  # the job that compares, its comparison run's `job` tag: compare_captioners
    # Of `scores`: ranks the variants (higher is better) and the registered ones, with its
    # p-values. None: the variants stay in their order, every resampled score gets its
    # p-value against its column's best, and the registered ones are ranked by their dev
    # recipe.select_by (what the champion rule judges).
    metric: str | None
    # (name, config, train() result) -> (scores, their resamples, anything else kept); a
    # baseline's config and result are None
    score: Callable[[str, Any, dict[str, Any] | None], tuple[dict, dict, Any]]
    row: Callable[[Trained], dict[str, Any]]  # a variant's row of the table
    table: Callable[[list[dict[str, Any]]], str]  # comparison.md
    plot: Callable[[list[dict[str, Any]]], Figure] | None = None  # comparison.png
    also_logged: tuple[str, ...] = ()  # row columns logged as metrics beside the scores
    # more text files of the comparison run, by name (compare_fluency: every caption)
    files: Callable[[list[Trained]], dict[str, str]] | None = None


def compare(
    comparison: Comparison,
    config: Config,
    variants: Sequence[Variant],
    params: dict[str, Any],
    register: str = "best",
    model_name: str | None = None,
) -> dict[str, Any]:
    """Train and score every variant, as children of a comparison run that logs the shared
    `config` and `params`; register by to_register among the registrable variants that
    trained (under `model_name`, by default the recipe's); log the table. Returns `run_id`
    (the comparison run) and `rows` (one per variant, best first by the metric if there is
    one)."""
    check_register(register)  # before training
    check_variants(variants)
    metric = comparison.metric
    with tracking.start_run(config.experiment, job=comparison.job, run_name="comparison") as parent:
        tracking.log_config(config)
        tracking.log_params(params)
    parent_id = parent.info.run_id

    done: dict[str, Trained] = {}
    with tracking.children_of(parent_id):
        for i, variant in enumerate(variants, 1):
            print(f"variant {i}/{len(variants)} {variant.name}", flush=True)
            with _own_run(variant, config.experiment, comparison.job) as own:
                data = variant.prepare(own) if variant.prepare else variant.data
                trained_with, result, seconds = variant.config, None, None
                if variant.config is not None:
                    started = time.monotonic()
                    result = training.train(comparison.recipe, variant.config, *data)
                    seconds = time.monotonic() - started
                elif variant.model_of is not None:
                    owner = done[variant.model_of]
                    trained_with, result, seconds = owner.config, owner.result, owner.seconds
                scored = comparison.score(variant.name, trained_with, result)
            done[variant.name] = Trained(
                variant.name, trained_with, result, seconds, *scored, run_id=own
            )
    trained = list(done.values())
    if metric is not None:
        trained.sort(key=lambda t: t.scores[metric], reverse=True)

    registrable = [done[v.name] for v in variants if v.config is not None and v.registrable]
    select_by = comparison.recipe.select_by
    registrable.sort(
        key=(lambda t: t.scores[metric]) if metric else (lambda t: t.result["best"][select_by]),
        reverse=True,
    )
    for chosen in to_register(registrable, register):
        chosen.decision = training.publish(
            comparison.recipe, chosen.result, chosen.config, model_name
        )
    rows = [comparison.row(t) for t in trained]
    compared = [metric] if metric else list(trained[0].resampled)
    for name in compared:
        p_values = against_best(
            [t.scores.get(name) for t in trained], [t.resampled.get(name) for t in trained]
        )
        for row, p_value in zip(rows, p_values):
            row[f"{name}.p_vs_best"] = p_value

    log_comparison(comparison, parent_id, trained, rows, compared)
    return {"run_id": parent_id, "rows": rows}


def log_comparison(
    comparison: Comparison,
    parent_id: str,
    trained: Sequence[Trained],
    rows: list[dict[str, Any]],
    compared: Sequence[str],
) -> None:
    """The comparison run's table (comparison.json, .md, the plot and the family's files),
    every variant's `compared` scores with their intervals and p-values as its metrics, the
    best variant's name; and each variant's own scores in its own run."""
    with mlflow.start_run(run_id=parent_id):
        columns = dict.fromkeys(key for row in rows for key in row)
        mlflow.log_table({k: [row.get(k) for row in rows] for k in columns}, "comparison.json")
        mlflow.log_text(comparison.table(rows), "comparison.md")
        if comparison.plot is not None:
            mlflow.log_figure(comparison.plot(rows), "comparison.png")
        for name, text in (comparison.files(trained) if comparison.files else {}).items():
            mlflow.log_text(text, name)
        logged = [m + end for m in compared for end in ("", LOW, HIGH, ".p_vs_best")]
        mlflow.log_metrics(
            {
                tracking.metric_key(t.name, key): row[key]
                for t, row in zip(trained, rows)
                for key in (*logged, *comparison.also_logged)
                if row.get(key) is not None
            }
        )
        if comparison.metric is not None:
            mlflow.set_tag("best_variant", trained[0].name)
    for t, row in zip(trained, rows):
        if t.run_id is not None:  # its own run holds its row's scores too
            with mlflow.start_run(run_id=t.run_id):
                scores = {tracking.metric_key(k): row[k] for k in logged if row.get(k) is not None}
                mlflow.log_metrics(scores)


@contextlib.contextmanager
def _own_run(variant: Variant, experiment: str, job: str) -> Iterator[str | None]:
    """For a variant that prepares its data: a run of its own, named after it, whose id is
    yielded, every run opened in the block its child (it is not left active: the runs below
    it start their own). None for the others."""
    if variant.prepare is None:
        yield None
        return
    tags = {"variant": variant.name}
    with tracking.start_run(experiment, job=job, run_name=variant.name, tags=tags) as run:
        pass
    with tracking.children_of(run.info.run_id):
        yield run.info.run_id


def check_variants(variants: Sequence[Variant]) -> None:
    """Before training: names told apart, and a `model_of` naming an earlier variant that
    trains a model."""
    seen: dict[str, Variant] = {}
    for variant in variants:
        if variant.name in seen:
            raise ConfigError(f"two variants are named {variant.name!r}")
        owner = seen.get(variant.model_of) if variant.model_of else None
        if variant.model_of and (owner is None or owner.config is None):
            raise ConfigError(
                f"variant {variant.name!r}: model_of={variant.model_of!r} names no earlier "
                "variant that trains a model"
            )
        seen[variant.name] = variant


def registered_columns(decision: dict[str, Any] | None) -> dict[str, Any]:
    """A row's registry columns: the version and the champion rule's reason (None if the
    variant was not registered)."""
    return {
        "version": None if decision is None else decision["version"],
        "champion": None if decision is None else decision["reason"],
    }


def markdown_table(
    columns: Sequence[str],
    rows: Sequence[dict[str, Any]],
    metric: str,
    cell: Callable[[Any], str],
    measured_on: str,
    digits: int = 3,
    last: Sequence[str] = (),
) -> str:
    """A comparison's markdown table: a line per row, `metric` with its 95% interval and its
    p-value against the best (`p vs best`), the other columns as `cell` writes them, then
    `last` (chance level) and a note on the set it was `measured_on` ("Dev set")."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        shown = {
            metric: interval_cell(row, metric, digits),
            "p vs best": p_cell(row[f"{metric}.p_vs_best"]),
        }
        cells = [shown[c] if c in shown else cell(row.get(c)) for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    if last:
        lines.append("| " + " | ".join(last) + " |")
    over = "the dev images" if measured_on == "Dev set" else "the images"
    return "\n".join(lines) + (
        f"\n\n{measured_on}: {rows[0]['eval_set']}. {metric} [95% bootstrap interval over "
        f"{over}]; p vs best: paired bootstrap p-value of the {metric} difference to the best "
        f"variant, {WITHIN_NOISE} inside the noise (p >= {NOISE_P}).\n"
    )
