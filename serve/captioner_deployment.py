"""The captioning model deployment: the registry's champion captioner behind Serve's dynamic
batching, following the alias as it moves (conceptual.serve.champion).

One deployment per captioning key served (ServeConfig.captioners: the family table's
`captioning` entries, conceptual.pipelines.families), each named and following the champion of the
registered model its entry names (`en`: Captioner, `captioner`; `zh`: CaptionerZh,
`captioner-zh`). A version whose saved config says it writes another language than its
entry's is not served: the replica stays not ready (or keeps the version it had) and its
status says why.
A Chinese caption comes back as the model writes it, words joined by spaces ("一只 狗 在 跑"),
and as a reader writes it (`display`: "一只狗在跑").

Each request decodes its image off the event loop (the curation's guards: no bombs, no
crashes on broken files), then joins a batch. A batch is captioned by the one model version
current when it starts, in one `captions()` call per (beam size, number of captions) asked
in it, on the replica's one model thread. A replica given a GPU (`ray_actor_options:
{num_gpus: 1}` in the Serve config's `deployments`) runs the CNN and decodes there, a
Transformer as a bf16 copy (models.inference.ImageCaptioner); else on its CPUs.

A replica's memory is bounded: one thread decodes, and a request reserves the pixels its
image's header declares before decoding (`max_decode_pixels` in all), then keeps those its
decoded image holds until its captions are written; concurrent big images wait their turn
instead of multiplying the replica's memory. Expected refusals (not ready, unreadable image) come back as an ApiError value.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections import defaultdict, deque
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlflow.entities.model_registry import ModelVersion
from PIL import Image
from pydantic import Field, model_validator
from ray import serve

from conceptual import registry
from conceptual.logs import note
from conceptual.models.inference import ImageCaptioner, ImageError, read_image
from conceptual.models.saving import CONFIG, SavedCaptioner
from conceptual.models.variants import model_name
from conceptual.pipelines.families import captionings, family_of
from conceptual.serve.champion import (
    MODEL_DEPLOYMENT,
    Champion,
    ChampionSettings,
    NotReady,
)
from conceptual.serve.schema import (
    ApiError,
    CaptionResponse,
    ModelStatus,
    image_error,
    not_ready,
)
from conceptual.text.chinese import normalize
from conceptual.vision.decoding import probe

logger = logging.getLogger("ray.serve")

TASK = "captioning"


class CaptioningSettings(ChampionSettings):
    """The captioners' settings (ServeConfig.captioning), each served captioner's; which
    captioners run is ServeConfig.captioners. `model_name: NAME`, the English captioner's
    before captioners had keys, reads as models' en."""

    kind = "captioning"
    entries = staticmethod(captionings)

    max_batch_size: int = Field(8, ge=1)  # 1 turns batching off
    # How long a batch waits to fill up. Not at all by default: a lone request would pay all,
    # while under load requests queue (decoded) during the running batch, which the next
    # batch takes at once.
    batch_wait_timeout_s: float = Field(0.0, ge=0)
    # Pixels one replica decodes and holds at once (a decode reserves what the header
    # declares, the decoded image keeps what it has); more wait. RGB takes 3 bytes a pixel,
    # decoding twice that: 50M is about 0.3 GB.
    max_decode_pixels: int = Field(50_000_000, gt=0)
    # A Transformer decodes over a static key/value cache with its step compiled (a CUDA
    # graph on GPUs), once per batch size a replica meets: worth it on GPUs, where beam
    # search is otherwise launch-bound (BENCHMARKS.md, issue 50).
    compile_decoding: bool = False

    @model_validator(mode="before")
    @classmethod
    def _read_model_name(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "model_name" not in data:
            return data
        data = dict(data)
        note("captioning's `model_name` is now `models: {en: NAME}`: read so for this release")
        data["models"] = {"en": data.pop("model_name"), **(data.get("models") or {})}
        return data


def saved_language(model_dir: Path) -> str:
    """The language a saved captioner writes, read from its config.json without loading it
    (captioners saved before languages existed write English)."""
    saved = json.loads((model_dir / CONFIG).read_text())
    return saved.get("config", {}).get("language", "en")


def load_captioner(
    model_dir: Path,
    version: ModelVersion,
    language: str,
    compiled: bool = False,
    kind: type[SavedCaptioner] = SavedCaptioner,
) -> ImageCaptioner:
    """The version's captioner, once its saved config says it writes `language`; `kind`: the
    saved form of the family that serves it."""
    writes = saved_language(model_dir)
    if writes != language:
        raise NotReady(
            f"version {version.version} of {version.name!r} (the {registry.CHAMPION}) writes "
            f"{writes!r}, not {language!r}: it is not served as {language!r}; register it under "
            f"{model_name(writes)!r}"
        )
    return ImageCaptioner(model_dir, compiled=compiled, kind=kind)


def display(caption: str, language: str) -> str:
    """A caption as a reader writes it: Chinese without the spaces between its words (Latin
    words keep theirs); other languages as they are."""
    return normalize(caption) if language == "zh" else caption


@dataclass
class Reservation:
    pixels: int


class PixelBudget:
    """An asyncio semaphore weighted by pixels. `reserve(n)` waits, first come first served
    (so a big image is not starved by small ones), until n more pixels fit under `capacity`;
    an image over the whole budget gets all of it, alone. A reservation can `shrink` to what
    the decoded image turned out to hold (a JPEG decodes scaled down)."""

    def __init__(self, capacity: int):
        self.capacity, self.reserved = capacity, 0
        self._changed = asyncio.Condition()
        self._waiting: deque[Reservation] = deque()

    @asynccontextmanager
    async def reserve(self, pixels: int) -> AsyncIterator[Reservation]:
        reservation = Reservation(min(pixels, self.capacity))
        async with self._changed:
            self._waiting.append(reservation)
            try:
                await self._changed.wait_for(
                    lambda: (
                        self._waiting[0] is reservation
                        and self.reserved + reservation.pixels <= self.capacity
                    )
                )
            finally:  # served or cancelled, the next in line may go now
                self._waiting.remove(reservation)
                self._changed.notify_all()
            self.reserved += reservation.pixels
        try:
            yield reservation
        finally:
            await self._give_back(reservation.pixels)

    async def shrink(self, reservation: Reservation, pixels: int) -> None:
        """Keeps only `pixels` of `reservation` (at most what it has)."""
        spare = max(0, reservation.pixels - pixels)
        reservation.pixels -= spare
        await self._give_back(spare)

    async def _give_back(self, pixels: int) -> None:
        async with self._changed:
            self.reserved -= pixels
            self._changed.notify_all()


def declared_pixels(data: bytes) -> int:
    """Width x height from the image's header, without decoding; 0 for bytes with no
    readable header (decoding refuses those at once)."""
    info, _ = probe(data)
    return 0 if info is None else info.width * info.height


@dataclass(frozen=True)
class CaptionRequest:
    image: Image.Image
    beam: int
    num_captions: int
    queued_at: float  # time.perf_counter() when it was handed to the batcher


@dataclass(frozen=True)
class Captioned:
    response: CaptionResponse
    batch_size: int  # how many requests shared the model call
    # Where the replica's time went, in ms (the ingress sends them as Server-Timing): decode
    # (header, budget, decode), batch_wait (until its batch started), model, replica (all).
    timings: dict[str, float]


def since(started: float) -> float:
    """Milliseconds since `started` (a time.perf_counter() value)."""
    return (time.perf_counter() - started) * 1000


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
    name="Captioner",  # bound under its captioning entry's deployment name
    ray_actor_options={"num_cpus": 0.5},  # fractional: two replicas and the ingress fit 2 cores
    # One batch running (max_batch_size); the next waits at its caller, which holds at most
    # max_queued_requests: the wait a request can meet stays a few batches long.
    max_ongoing_requests=8,
    **MODEL_DEPLOYMENT,
)
class CaptionerDeployment:
    """Captions with the champion of captioning key `key`'s registered model, in its
    language; `caption` is what the ingress calls."""

    async def __init__(self, settings: CaptioningSettings, key: str = "en"):
        if settings.tracking_uri:
            os.environ["MLFLOW_TRACKING_URI"] = settings.tracking_uri  # registry calls read it
        self._caption_batch.set_max_batch_size(settings.max_batch_size)
        self._caption_batch.set_batch_wait_timeout_s(settings.batch_wait_timeout_s)
        self.decode_budget = PixelBudget(settings.max_decode_pixels)
        # One decoding thread: a replica has half a core, and malloc keeps memory that a
        # thread freed for that thread, so more decoding threads hold more memory.
        self.decoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="decode")
        # One thread runs the model: torch keeps a compiled step's CUDA graphs per thread
        # (compile_decoding), and a batch on another thread would record them all again.
        self.model_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="caption")
        entry = captionings()[key]
        self.key, self.language = key, entry.language
        kind = family_of(entry).saved()
        self.champion = Champion(
            settings.model_name(key),
            load=lambda path, version: load_captioner(
                path, version, self.language, settings.compile_decoding, kind
            ),
        )
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
            captioner=self.key,
            language=self.language,
            ready=served is not None,
            model=None if served is None else served.info,
            problem=self.champion.problem,
        )

    async def caption(
        self, data: bytes, beam: int | None, num_captions: int
    ) -> Captioned | ApiError:
        """`num_captions` captions of the encoded image, best first; or the refusal. `beam`
        None: the beam the served version was evaluated at."""
        started = time.perf_counter()
        served = self.champion.served
        if served is None:
            return not_ready()
        beam = beam or served.model.beam
        if num_captions > beam:
            return ApiError(
                422,
                "bad_parameter",
                f"num_captions {num_captions} > beam_size {beam} (the model's): "
                "a beam search keeps at most beam_size captions",
            )
        loop = asyncio.get_running_loop()
        pixels = await loop.run_in_executor(self.decoder, declared_pixels, data)
        async with self.decode_budget.reserve(pixels) as reservation:  # until captioned
            # Decoded for the current version's input size; should the alias move before
            # the batch runs, the next version's CNN resizes the image to its own.
            try:
                image = await loop.run_in_executor(
                    self.decoder, read_image, data, served.model.image_size
                )
            except ImageError as error:
                return image_error(error)
            await self.decode_budget.shrink(reservation, image.width * image.height)
            decode_ms = since(started)
            try:
                request = CaptionRequest(image, beam, num_captions, time.perf_counter())
                captioned = await self._caption_batch(request)
            except Exception:  # a model bug: answer it, keep the replica
                logger.exception("captioning failed")
                return ApiError(500, "model_error", "the model failed on this image; see the logs")
            captioned.timings.update(decode=decode_ms, replica=since(started))
            return captioned

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.0)  # set from the settings above
    async def _caption_batch(self, requests: list[CaptionRequest]) -> list[Captioned]:
        served = self.champion.served  # this batch's version, whatever the alias does meanwhile
        started = time.perf_counter()
        captions = await asyncio.get_running_loop().run_in_executor(
            self.model_thread, caption_grouped, served.model, requests
        )
        model_ms, model = since(started), served.info.ref()
        return [
            Captioned(
                CaptionResponse(
                    captions=answer,
                    display=[display(caption, self.language) for caption in answer],
                    language=self.language,
                    captioner=self.key,
                    model=model,
                    beam_size=request.beam,
                ),
                len(requests),
                {"batch_wait": (started - request.queued_at) * 1000, "model": model_ms},
            )
            for request, answer in zip(requests, captions)
        ]
