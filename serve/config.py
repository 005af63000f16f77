"""The captioning service's arguments: ServeConfig, the `args:` of serve/config.yaml."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from conceptual.config import Config, ConfigError, renamed
from conceptual.limits import IMAGE_BYTES
from conceptual.logs import note
from conceptual.models.variants import language_code
from conceptual.pipelines.families import captionings, searches
from conceptual.serve.captioner_deployment import CaptioningSettings
from conceptual.serve.retriever_deployment import RetrievalSettings

# The ingress's request slots: above max_in_flight, so health checks always find one free.
API_MAX_ONGOING_REQUESTS = 128


class ServeConfig(Config):
    """The application's arguments (`args:` in serve/config.yaml)."""

    # The captioners to run, by the captioning keys of the family table (conceptual.pipelines.families:
    # en, zh, and those of any family added there), each a CaptionerDeployment of its own
    # following its registered model's champion; /readyz waits for each. Requests choose
    # with ?captioner=, or ?language= (the first listed that writes it; default en). English
    # may be left out (a Chinese-only service): requests that name neither get 501
    # not_enabled. (`languages`, its name before captioners had keys, is read for a release.)
    captioners: list[str] = Field(["en"], min_length=1)
    # Every captioner's settings (models: which registered model each follows, by key).
    captioning: CaptioningSettings = CaptioningSettings()
    max_beam: int = Field(8, ge=1)  # beam_size may go up to this
    # A request without beam_size decodes at this; None: at the beam the served model was
    # evaluated at (its saved `decoding.beam`), so a served caption is the caption scored.
    default_beam: int | None = Field(None, ge=1)
    max_body_bytes: int = Field(IMAGE_BYTES, gt=0)  # the fetcher's cap on an image
    # The whole body must arrive within this (16 MiB in 30 s is ~4.5 Mbit/s), else 408.
    body_timeout_s: float = Field(30.0, gt=0)
    # Bodies received at once by one ingress replica; more get 503 `busy`. Below
    # max_in_flight, so slow uploads never hold every slot.
    max_concurrent_uploads: int = Field(48, ge=1)
    # Model requests (captions, searches) one ingress replica holds at once, from the
    # body's first byte to the answer; more get 503 `busy` at once. Below the ingress's
    # API_MAX_ONGOING_REQUESTS, so /healthz and /readyz never wait behind them.
    max_in_flight: int = Field(64, ge=1, lt=API_MAX_ONGOING_REQUESTS)
    # Show /readyz and /v1/models in full (run ids, tags, metrics, why a model is not
    # loaded, which can name the service's paths): only where strangers cannot reach it.
    admin_details: bool = False
    # Opt-in search: the retrievers to run, by the search keys of the family table
    # (conceptual.pipelines.families: text, speech...). Each needs a champion with an index to be
    # ready; requests choose among them with ?retriever=.
    retrievers: list[str] = []
    retrieval: RetrievalSettings = RetrievalSettings()

    @model_validator(mode="before")
    @classmethod
    def _read_old_names(cls, data: Any) -> Any:
        """Before captioners had keys, `languages` listed them, `captioner` held their
        settings and `captioner_zh` the Chinese one's model: read so for this release."""
        if not isinstance(data, dict):
            return data
        if isinstance(data.get("languages"), list):  # language tags: zh-CN is zh's key
            data = {**data, "languages": [language_code(tag) for tag in data["languages"]]}
        data = renamed(data, {"languages": "captioners", "captioner": "captioning"})
        if (chinese := data.pop("captioner_zh", None)) is None:
            return data
        if not isinstance(chinese, dict):
            raise ConfigError(f"captioner_zh: {chinese!r} is not a mapping")
        if shared := sorted(set(chinese) - {"model_name"}):
            raise ConfigError(
                f"captioner_zh: {shared} are now captioning's, shared by every captioner; "
                "give them there, and the Chinese model as captioning.models.zh"
            )
        note("`captioner_zh.model_name` is now `captioning.models.zh`: read so for this release")
        captioning = dict(data.get("captioning") or {})
        if "model_name" in chinese:
            captioning["models"] = {"zh": chinese["model_name"], **(captioning.get("models") or {})}
        return {**data, "captioning": captioning}

    @model_validator(mode="after")
    def _default_beam_is_allowed(self) -> ServeConfig:
        if self.default_beam is not None and self.default_beam > self.max_beam:
            raise ValueError(f"default_beam {self.default_beam} > max_beam {self.max_beam}")
        for name, keys, kind, known in (
            ("captioners", self.captioners, "captioning", captionings()),
            ("retrievers", self.retrievers, "search", searches()),
        ):
            if unknown := [key for key in keys if key not in known]:
                raise ValueError(f"{name}: {unknown} are not {kind} keys ({', '.join(known)})")
            if len(set(keys)) != len(keys):
                raise ValueError(f"{name} {keys} names one twice")
        if self.max_concurrent_uploads >= self.max_in_flight:
            raise ValueError(
                f"max_concurrent_uploads {self.max_concurrent_uploads} >= max_in_flight "
                f"{self.max_in_flight}: every upload is a request in flight, and slow uploads "
                "must leave slots for the requests already received"
            )
        return self
