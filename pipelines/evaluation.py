"""One evaluation, whatever the model family: the family scores its model on held-out data
and hands over an `Evaluation`. `record` logs it as an MLflow run of its own (config,
params, metrics, files, evaluation.json; evaluate_captioner, evaluate_retriever) and gives a
registered version its score tag for the evaluation set, the tag the champion rule
compares. `log` puts what it measured into the active run instead: a training run that
scores its best model on held-out data as it ends (train_fluency's test labels)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import mlflow

from conceptual import lineage, registry, tracking
from conceptual.config import Config


@dataclass
class Evaluation:
    metrics: dict[str, float]  # the run's metrics, each with its interval where it has one
    eval_set: str  # the evaluation set's name: a param, and the score tag's key
    result: dict[str, Any]  # what the job returns and evaluation.json holds, before the run's
    params: dict[str, Any] = field(default_factory=dict)  # beyond features_uri and eval_set
    tags: dict[str, str] = field(default_factory=dict)  # beyond stage and model_uri
    artifacts: dict[str, Any] = field(default_factory=dict)  # file name -> JSON-able content
    texts: dict[str, str] = field(default_factory=dict)  # file name -> text (a table to read)
    log_figures: Callable[[], None] | None = None  # called inside the run
    score: tuple[str, float] | None = None  # (metric, value) tagged on the version; None: not


def record(
    stage: str, model_uri: str, features_uri: str, config: Config, evaluation: Evaluation
) -> dict[str, Any]:
    """Logs `evaluation` as a run of `config.experiment` tagged `stage`; returns its result
    with `eval_set`, `run_id` and `version` (the registered version scored, or None)."""
    version = registry.registered_version(model_uri)
    tags = {"stage": stage, "model_uri": model_uri, **evaluation.tags}
    with tracking.start_run(config.experiment, tags=tags) as active:
        tracking.log_config(config)
        params = {"features_uri": features_uri, "eval_set": evaluation.eval_set}
        tracking.log_params({**params, **evaluation.params})
        split = getattr(config, "split", None)  # the split scored; every split without one
        lineage.log_read(features_uri, splits=[split] if split else None)
        log(evaluation)
        result = {
            **evaluation.result,
            "eval_set": evaluation.eval_set,
            "run_id": active.info.run_id,
            "version": None if version is None else str(version.version),
        }
        mlflow.log_dict(result, "evaluation.json")
    if version is not None and evaluation.score is not None:
        metric, value = evaluation.score
        registry.record_score(version, value, evaluation.eval_set, metric)
    return result


def log(evaluation: Evaluation) -> None:
    """What `evaluation` measured, into the active run: its metrics, files and figures."""
    # MLflow refuses "@" in a name: R@10 is logged as R_10 (tracking.metric_key).
    mlflow.log_metrics({tracking.metric_key(k): v for k, v in evaluation.metrics.items()})
    for name, content in evaluation.artifacts.items():
        mlflow.log_dict(content, name)
    for name, text in evaluation.texts.items():
        mlflow.log_text(text, name)
    if evaluation.log_figures is not None:
        evaluation.log_figures()
