"""Follow the registry's `champion` alias: load the version it points at, and when the alias
moves, load the new version beside the old one, then swap a single reference.

    champion = Champion("captioner", load=ImageCaptioner)
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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from mlflow.entities.model_registry import ModelVersion
from mlflow.tracking import MlflowClient

from conceptual import registry
from conceptual.serve.schema import RegisteredModel
from conceptual.tracking import configure
from conceptual.uris import redact_text

logger = logging.getLogger("ray.serve")  # Serve's replica logs

M = TypeVar("M")


@dataclass(frozen=True)
class Served(Generic[M]):
    model: M
    info: RegisteredModel


class Champion(Generic[M]):
    """The model the `champion` alias of registered model `name` points at; `load` builds it
    from the version's local model folder (which is deleted once `load` returns)."""

    def __init__(self, name: str, load: Callable[[Path], M]):
        self.name, self.load = name, load
        self.served: Served[M] | None = None
        self.problem: str | None = "the registry has not been checked yet"

    def refresh(self) -> None:
        """Loads the champion when it is not the version served. Blocking (run it in a
        thread); failures are logged and kept in `problem`, and serving goes on as it was."""
        try:
            version = registry.champion_version(self.name)
            if version is None:
                self.problem = f"no version of {self.name!r} has the alias {registry.CHAMPION!r}"
                return
            if self.served is None or self.served.info.version != str(version.version):
                self.served = self._load(version)
                logger.info("serving %s version %s", self.name, version.version)
            self.problem = None
        except Exception as error:  # the registry or a download failing must not stop serving
            # Redacted: MLflow's errors quote the tracking URI, credentials included, and
            # `problem` is shown by /readyz and /v1/models.
            self.problem = redact_text(f"{type(error).__name__}: {error}")[:500]
            trace = redact_text("".join(traceback.format_exception(error)))
            logger.error("checking the %s of %r failed:\n%s", registry.CHAMPION, self.name, trace)

    async def follow(self, poll_seconds: float) -> None:
        """Refreshes every `poll_seconds` off the event loop, until cancelled."""
        while True:
            await asyncio.sleep(poll_seconds)
            await asyncio.to_thread(self.refresh)

    def _load(self, version: ModelVersion) -> Served[M]:
        # By number, not alias: the files are those of the version just looked up.
        uri = f"models:/{self.name}/{version.version}"
        with tempfile.TemporaryDirectory(prefix="champion-") as directory:
            model = self.load(registry.resolve(uri, Path(directory)))
        return Served(model, describe(version))


def describe(version: ModelVersion) -> RegisteredModel:
    """The version's registry record: its tags, and the metrics of the run that made it."""
    metrics = {}
    if version.run_id:
        metrics = MlflowClient(configure()).get_run(version.run_id).data.metrics
    return RegisteredModel(
        name=version.name,
        version=str(version.version),  # MLflow says int or str, depending on the store
        alias=registry.CHAMPION,
        variant=version.tags.get("variant"),
        run_id=version.run_id,
        tags=dict(version.tags),
        metrics=metrics,
    )
