"""The captioning service's arguments: ServeConfig, the `args:` of serve/config.yaml."""

from __future__ import annotations

from pydantic import Field, model_validator

from conceptual.config import Config
from conceptual.limits import IMAGE_BYTES
from conceptual.models.variants import Language
from conceptual.serve.captioner_deployment import CaptioningSettings
from conceptual.serve.retriever_deployment import RetrievalSettings, searches

# The ingress's request slots: above max_in_flight, so health checks always find one free.
API_MAX_ONGOING_REQUESTS = 128


class ServeConfig(Config):
    """The application's arguments (`args:` in serve/config.yaml)."""

    # The caption languages served, each by a CaptionerDeployment of its own (Captioner,
    # CaptionerZh) following its registered model's champion; /readyz waits for each. English
    # may be left out (a Chinese-only service): requests that name no language ask for
    # English, and get 501 not_enabled there.
    languages: list[Language] = Field(["en"], min_length=1)
    # Each language's captioner (the `captioners` mapping reads them by language).
    captioner: CaptioningSettings = CaptioningSettings()  # English: models:/captioner@champion
    captioner_zh: CaptioningSettings = CaptioningSettings()  # models:/captioner-zh@champion
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
    # (conceptual.families: text, speech...). Each needs a champion with an index to be
    # ready; requests choose among them with ?retriever=.
    retrievers: list[str] = []
    retrieval: RetrievalSettings = RetrievalSettings()

    @model_validator(mode="after")
    def _default_beam_is_allowed(self) -> ServeConfig:
        if self.default_beam is not None and self.default_beam > self.max_beam:
            raise ValueError(f"default_beam {self.default_beam} > max_beam {self.max_beam}")
        unknown = [key for key in self.retrievers if key not in searches()]
        if unknown:
            raise ValueError(f"retrievers: {unknown} are not search keys ({', '.join(searches())})")
        if len(set(self.retrievers)) != len(self.retrievers):
            raise ValueError(f"retrievers {self.retrievers} names one twice")
        if len(set(self.languages)) != len(self.languages):
            raise ValueError(f"languages {self.languages} names one twice")
        if self.max_concurrent_uploads >= self.max_in_flight:
            raise ValueError(
                f"max_concurrent_uploads {self.max_concurrent_uploads} >= max_in_flight "
                f"{self.max_in_flight}: every upload is a request in flight, and slow uploads "
                "must leave slots for the requests already received"
            )
        return self

    @property
    def captioners(self) -> dict[str, CaptioningSettings]:
        """Every caption language's settings, served or not."""
        return {"en": self.captioner, "zh": self.captioner_zh}
