"""One evaluation, whatever the model family: the family scores its model on held-out data
and hands over an `Evaluation`. `record` logs it as an MLflow run of its own (config,
params, metrics, files, evaluation.json; evaluate_captioner, evaluate_retriever) and gives a
registered version its score tag for the evaluation set, the tag the champion rule
compares. `log` puts what it measured into the active run instead: a training run that
scores its best model on held-out data as it ends (train_fluency's test labels).

`record` also warns, in one line, when no curation behind the model (its lineage) was
decontaminated against the set it scores (`contamination_warning`): a training photo that
is a copy of a test photo inflates the score."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import mlflow
from mlflow.exceptions import MlflowException

from conceptual import lineage, lineage_chain, registry, storage, tracking
from conceptual.config import Config
from conceptual.pipelines.curation.decontamination import decontaminated


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
    tags = {"model_uri": model_uri, **evaluation.tags}
    warning = contamination_warning(model_uri, features_uri)
    if warning:
        print(warning, flush=True)
    with tracking.start_run(config.experiment, job=stage, tags=tags) as active:
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


def contamination_warning(model_uri: str, features_uri: str) -> str | None:
    """The line to print when no curation behind the model was decontaminated against the
    scored set (its features, or the data they were made from), nor is the scored set's own
    curation one with near-duplicates removed (no copy then straddles its splits). None when
    one was, or when the lineage names no curation (nothing to tell either way)."""
    try:
        chain = lineage_chain.trace(model_uri, verify=False)
    except (ValueError, OSError, storage.StorageError, MlflowException):  # no lineage here
        return None
    curations = curation_reports(chain)
    if not curations or not contaminated(curations, scored_sources(features_uri)):
        return None
    return (
        f"warning: {model_uri} was trained on data not decontaminated against {features_uri}, "
        "the set scored here: copies of its images may be in the training data (curate with "
        "decontaminate.against=[...], docs/curation.md)"
    )


def curation_reports(node: Any) -> list[tuple[str, dict[str, Any]]]:
    """(the dataset's folder, its stats.json as the chain shows it) of every curation in a
    lineage chain (lineage_chain.trace)."""
    found = []
    if isinstance(node, dict):
        if (node.get("origin") or {}).get("kind") == "curation":
            found.append((node["uri"], node["origin"]))
        for value in node.values():
            found += curation_reports(value)
    elif isinstance(node, list):
        for value in node:
            found += curation_reports(value)
    return found


def folder(uri: str) -> str:
    """A dataset's output folder, however it was named (`out`, `out/`, `out/curated`)."""
    uri = uri.rstrip("/")
    return next((uri.removesuffix(f"/{p}") for p in lineage.PARTS if uri.endswith(f"/{p}")), uri)


def scored_sources(features_uri: str) -> set[str]:
    """The folders a scored set is known by: its features' and the data they were made from."""
    sources = {folder(features_uri)}
    report = lineage.origin(folder(features_uri), "features").get("report") or {}
    if isinstance(report.get("curated"), str):
        sources.add(folder(report["curated"]))
    return sources


def contaminated(curations: list[tuple[str, dict[str, Any]]], scored: set[str]) -> bool:
    """Whether none of the curations was decontaminated against a folder in `scored`, and
    none of them is the scored set's own with near-duplicates removed."""
    for uri, report in curations:
        if any(folder(s["path"]) in scored for s in decontaminated(report)):
            return False
        if folder(uri) in scored and report.get("near_duplicates"):
            return False
    return True
