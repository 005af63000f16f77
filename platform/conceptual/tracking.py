"""MLflow helpers: where runs go, and the few calls every job makes.

Default (the embedded platform): a SQLite database and an artifact folder in the state
directory (conceptual.paths). Point MLFLOW_TRACKING_URI at a tracking server to share runs.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Mapping
from typing import Any

import mlflow
from mlflow.tracking import MlflowClient

from conceptual.config import Config, flatten, to_yaml
from conceptual.paths import state_dir

MAX_PARAM_CHARS = 6000  # MLflow's limit on a param value


def tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{state_dir() / 'mlflow.db'}"


def local_artifact_root() -> str | None:
    """Where artifacts go when tracking is the embedded SQLite default (a server decides its own)."""
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return None
    return (state_dir() / "mlartifacts").as_uri()


def configure() -> str:
    uri = tracking_uri()
    mlflow.set_tracking_uri(uri)
    return uri


def ensure_experiment(name: str) -> str:
    configure()
    client = MlflowClient()
    experiment = client.get_experiment_by_name(name)
    if experiment is not None:
        return experiment.experiment_id
    root = local_artifact_root()
    return client.create_experiment(name, artifact_location=f"{root}/{name}" if root else None)


@contextlib.contextmanager
def start_run(
    experiment: str, run_name: str | None = None, tags: Mapping[str, str] | None = None
) -> Iterator[mlflow.ActiveRun]:
    experiment_id = ensure_experiment(experiment)
    with mlflow.start_run(
        experiment_id=experiment_id, run_name=run_name, tags=dict(tags or {})
    ) as run:
        yield run


def log_config(cfg: Config) -> None:
    """The full resolved config: every leaf as a param, and the YAML as an artifact."""
    params = {k: _param_value(v) for k, v in flatten(cfg).items()}
    mlflow.log_params(params)
    mlflow.log_text(to_yaml(cfg), "config.yaml")


def _param_value(value: Any) -> str:
    text = str(value)
    return text if len(text) <= MAX_PARAM_CHARS else text[: MAX_PARAM_CHARS - 3] + "..."


def metric_key(*parts: str) -> str:
    """MLflow names allow letters, digits, `_-./` and spaces; anything else becomes `_`
    (an evaluation set named by its URI, for one)."""
    return ".".join(re.sub(r"[^\w\-./ ]", "_", p) for p in parts)
