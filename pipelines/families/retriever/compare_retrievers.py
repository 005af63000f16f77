"""Retriever variants (docs/spec/retrieval.md, "Evaluation": MMS against triplet, batch sizes,
pretraining on synthetic speech) trained on the same data and scored on the same held-out
set, as child runs of one comparison run in one MLflow experiment.

    FEATURES [+ SPEECH]            ->  one training run per variant (its overrides on the
                                       shared config)
    EVAL FEATURES [+ EVAL SPEECH]  ->  one evaluation run per variant, R@k beside chance
                                   ->  the comparison run: comparison.json, comparison.md

A variant is `name: key=value ...`, e.g. `mms-48: loss=mms batch_size=48` or
`finetuned: init=runs:/<run id>/model` (the driver is pipelines/evaluation/comparison.py's).

Every R@k comes with its 95% bootstrap interval over the held-out images, and each variant's
mean_R@10 with a paired bootstrap p-value against the best variant's (`mean_R@10.p_vs_best`:
every variant is scored on the same resamples of the same images); the table marks
differences inside the noise (conceptual.intervals).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from conceptual.metrics import KS
from conceptual.pipelines.evaluation.comparison import (
    Comparison,
    Trained,
    parse_variants,
    registered_columns,
)
from conceptual.pipelines.evaluation.comparison import compare as run_comparison
from conceptual.pipelines.evaluation.comparison import markdown_table as comparison_markdown
from conceptual.pipelines.families import FAMILIES, Family
from conceptual.pipelines.families.retriever.evaluate_retriever import (
    SELECT_BY,
    RetrieverEvalConfig,
    directions,
)
from conceptual.pipelines.families.retriever.train_retriever import RetrieverTrainConfig

P_VS_BEST = f"{SELECT_BY}.p_vs_best"


def compare(
    features_uri: str,
    speech_uri: str | None,
    eval_features: str,
    eval_speech: str | None,
    config: RetrieverTrainConfig,
    variants: Sequence[str],
    evaluation: RetrieverEvalConfig,
    register: str = "none",
    teacher_speech: Sequence[str] = (),
    family: Family = FAMILIES["retriever"],
) -> dict[str, Any]:
    """Train and evaluate every variant (pipelines/evaluation/comparison.py); register none,
    the best by held-out mean R@10, or all (the champion rule judges each); `teacher_speech`
    as train_retriever's; `family`: another that trains dual encoders (the contrastive
    family): its recipe trains the variants, its compare and evaluate jobs tag the runs.
    Returns `run_id` and `rows`, best first."""
    parsed = parse_variants(variants, config, [features_uri, speech_uri, list(teacher_speech)])
    evaluation = evaluation.model_copy(update={"experiment": config.experiment})

    how = Comparison(
        recipe=family.recipe(),
        job=family.jobs["compare"],
        metric=SELECT_BY,
        score=held_out_score(family, eval_features, evaluation, eval_speech),
        row=comparison_row,
        table=markdown_table,
    )
    params = {
        "features_uri": features_uri,
        "speech_uri": speech_uri,
        "eval_features": eval_features,
        "eval_speech": eval_speech,
        "teacher_speech": " ".join(teacher_speech) or None,
        "variants": " | ".join(variants),
    }
    return run_comparison(how, config, parsed, params, register)


def held_out_score(
    family: Family,
    eval_features: str,
    evaluation: RetrieverEvalConfig,
    eval_speech: str | None = None,
) -> Callable[[str, Any, dict[str, Any]], tuple]:
    """A comparison's `score`: each variant's model evaluated on the same held-out set by
    `family` (Family.evaluate: its run tagged as the family's evaluate job)."""

    def score(name: str, variant_config: Any, result: dict[str, Any]) -> tuple:
        model = f"runs:/{result['run_id']}/model"
        scored = family.evaluate(model, eval_features, evaluation, eval_speech)
        return scored["metrics"], scored["resampled"], scored

    return score


def comparison_row(trained: Trained) -> dict[str, Any]:
    config, result, scored = trained.config, trained.result, trained.evaluation
    recall = {k: v for k, v in scored["metrics"].items() if "R@" in k}
    chance = {f"chance {k}": v for k, v in scored["chance"].items()}
    return {
        "variant": trained.name,
        "modality": config.modality,
        "loss": config.loss,
        "batch_size": config.batch_size * config.workers,  # the negatives' batch
        **recall,
        **chance,
        "dev " + SELECT_BY: result["best"][SELECT_BY],
        "best_epoch": result["best"]["epoch"],
        "train_seconds": round(trained.seconds, 1),
        "run_id": result["run_id"],
        "eval_run_id": scored["run_id"],
        "eval_set": scored["eval_set"],
        **registered_columns(trained.decision),
    }


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """R@1/5/10 both ways, mean R@10 with its 95% interval and p-value against the best,
    chance level in the last row."""
    modality = rows[0]["modality"]
    recall = [f"{d}.R@{k}" for d in directions(modality) for k in KS if k <= 10]
    columns = ["variant", "loss", "batch_size", *recall, SELECT_BY, "p vs best", "train_seconds"]
    chance = ["chance", "", "", *(cell(rows[0].get(f"chance {c}")) for c in recall), "", "", ""]
    return comparison_markdown(columns, rows, SELECT_BY, cell, "Evaluation set", last=chance)


def cell(value: Any) -> str:
    """A table cell: a float to 3 decimals, nothing for None."""
    if value is None:
        return ""
    return f"{value:.3f}" if isinstance(value, float) else str(value)
