"""The captioning model deployment: the registry's champion captioner behind Serve's dynamic
batching, following the alias as it moves (conceptual.serve.champion).

Each request decodes its image off the event loop (the curation's guards: no bombs, no
crashes on broken files), then joins a batch. A batch is captioned by the one model version
current when it starts, in one `captions()` call per (beam size, number of captions) asked
in it. Expected refusals (not ready, unreadable image) come back as an ApiError value.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import defaultdict
from dataclasses import dataclass

from PIL import Image
from pydantic import Field
from ray import serve

from conceptual import registry
from conceptual.config import Config
from conceptual.models.inference import ImageCaptioner, ImageError, read_image
from conceptual.serve.champion import Champion
from conceptual.serve.schema import ApiError, CaptionResponse, ModelStatus, image_error

logger = logging.getLogger("ray.serve")

TASK = "captioning"


class CaptionerSettings(Config):
    model_name: str = registry.MODEL_NAME  # the registered model whose champion is served
    # None: the platform's default (conceptual.tracking.tracking_uri()) where the app is built.
    tracking_uri: str | None = None
    poll_seconds: float = Field(10.0, gt=0)  # how often each replica checks the alias
    max_batch_size: int = Field(8, ge=1)  # 1 turns batching off
    batch_wait_timeout_s: float = Field(0.02, ge=0)  # how long a batch waits to fill up


@dataclass(frozen=True)
class CaptionRequest:
    image: Image.Image
    beam: int
    num_captions: int


@dataclass(frozen=True)
class Captioned:
    response: CaptionResponse
    batch_size: int  # how many requests shared the model call


def caption_grouped(captioner: ImageCaptioner, requests: list[CaptionRequest]) -> list[list[str]]:
    """Each request's captions, in order: one model call per distinct (beam, num_captions),
    because a beam search runs at one beam size for all its images."""
    groups: dict[tuple[int, int], list[int]] = defaultdict(list)
    for index, request in enumerate(requests):
        groups[request.beam, request.num_captions].append(index)
    captions: list[list[str]] = [[] for _ in requests]
    for (beam, num_captions), indices in groups.items():
        images = [requests[index].image for index in indices]
        answers = captioner.captions(images, beam=beam, num_captions=num_captions)
        for index, answer in zip(indices, answers):
            captions[index] = answer
    return captions


@serve.deployment(
    name="Captioner",
    ray_actor_options={"num_cpus": 0.5},  # fractional: two replicas and the ingress fit 2 cores
    # Enough for one batch running and the next one filling up.
    max_ongoing_requests=16,
    autoscaling_config={
        "min_replicas": 1,
        "max_replicas": 2,
        "target_ongoing_requests": 4,
        "upscale_delay_s": 10,
        "downscale_delay_s": 120,
    },
)
class CaptionerDeployment:
    """Captions with the champion captioner; `caption` is what the ingress calls."""

    async def __init__(self, settings: CaptionerSettings):
        if settings.tracking_uri:
            os.environ["MLFLOW_TRACKING_URI"] = settings.tracking_uri  # registry calls read it
        self._caption_batch.set_max_batch_size(settings.max_batch_size)
        self._caption_batch.set_batch_wait_timeout_s(settings.batch_wait_timeout_s)
        self.champion = Champion(settings.model_name, load=ImageCaptioner)
        # The first load happens before Serve routes requests here, so a replica added by
        # the autoscaler never answers "not ready" while the champion exists. Without one,
        # the replica starts not ready and picks the champion up when it appears.
        await asyncio.to_thread(self.champion.refresh)
        # Held: the event loop keeps only a weak reference to a task.
        self._following = asyncio.create_task(self.champion.follow(settings.poll_seconds))

    def status(self) -> ModelStatus:
        served = self.champion.served
        return ModelStatus(
            task=TASK,
            ready=served is not None,
            model=None if served is None else served.info,
            problem=self.champion.problem,
        )

    async def caption(self, data: bytes, beam: int, num_captions: int) -> Captioned | ApiError:
        """`num_captions` captions of the encoded image, best first; or the refusal."""
        if self.champion.served is None:
            return ApiError(503, "not_ready", f"no model loaded yet: {self.champion.problem}")
        try:
            image = await asyncio.to_thread(read_image, data)
        except ImageError as error:
            return image_error(error)
        try:
            return await self._caption_batch(CaptionRequest(image, beam, num_captions))
        except Exception:  # a model bug: answer it, keep the replica
            logger.exception("captioning failed")
            return ApiError(500, "model_error", "the model failed on this image; see the logs")

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.02)  # set from the settings above
    async def _caption_batch(self, requests: list[CaptionRequest]) -> list[Captioned]:
        served = self.champion.served  # this batch's version, whatever the alias does meanwhile
        captions = await asyncio.to_thread(caption_grouped, served.model, requests)
        model = served.info.ref()
        return [
            Captioned(
                CaptionResponse(captions=answer, model=model, beam_size=request.beam), len(requests)
            )
            for request, answer in zip(requests, captions)
        ]
