"""The retrieval deployments: one per search key of the family table
(conceptual.pipelines.families: each family's `search` entries) that ServeConfig.retrievers lists, each
serving the champion of the entry's registered model (`retriever-text`...) with the index its
version's `index` tag names (the build_index job sets it), following both as they move. What
a deployment answers is its model's query modality (Search.modality):

- text (`TextRetriever`, or another family's DualEncoder of modality text, as a contrastive
  text-image model is saved):
                           images for a text query; captions for an image query, the image's
                           features computed here with the CNN and image size the model was
                           saved with (as the features job computed its training images';
                           a model saved before it recorded them: those the index records),
                           or, for a model that fine-tuned its CNN, its centre square at the
                           model's image size through the model's own CNN (as build_index
                           embedded the indexed photos).
- speech (`SpeechRetriever`): images for a spoken query (WAV, FLAC or MP3), heard as the
                           model was trained to hear (its saved MFCC settings: the clip's
                           first `seconds`, padded with silence). Its header is checked
                           before decoding (conceptual.speech.audio.decode_checked), and it is
                           decoded in a thread of its own, within a deadline, at most
                           `max_audio_seconds` of it, samples clipped to [-1, 1].

A champion without an `index` tag cannot be served: the replica is not ready, and its
problem says to run build_index. When the alias moves to a version without an index while
another version is served, that one goes on answering (its responses name it) and the
problem says why the new one is not served. An index built for another version than the
one tagged is refused the same way.

Expected refusals come back as ApiError values (as the captioner's do):

| status | code | when |
|---|---|---|
| 415 | unsupported_format | audio that is not WAV, FLAC or MP3 (Ogg, Opus...) |
| 415 | format_mismatch | a container other than the one its media type names |
| 422 | bad_sample_rate, too_many_channels | outside 8-48 kHz; more than 2 channels |
| 413 | audio_too_long | more than `max_audio_seconds` of audio (header, then counted) |
| 400 | bad_audio | a header or data libsndfile cannot read; samples that are not numbers |
| 400 | empty_audio | audio without a single sample |
| 422 | decode_timeout | decoding took over `audio_decode_timeout_s` |
| 415, 422 | not_an_image, truncated, ... | an image query the decoder refuses (as /v1/captions) |
| 503 | not_ready | no champion with an index loaded yet |
| 500 | model_error | a bug: the model or the index failed on a valid query |

The ingress (conceptual.serve.app) checks the rest first: the media type (415), k (422),
the text (422 empty, 413 too long) and the body (400, 408, 413).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import posixpath
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np
import torch
from mlflow.entities.model_registry import ModelVersion
from PIL import Image
from pydantic import BaseModel, Field, model_validator
from ray import serve

from conceptual import registry, storage
from conceptual.models.inference import ImageError, read_image
from conceptual.models.retriever import Modality
from conceptual.models.saving import FeatureSettings, SavedRetriever, load
from conceptual.pipelines.families import searches
from conceptual.retrieval_index import INDEX_TAG, RetrievalIndex
from conceptual.serve.captioner_deployment import PixelBudget, declared_pixels
from conceptual.serve.champion import (
    MODEL_DEPLOYMENT,
    Champion,
    ChampionSettings,
    NotReady,
    Served,
)
from conceptual.serve.schema import (
    ApiError,
    ModelRef,
    ModelStatus,
    image_error,
    image_reference,
    not_ready,
)
from conceptual.speech.audio import AudioRefused, decode_checked
from conceptual.speech.features import AudioFeatureConfig, samples_features
from conceptual.speech.recognizer import AsrConfig, Recognizer
from conceptual.vision.cnn import CnnConfig, FeatureExtractor, to_pixels

logger = logging.getLogger("ray.serve")


T = TypeVar("T")


class RetrievalSettings(ChampionSettings):
    """The search service's settings (ServeConfig.retrieval); which retrievers run is
    ServeConfig.retrievers. `text_model: NAME` and `speech_model: NAME` read as models' text
    and speech."""

    kind = "search"
    entries = staticmethod(searches)

    approximate: bool = True  # search the FAISS index when the index has one; else exact
    max_k: int = Field(100, ge=1)  # k may go up to this
    default_k: int = Field(10, ge=1)
    max_text_chars: int = Field(1000, ge=1)  # a longer text query gets 413
    max_text_bytes: int = Field(64 << 10, gt=0)  # a JSON body over this gets 413
    max_audio_seconds: float = Field(30.0, gt=0)  # a longer audio query gets 413
    # Spoken queries through the offline recognizer (conceptual.speech.recognizer) and the
    # text champion, instead of the speech champion: the ingress sends audio to the text
    # retriever, which transcribes it, with the champion's caption language model
    # (asr.lm=captions) or the general one, and searches with the transcript. `asr: true`
    # reads as asr.enabled.
    asr: AsrConfig = AsrConfig()
    audio_decode_timeout_s: float = Field(5.0, gt=0)  # a slower decode gets 422
    max_decode_pixels: int = Field(50_000_000, gt=0)  # as the captioner's, per replica

    @model_validator(mode="before")
    @classmethod
    def _model_keys(cls, data: Any) -> Any:
        """`text_model` and `speech_model`, the keys before `models`, as models' entries."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        named = {
            key: data.pop(f"{key}_model") for key in ("text", "speech") if f"{key}_model" in data
        }
        if named:
            data["models"] = {**named, **(data.get("models") or {})}
        return data

    @model_validator(mode="after")
    def _default_k_is_allowed(self) -> RetrievalSettings:
        if self.default_k > self.max_k:
            raise ValueError(f"default_k {self.default_k} > max_k {self.max_k}")
        return self


# --- responses ------------------------------------------------------------------------------


class ImageHit(BaseModel):
    image_id: str = Field(description="SHA-1 of the image's bytes")
    image_url: str | None = Field(description="the image's public (http or https) URL, when known")
    image_path: str | None = Field(
        description="for an image without a public URL, its path in the imported dataset "
        "(`val2017/000000000139.jpg`); never a path on the service's machines"
    )
    caption: str | None = Field(description="one of the image's captions")
    score: float = Field(
        description="inner product of the embeddings (cosine if normalized)", allow_inf_nan=False
    )


class CaptionHit(BaseModel):
    caption_id: str
    image_id: str = Field(description="the image the caption was written for")
    caption: str
    score: float = Field(allow_inf_nan=False)  # a number: NaN would be JSON's null


class ImageSearchResponse(BaseModel):
    images: list[ImageHit] = Field(description="the top k images, best first")
    query: Modality
    path: Literal["text", "speech", "asr"] = Field(
        description="how the query was searched: text; speech, by the speech model; asr, "
        "transcribed by the offline recognizer and searched by the text model"
    )
    transcript: str | None = Field(None, description="what the recognizer heard (path asr)")
    model: ModelRef
    approximate: bool = Field(description="found by the approximate (FAISS) index")


class CaptionSearchResponse(BaseModel):
    captions: list[CaptionHit] = Field(description="the top k captions, best first")
    model: ModelRef
    approximate: bool


# --- reading queries ------------------------------------------------------------------------


# Each audio refusal's status; its code is the reason (too_long: audio_too_long).
AUDIO_STATUSES = {
    "unsupported_format": 415, "format_mismatch": 415, "bad_sample_rate": 422,
    "too_many_channels": 422, "too_long": 413, "bad_audio": 400, "empty_audio": 400,
    "decode_timeout": 422,
}  # fmt: skip


def read_audio(
    data: bytes, media_type: str | None, max_seconds: float, deadline_s: float
) -> np.ndarray:
    """An audio query as 16 kHz mono float32 samples in [-1, 1], its header checked before
    it is decoded (conceptual.speech.audio.decode_checked); ApiError for a refusal."""
    try:
        return decode_checked(data, max_seconds, media_type, deadline_s)
    except AudioRefused as refused:
        code = "audio_too_long" if refused.reason == "too_long" else refused.reason
        raise ApiError(AUDIO_STATUSES[refused.reason], code, refused.message) from refused


@functools.lru_cache(maxsize=2)
def feature_extractor(features: FeatureSettings) -> FeatureExtractor:
    """The CNN a model's images went through (kept across model versions)."""
    return FeatureExtractor(CnnConfig(model=features.model), image_size=features.image_size)


class Searcher:
    """One model version and its index: queries in, ranked images or captions out."""

    def __init__(
        self,
        model_dir: Path,
        index: RetrievalIndex,
        approximate: bool,
        asr: AsrConfig | None = None,
    ):
        saved = load(model_dir, kind=SavedRetriever)
        self.model, self.vocab = saved.model, saved.vocab
        self.modality: Modality = self.model.config.modality
        # A text model hearing spoken queries: a recognizer with this version's caption
        # model, used by the replica's one search thread only.
        hears = asr is not None and asr.enabled and self.modality == "text"
        self.recognizer = Recognizer(asr.language_model(saved.language_model)) if hears else None
        manifest = index.manifest
        if manifest["modality"] != self.modality or index.embed_dim != self.model.config.embed_dim:
            raise ValueError(
                f"the index at {index.uri} holds {manifest['modality']} embeddings of "
                f"{index.embed_dim} dimensions; the model makes {self.modality} ones of "
                f"{self.model.config.embed_dim}"
            )
        self.index, self.approximate = index, approximate
        self.audio = AudioFeatureConfig.model_validate(saved.audio or {})
        self.searches_captions = self.modality == "text" and index.searchable("captions")
        self.extractor = None  # the features job's CNN, for a model over its pooled vectors
        if self.searches_captions and self.model.config.photo_size is None:
            # A model saved before it recorded its features' CNN was trained on features
            # made as the index's were, which the index records.
            indexed = {key: manifest["features"][key] for key in ("model", "image_size")}
            features = saved.features or FeatureSettings.model_validate(indexed)
            self.extractor = feature_extractor(features)

    @property
    def image_size(self) -> int:
        """The side of the image tower's input: the model's own (finetune), else the
        features' (only a searcher of captions reads images)."""
        own = self.model.config.photo_size
        return own if own is not None else self.extractor.image_size

    def _embed_query(self, inputs: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return self.model.embed_queries(torch.as_tensor(inputs)).float().numpy()

    def embed_text(self, text: str) -> np.ndarray:
        return self._embed_query(self.vocab.encode_array([text], self.model.config.max_tokens))

    def embed_audio(self, samples: np.ndarray) -> np.ndarray:
        """16 kHz samples, heard as in evaluation: the first `seconds`, padded with silence."""
        return self._embed_query(samples_features(samples, self.audio)[None])

    def embed_image(self, image: Image.Image) -> np.ndarray:
        if self.extractor is None:  # the model's own CNN reads the pixels
            inputs = to_pixels([image], self.image_size)
        else:
            [[(pooled, _)]] = self.extractor.extract([image])
            inputs = pooled[None]
        with torch.inference_mode():
            return self.model.embed_images(torch.as_tensor(inputs)).float().numpy()

    def read_image(self, data: bytes) -> Image.Image:
        """The image decoded as the indexed images were (JPEGs scaled down toward
        `image_size`), with the curation's guards; ImageError when it cannot be."""
        return read_image(data, self.image_size)

    def _search(self, query: np.ndarray, k: int, target: str) -> tuple[list, bool]:
        approximate = self.approximate and target in self.index.approximate
        found = self.index.search(query, k, target, approximate=approximate)
        rows = found.found(0)
        records = self.index.records(target, [row for row, _ in rows])
        return [(record, score) for record, (_, score) in zip(records, rows)], approximate

    def images(self, query: np.ndarray, k: int) -> tuple[list[ImageHit], bool]:
        hits, approximate = self._search(query, k, "images")
        return [
            ImageHit(
                image_id=record["image_id"],
                image_url=url,
                image_path=path,
                caption=record.get("caption"),
                score=score,
            )
            for record, score in hits
            for url, path in [image_reference(record.get("image_url"))]
        ], approximate

    def captions(self, query: np.ndarray, k: int) -> tuple[list[CaptionHit], bool]:
        hits, approximate = self._search(query, k, "captions")
        return [
            CaptionHit(
                caption_id=record["id"],
                image_id=record["image_id"],
                caption=record["caption"],
                score=score,
            )
            for record, score in hits
        ], approximate


# --- following the champion and its index ---------------------------------------------------


def index_of(version: ModelVersion) -> str:
    """The index a retriever's version is served with: its `index` tag."""
    index_uri = version.tags.get(INDEX_TAG)
    if index_uri is None:
        raise NotReady(
            f"version {version.version} of {version.name!r} (the {registry.CHAMPION}) has no "
            f"{INDEX_TAG!r} tag: run {build_index_command(version)}"
        )
    return index_uri


def build_index_command(
    version: ModelVersion, features: str = "FEATURES", speech: str | None = None, output="URI"
) -> str:
    """The build_index command that indexes `version` (and tags it with the index)."""
    clips = f" --speech {speech}" if speech else ""
    return (
        f"python -m conceptual.jobs.build_index --model models:/{version.name}/{version.version}"
        f" --data {features}{clips} --output {output}"
    )


def load_searcher(
    model_dir: Path, version: ModelVersion, approximate: bool, asr: AsrConfig
) -> Searcher:
    """The version's model with its index, which must have been built for that version."""
    index_uri = index_of(version)
    index = RetrievalIndex.load(index_uri, approximate=approximate)
    built_for = index.manifest.get("registered")
    if built_for is not None and (built_for["name"], built_for["version"]) != (
        version.name,
        str(version.version),
    ):
        # The same features (and clips), into a folder of the version's own: the index
        # there may still serve the version it was built for.
        command = build_index_command(
            version,
            index.manifest["features"]["uri"],
            index.manifest.get("speech_uri"),
            storage.join(posixpath.dirname(index_uri.rstrip("/")), version.name),
        )
        raise ValueError(
            f"the index at {index_uri} was built for {built_for['name']} version "
            f"{built_for['version']}, not {version.name} version {version.version}: run {command}"
        )
    return Searcher(model_dir, index, approximate, asr)


def version_and_index(version: ModelVersion) -> str:
    """A retriever is reloaded when its version or its index changes."""
    return f"version {version.version}, index {version.tags.get(INDEX_TAG)}"


@serve.deployment(
    name="Retriever",  # bound under its search key's deployment name (TextRetriever...)
    ray_actor_options={"num_cpus": 0.2},  # fractional: both retrievers fit beside captioning
    max_ongoing_requests=16,
    **MODEL_DEPLOYMENT,
)
class RetrieverDeployment:
    """Searches with the champion of one search key (`searches()`); the ingress calls
    `search_text`, `search_audio` and `search_image`."""

    async def __init__(self, settings: RetrievalSettings, key: str):
        if settings.tracking_uri:
            os.environ["MLFLOW_TRACKING_URI"] = settings.tracking_uri  # registry calls read it
        self.settings, self.key = settings, key
        # One thread embeds and searches, another decodes audio: a replica's memory and CPU
        # stay bounded, and a slow decode never holds up another query's search.
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="search")
        self.audio_decoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="decode")
        self.decode_budget = PixelBudget(settings.max_decode_pixels)
        self.champion = Champion(
            settings.model_name(key),
            load=functools.partial(
                load_searcher, approximate=settings.approximate, asr=settings.asr
            ),
            identity=version_and_index,
        )
        await asyncio.to_thread(self.champion.refresh)
        self._following = asyncio.create_task(self.champion.follow(settings.poll_seconds))

    def status(self) -> ModelStatus:
        served = self.champion.served
        return ModelStatus(
            task=f"{self.key}_retrieval",
            ready=served is not None,
            model=None if served is None else served.info,
            problem=self.champion.problem,
        )

    def _served(self) -> Served[Searcher] | ApiError:
        served = self.champion.served
        if served is None:
            return not_ready()
        return served

    async def search_text(self, text: str, k: int) -> ImageSearchResponse | ApiError:
        served = self._served()
        if isinstance(served, ApiError):
            return served
        return await self._search_images(served, "text", lambda s: s.embed_text(text), k)

    async def search_audio(
        self, data: bytes, k: int, media_type: str | None = None
    ) -> ImageSearchResponse | ApiError:
        """Images for a spoken query; `media_type` is what the client said it sent (None:
        any of WAV, FLAC, MP3)."""
        served = self._served()
        if isinstance(served, ApiError):
            return served
        settings = self.settings
        try:
            samples = await asyncio.get_running_loop().run_in_executor(
                self.audio_decoder,
                read_audio,
                data,
                media_type,
                settings.max_audio_seconds,
                settings.audio_decode_timeout_s,
            )
        except ApiError as error:
            return error
        recognizer = served.model.recognizer
        if recognizer is None:
            return await self._search_images(served, "speech", lambda s: s.embed_audio(samples), k)
        transcript = await self._run(recognizer.transcribe, samples)
        return await self._search_images(
            served, "speech", lambda s: s.embed_text(transcript), k, transcript
        )

    async def _search_images(
        self,
        served: Served[Searcher],
        query: str,
        embed: Callable[[Searcher], Any],
        k: int,
        transcript: str | None = None,
    ) -> ImageSearchResponse | ApiError:
        """The `k` images nearest to a query, embedded by `embed` with the served searcher;
        `transcript` when a spoken query was searched as the recognizer's text."""

        def work() -> ImageSearchResponse:
            images, approximate = served.model.images(embed(served.model), k)
            return ImageSearchResponse(
                images=images,
                query=query,
                path="asr" if transcript is not None else query,
                transcript=transcript,
                model=served.info.ref(),
                approximate=approximate,
            )

        return await self._answer(work)

    async def search_image(self, data: bytes, k: int) -> CaptionSearchResponse | ApiError:
        served = self._served()
        if isinstance(served, ApiError):
            return served
        searcher = served.model
        if not searcher.searches_captions:
            return ApiError(503, "not_ready", "the index holds no caption embeddings")
        pixels = await self._run(declared_pixels, data)
        async with self.decode_budget.reserve(pixels) as reservation:  # until embedded
            try:
                image = await self._run(searcher.read_image, data)
            except ImageError as error:
                return image_error(error)
            await self.decode_budget.shrink(reservation, image.width * image.height)

            def work() -> CaptionSearchResponse:
                captions, approximate = searcher.captions(searcher.embed_image(image), k)
                return CaptionSearchResponse(
                    captions=captions, model=served.info.ref(), approximate=approximate
                )

            return await self._answer(work)

    async def _run(self, function: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.worker, function, *args)

    async def _answer(self, work: Callable[[], T]) -> T | ApiError:
        """`work`'s response, computed in the worker thread; a failure is a 500."""
        try:
            return await self._run(work)
        except Exception:  # a model or index bug: answer it, keep the replica
            logger.exception("%s search failed", self.key)
            return ApiError(500, "model_error", "the search failed on this query; see the logs")
