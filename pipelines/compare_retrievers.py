"""Retriever variants (docs/spec/retrieval.md, "Evaluation": MMS against triplet, batch sizes,
pretraining on synthetic speech) trained on the same data and scored on the same held-out
set, as child runs of one comparison run in one MLflow experiment.

    FEATURES [+ SPEECH]            ->  one training run per variant (its overrides on the
                                       shared config)
    EVAL FEATURES [+ EVAL SPEECH]  ->  one evaluation run per variant, R@k beside chance
                                   ->  the comparison run: comparison.json, comparison.md

A variant is `name: key=value ...`, e.g. `mms-48: loss=mms batch_size=48` or
`finetuned: init=runs:/<run id>/model`.

Every R@k comes with its 95% bootstrap interval over the held-out images, and each variant's
mean_R@10 with a paired bootstrap p-value against the best variant's (`mean_R@10.p_vs_best`:
every variant is scored on the same resamples of the same images); the table marks
differences inside the noise (conceptual.intervals).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import mlflow

from conceptual import tracking
from conceptual.config import ConfigError, merge, parse_overrides
from conceptual.intervals import NOISE_P, WITHIN_NOISE, against_best, interval_cell, p_cell
from conceptual.metrics import KS
from conceptual.pipelines.evaluate_retriever import SELECT_BY, EvalConfig, directions, evaluate
from conceptual.pipelines.train_retriever import RetrieverTrainConfig, publish, train

REGISTER = ("best", "all", "none")
P_VS_BEST = f"{SELECT_BY}.p_vs_best"


def parse_variant(text: str, config: RetrieverTrainConfig) -> tuple[str, RetrieverTrainConfig]:
    """`name: key=value ...` -> (name, the shared config with those overrides)."""
    name, sep, overrides = text.partition(":")
    if not sep or not name.strip():
        raise ConfigError(f"a variant is 'name: key=value ...', not {text!r}")
    update = parse_overrides(overrides.split())
    merged = merge(config.model_dump(mode="json"), update)
    try:
        return name.strip(), RetrieverTrainConfig.model_validate(merged)
    except ValueError as error:
        raise ConfigError(f"variant {name.strip()!r}: {error}") from error


def compare(
    features_uri: str,
    speech_uri: str | None,
    eval_features: str,
    eval_speech: str | None,
    config: RetrieverTrainConfig,
    variants: Sequence[str],
    evaluation: EvalConfig,
    register: str = "none",
) -> dict[str, Any]:
    """Train and evaluate every variant; register none, the best by held-out mean R@10, or
    all (the champion rule judges each). Returns `run_id` and `rows`, best first."""
    if register not in REGISTER:
        raise ConfigError(f"register must be one of {REGISTER}, not {register!r}")
    parsed = [parse_variant(v, config) for v in variants]  # fail before training
    evaluation = evaluation.model_copy(update={"experiment": config.experiment})
    with tracking.start_run(
        config.experiment, run_name="comparison", tags={"stage": "compare_retrievers"}
    ) as parent:
        tracking.log_config(config)
        mlflow.log_params(
            {
                "features_uri": features_uri,
                "speech_uri": speech_uri,
                "eval_features": eval_features,
                "eval_speech": eval_speech,
                "variants": " | ".join(variants),
            }
        )
    parent_id = parent.info.run_id

    done = []
    with tracking.children_of(parent_id):
        for i, (name, variant_cfg) in enumerate(parsed, 1):
            print(f"variant {i}/{len(parsed)} {name}", flush=True)
            started = time.monotonic()
            trained = train(features_uri, variant_cfg, speech_uri)
            seconds = time.monotonic() - started
            scored = evaluate(
                f"runs:/{trained['run_id']}/model", eval_features, evaluation, eval_speech
            )
            done.append((name, variant_cfg, trained, scored, seconds))
    done.sort(key=lambda d: d[3]["metrics"][SELECT_BY], reverse=True)
    rows = []
    for rank, (name, variant_cfg, trained, scored, seconds) in enumerate(done):
        registered = register == "all" or (register == "best" and rank == 0)
        decision = publish(trained, variant_cfg) if registered else None
        rows.append(comparison_row(name, variant_cfg, trained, scored, seconds, decision))
    p_values = against_best(
        [row[SELECT_BY] for row in rows], [d[3]["resampled"][SELECT_BY] for d in done]
    )
    for row, p_value in zip(rows, p_values):
        row[P_VS_BEST] = p_value

    with mlflow.start_run(run_id=parent_id):
        mlflow.log_table({k: [row.get(k) for row in rows] for k in rows[0]}, "comparison.json")
        mlflow.log_text(markdown_table(rows), "comparison.md")
        mlflow.log_metrics(
            {
                tracking.metric_key(row["variant"], key): row[key]
                for row in rows
                for key in (SELECT_BY, f"{SELECT_BY}.ci95_low", f"{SELECT_BY}.ci95_high", P_VS_BEST)
                if row.get(key) is not None
            }
        )
        mlflow.set_tag("best_variant", rows[0]["variant"])
    return {"run_id": parent_id, "rows": rows}


def comparison_row(
    name: str,
    config: RetrieverTrainConfig,
    trained: dict[str, Any],
    scored: dict[str, Any],
    seconds: float,
    decision: dict | None,
) -> dict[str, Any]:
    recall = {k: v for k, v in scored["metrics"].items() if "R@" in k}
    chance = {f"chance {k}": v for k, v in scored["chance"].items()}
    return {
        "variant": name,
        "modality": config.modality,
        "loss": config.loss,
        "batch_size": config.batch_size * config.workers,  # the negatives' batch
        **recall,
        **chance,
        "dev " + SELECT_BY: trained["best"][SELECT_BY],
        "best_epoch": trained["best"]["epoch"],
        "train_seconds": round(seconds, 1),
        "run_id": trained["run_id"],
        "eval_run_id": scored["run_id"],
        "eval_set": scored["eval_set"],
        "version": None if decision is None else decision["version"],
        "champion": None if decision is None else decision["reason"],
    }


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """R@1/5/10 both ways, mean R@10 with its 95% interval and p-value against the best,
    chance level in the last row."""
    modality = rows[0]["modality"]
    recall = [f"{d}.R@{k}" for d in directions(modality) for k in KS if k <= 10]
    columns = ["variant", "loss", "batch_size", *recall, SELECT_BY, "p vs best", "train_seconds"]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        shown = {SELECT_BY: interval_cell(row, SELECT_BY), "p vs best": p_cell(row[P_VS_BEST])}
        cells = [shown[c] if c in shown else _cell(row.get(c)) for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    chance = ["chance", "", "", *(_cell(rows[0].get(f"chance {c}")) for c in recall), "", "", ""]
    lines.append("| " + " | ".join(chance) + " |")
    return "\n".join(lines) + (
        f"\n\nEvaluation set: {rows[0]['eval_set']}. {SELECT_BY} [95% bootstrap interval over "
        f"the images]; p vs best: paired bootstrap p-value of the {SELECT_BY} difference to "
        f"the best variant, {WITHIN_NOISE} inside the noise (p >= {NOISE_P}).\n"
    )


def _cell(value: Any) -> str:
    if value is None:
        return ""
    return f"{value:.3f}" if isinstance(value, float) else str(value)
