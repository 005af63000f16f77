"""Follow the registry's `champion` alias: load the version it points at, and when the alias
moves, load the new version beside the old one, then swap a single reference.

    champion = Champion("captioner", load=lambda path, version: ImageCaptioner(path))
    champion.refresh()                          # blocking: registry lookups, download, load
    served = champion.served                    # Served(model, info) or None before the first load
    asyncio.create_task(champion.follow(10.0))  # in a replica: check every 10 s, forever

Whoever took `served` keeps that object for as long as it needs it (a batch in flight), so a
move never drops a request or answers one half by each version. Weights come from the
registry as saved (safetensors plus JSON): nothing is unpickled.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Generic, TypeVar

from mlflow.entities.model_registry import ModelVersion
from mlflow.tracking import MlflowClient
from pydantic import Field, model_validator

from conceptual import lineage, registry
from conceptual.config import Config
from conceptual.pipelines.families import Serving
from conceptual.serve.schema import RegisteredModel
from conceptual.tracking import configure
from conceptual.uris import redact_text

logger = logging.getLogger("ray.serve")  # Serve's replica logs

M = TypeVar("M")
# The controller learns of a crashed replica from its health check: every 2 s (Serve's
# default is 10), so its replacement starts sooner while requests wait in the queue.
MODEL_HEALTH_CHECK_PERIOD_S = 2
# Requests one caller (an ingress replica) queues at a model deployment beyond its replicas'
# max_ongoing_requests; more are refused at once (503 busy).
MAX_QUEUED_REQUESTS = 8
# How a deployment that serves a champion scales: a second replica when requests queue.
MODEL_AUTOSCALING = {
    "min_replicas": 1,
    "max_replicas": 2,
    "target_ongoing_requests": 4,
    "upscale_delay_s": 10,
    "downscale_delay_s": 120,
}
# The options every deployment that serves a champion shares: how far callers queue (more
# get 503 busy at once, BackPressureError, instead of a minute's wait), how it scales, how
# soon a crashed replica is replaced.
MODEL_DEPLOYMENT = {
    "max_queued_requests": MAX_QUEUED_REQUESTS,
    "autoscaling_config": MODEL_AUTOSCALING,
    "health_check_period_s": MODEL_HEALTH_CHECK_PERIOD_S,
}


class ChampionSettings(Config):
    """What the settings of every model deployment share: the registered model whose
    champion each of its keys follows, where the registry is, how often a replica looks."""

    kind: ClassVar[str]  # "captioning", "search": the family table's entries it serves
    entries: ClassVar[Callable[[], Mapping[str, Serving]]]  # those entries, by key

    # The registered model whose champion each key serves, where it is not its entry's
    # (Serving.model_name: captioner, retriever-text...).
    models: dict[str, str] = {}
    # None: the platform's default (conceptual.tracking.tracking_uri()) where the app is built.
    tracking_uri: str | None = None
    # How often each replica checks the alias (and a retriever its index tag).
    poll_seconds: float = Field(10.0, gt=0)

    @model_validator(mode="after")
    def _models_are_keys(self) -> ChampionSettings:
        known = type(self).entries()
        if unknown := sorted(set(self.models) - set(known)):
            raise ValueError(f"models: {unknown} are not {self.kind} keys ({', '.join(known)})")
        return self

    def model_name(self, key: str) -> str:
        """The registered model whose champion `key` serves."""
        return self.models.get(key) or type(self).entries()[key].model_name


@dataclass(frozen=True)
class Served(Generic[M]):
    model: M
    info: RegisteredModel


class NotReady(Exception):
    """Raised by a loader when the version cannot be served yet; its message says why (a
    retriever's version without an index). Serving goes on as it was, without a trace."""


def version_number(version: ModelVersion) -> str:
    return str(version.version)  # MLflow says int or str, depending on the store


class Champion(Generic[M]):
    """The model the `champion` alias of registered model `name` points at; `load` builds it
    from the version's local model folder (which is deleted once `load` returns) and the
    version (its tags). A new load happens when `identity(version)` changes: by default the
    version's number; a retriever's also names its index."""

    def __init__(
        self,
        name: str,
        load: Callable[[Path, ModelVersion], M],
        identity: Callable[[ModelVersion], str] = version_number,
    ):
        self.name, self.load, self.identity = name, load, identity
        self.served: Served[M] | None = None
        self.served_identity: str | None = None
        self.problem: str | None = "the registry has not been checked yet"

    def refresh(self) -> None:
        """Loads the champion when it is not the version served. Blocking (run it in a
        thread); failures are logged and kept in `problem`, and serving goes on as it was."""
        try:
            version = registry.champion_version(self.name)
            if version is None:
                self._not_served(f"no version of {self.name!r} has the alias {registry.CHAMPION!r}")
                return
            identity = self.identity(version)
            if self.served is None or self.served_identity != identity:
                self.served = self._load(version)
                self.served_identity = identity
                logger.info("serving %s version %s (%s)", self.name, version.version, identity)
            self.problem = None
        except NotReady as reason:
            self._not_served(str(reason))
        except Exception as error:  # the registry or a download failing must not stop serving
            # Redacted: MLflow's errors quote the tracking URI, credentials included, and
            # `problem` is shown by /readyz and /v1/models.
            self.problem = redact_text(f"{type(error).__name__}: {error}")[:500]
            trace = redact_text("".join(traceback.format_exception(error)))
            logger.error("checking the %s of %r failed:\n%s", registry.CHAMPION, self.name, trace)

    def _not_served(self, problem: str) -> None:
        """Keeps why the champion is not served, logged when it changes (clients are not
        told: /readyz shows it only with the service's admin_details)."""
        if problem != self.problem:
            logger.warning("the %s of %r is not served: %s", registry.CHAMPION, self.name, problem)
        self.problem = problem

    async def follow(self, poll_seconds: float) -> None:
        """Refreshes every `poll_seconds` off the event loop, until cancelled."""
        while True:
            await asyncio.sleep(poll_seconds)
            await asyncio.to_thread(self.refresh)

    def _load(self, version: ModelVersion) -> Served[M]:
        # By number, not alias: the files are those of the version just looked up.
        uri = f"models:/{self.name}/{version.version}"
        with tempfile.TemporaryDirectory(prefix="champion-") as directory:
            model = self.load(registry.resolve(uri, Path(directory)), version)
        return Served(model, describe(version))


def describe(version: ModelVersion) -> RegisteredModel:
    """The version's registry record: its tags, and the metrics of the run that made it."""
    metrics, datasets = {}, []
    if version.run_id:
        run = MlflowClient(configure()).get_run(version.run_id)
        metrics, datasets = run.data.metrics, lineage.inputs_of(run)
    return RegisteredModel(
        name=version.name,
        version=str(version.version),  # MLflow says int or str, depending on the store
        alias=registry.CHAMPION,
        variant=version.tags.get("variant"),
        run_id=version.run_id,
        tags=dict(version.tags),
        metrics=metrics,
        datasets=datasets,
    )
