"""The model registry rule for captioners: every trained model becomes a registered version;
the alias `champion` (what Serve loads) moves only to a model that scores better on the same
evaluation set.

    # a training run saves its best model as the run's `model` artifacts (runs:/<id>/model)
    version = register(run_id, {"variant": "transformer-8x8"})
    decision = promote_if_better(version, score=0.87, eval_set="val-2024")
    saved = load(resolve("models:/captioner@champion"))   # models.saving.load

Scores live on the versions as tags named `eval.<eval_set>.<metric>`, so the registry alone
says which set a score came from; a champion without a score on the challenger's set is kept
(comparing scores from different sets says nothing) until someone evaluates it on that set.
A score of zero, or one measured on fewer images than `min_eval_size`, makes no champion:
on 6 dev captions CIDEr is 0 for a model that writes "a ." and for a good one alike.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mlflow
from mlflow.entities.model_registry import ModelVersion
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import (
    RESOURCE_ALREADY_EXISTS,
    RESOURCE_DOES_NOT_EXIST,
    ErrorCode,
)
from mlflow.tracking import MlflowClient

from conceptual.models.variants import MODEL_NAME
from conceptual.tracking import configure, metric_key

CHAMPION = "champion"
DECISION_ARTIFACT = "champion_decision.json"


def eval_set_name(data_uri: str, split: str, size: int, content: Any) -> str:
    """What a model's scores were measured on, `folder#split:size:digest`: the data's folder,
    its split, the number of items scored and a digest of `content` (JSON-serializable),
    what exactly was scored: scores are compared only on the same set, and the same set read
    from another place (a copy, a submitted job's path) keeps its name, while two datasets
    that happen to share a folder name do not. Every family names its sets here: a
    captioner's by its images' references (CIDEr's document frequencies come from them), a
    retriever's by its images and queries, the fluency classifier's by its labels."""
    digest = hashlib.sha1(json.dumps(content, sort_keys=True).encode()).hexdigest()[:8]
    name = data_uri.rstrip("/").rsplit("/", 1)[-1] or "features"
    return f"{name}#{split}:{size}:{digest}"


def eval_set_size(eval_set: str) -> int | None:
    """How many items an `eval_set_name` holds; None for a name of another form."""
    size = eval_set.rsplit("#", 1)[-1].split(":")
    return int(size[1]) if len(size) == 3 and size[1].isdigit() else None


def register(
    run_id: str, tags: Mapping[str, str], artifact_path: str = "model", name: str = MODEL_NAME
) -> ModelVersion:
    """A new version of `name` from the run's saved model folder (no MLmodel flavor needed:
    the registry only records where the files are), tagged e.g. variant=transformer-8x8."""
    client = _client()
    try:
        client.create_registered_model(name)
    except MlflowException as error:
        if error.error_code != ErrorCode.Name(RESOURCE_ALREADY_EXISTS):
            raise
    return client.create_model_version(
        name, source=f"runs:/{run_id}/{artifact_path}", run_id=run_id, tags=dict(tags)
    )


def score_tag(eval_set: str, metric: str = "CIDEr") -> str:
    return metric_key("eval", eval_set, metric)


def champion_version(name: str = MODEL_NAME) -> ModelVersion | None:
    """The version the `champion` alias points at (its tags hold its scores); None without one."""
    return _champion(_client(), name)


def record_score(version: ModelVersion, score: float, eval_set: str, metric: str = "CIDEr") -> str:
    """Tags the version with its score on `eval_set` (what the champion rule compares);
    returns the version number."""
    tag = score_tag(eval_set, metric)
    _client().set_model_version_tag(version.name, version.version, tag, str(float(score)))
    return version.version


def newest_version(name: str = MODEL_NAME) -> ModelVersion | None:
    """The version of `name` registered last (the highest number); None without one."""
    try:
        versions = _client().search_model_versions(f"name = '{name}'")
    except MlflowException as error:
        if error.error_code != ErrorCode.Name(RESOURCE_DOES_NOT_EXIST):
            raise
        return None
    return max(versions, key=lambda version: int(version.version), default=None)


def registered_version(model_uri: str) -> ModelVersion | None:
    """The registry version a `models:/name/N` or `models:/name@alias` URI names; None for
    any other URI (a run's artifacts, a local directory), which has no version to tag."""
    if not model_uri.startswith("models:/"):
        return None
    client = _client()
    path = model_uri.removeprefix("models:/").strip("/")
    try:
        if "@" in path:
            name, alias = path.split("@", 1)
            return client.get_model_version_by_alias(name, alias)
        name, _, number = path.rpartition("/")
        return client.get_model_version(name, number)
    except MlflowException as error:
        raise ValueError(f"cannot resolve {model_uri!r}: {error.message}") from error


def promote_if_better(
    version: ModelVersion | str,
    score: float,
    eval_set: str,
    metric: str = "CIDEr",
    name: str = MODEL_NAME,
    min_eval_size: int = 0,
) -> dict[str, Any]:
    """Records the challenger's score on its version, then moves `champion` to it when there
    is no champion yet or the champion scored strictly lower on the same `eval_set`, unless
    the score is zero or `eval_set` holds fewer than `min_eval_size` items.

    Returns the decision: {"promoted", "reason" (stable: first_champion, better, not_better,
    champion_unscored, already_champion, zero_score, eval_set_too_small), "detail",
    "eval_set", "metric", "challenger", "champion"}; inside an active run it is also logged
    as champion_decision.json."""
    client = _client()
    if isinstance(version, ModelVersion):
        name = version.name
    else:
        version = client.get_model_version(name, str(version))
    number, score = record_score(version, score, eval_set, metric), float(score)
    champion = _champion(client, name)
    held = None if champion is None else _score(champion, eval_set, metric)
    held_by = None if champion is None else champion.version
    promoted, reason, detail = _meaningless(score, eval_set, metric, min_eval_size) or _judge(
        number, score, held_by, held, eval_set, metric
    )
    if promoted:
        client.set_registered_model_alias(name, CHAMPION, number)
    decision = {
        "promoted": promoted,
        "reason": reason,
        "detail": detail,
        "eval_set": eval_set,
        "metric": metric,
        "challenger": {"version": number, "score": score},
        "champion": None if champion is None else {"version": held_by, "score": held},
    }
    _log_decision(decision)
    return decision


def publish(
    run_id: str,
    variant: str,
    score: float,
    eval_set: str,
    metric: str,
    name: str,
    min_eval_size: int = 0,
) -> dict[str, Any]:
    """A training run's model (its `model/` artifacts) registered as a version of `name`
    tagged with its variant, and `champion` moved to it if it beats the champion on the same
    set (promote_if_better); the decision is logged to the run. Returns it, with the model's
    `name` and the new `version`."""
    with mlflow.start_run(run_id=run_id):
        version = register(run_id, tags={"variant": variant}, name=name)
        decision = promote_if_better(version, score, eval_set, metric, name, min_eval_size)
    return {**decision, "name": name, "version": version.version}


def decision_lines(decision: Mapping[str, Any]) -> str:
    """A publish() decision as jobs print it: the version registered, the champion rule's
    reason and detail."""
    return (
        f"registered: models:/{decision['name']}/{decision['version']}\n"
        f"champion: {decision['reason']}: {decision['detail']}"
    )


def _meaningless(
    score: float, eval_set: str, metric: str, min_eval_size: int
) -> tuple[bool, str, str] | None:
    """Not promoted, and why, when the score says nothing; None when it may be compared."""
    size = eval_set_size(eval_set)
    if size is not None and size < min_eval_size:
        return (
            False,
            "eval_set_too_small",
            f"{eval_set!r} holds {size} items, fewer than min_eval_size={min_eval_size}: "
            f"its {metric} says little, so no {CHAMPION} is made of it",
        )
    if score <= 0:
        return False, "zero_score", f"{metric} {score:g} on {eval_set!r}: nothing to serve"
    return None


def _judge(
    challenger: str,
    score: float,
    champion: str | None,
    held: float | None,
    eval_set: str,
    metric: str,
) -> tuple[bool, str, str]:
    """(promoted, reason, detail): `held` is the champion's score on the same set, if any."""
    if champion is None:
        return True, "first_champion", f"no {CHAMPION} yet: version {challenger} becomes it"
    if champion == challenger:
        return False, "already_champion", f"version {challenger} already is the {CHAMPION}"
    if held is None:
        return (
            False,
            "champion_unscored",
            f"{CHAMPION} version {champion} has no {metric} on {eval_set!r}: evaluate it on "
            f"the same set first (tag {score_tag(eval_set, metric)})",
        )
    if score > held:
        return True, "better", f"{metric} on {eval_set!r}: {score:g} beats {held:g}"
    return False, "not_better", f"{metric} on {eval_set!r}: {score:g} does not beat {held:g}"


def resolve(model_uri: str, dst: Path | None = None) -> Path:
    """A local directory holding the saved model (load it with saving.load) for
    `models:/captioner@champion`, `models:/captioner/3`, `runs:/<id>/model` or a local path."""
    if Path(model_uri).is_dir():
        return Path(model_uri)  # already local: nothing to fetch, `dst` is not used
    if ":" not in model_uri:
        raise ValueError(f"{model_uri!r} is neither a model URI nor a local directory")
    configure()
    try:
        local = mlflow.artifacts.download_artifacts(
            artifact_uri=model_uri, dst_path=None if dst is None else str(dst)
        )
    except MlflowException as error:
        raise ValueError(f"cannot resolve {model_uri!r}: {error.message}") from error
    return Path(local)


def _client() -> MlflowClient:
    return MlflowClient(configure())


def _champion(client: MlflowClient, name: str) -> ModelVersion | None:
    try:
        aliases = client.get_registered_model(name).aliases
    except MlflowException as error:
        if error.error_code != ErrorCode.Name(RESOURCE_DOES_NOT_EXIST):
            raise
        return None  # nothing registered under `name` yet
    return client.get_model_version(name, aliases[CHAMPION]) if CHAMPION in aliases else None


def _score(version: ModelVersion, eval_set: str, metric: str) -> float | None:
    value = version.tags.get(score_tag(eval_set, metric))
    return None if value is None else float(value)


def _log_decision(decision: Mapping[str, Any]) -> None:
    if mlflow.active_run() is None:
        return
    mlflow.log_dict(dict(decision), DECISION_ARTIFACT)
    mlflow.set_tag("champion_decision", decision["reason"])
