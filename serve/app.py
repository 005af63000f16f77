"""The captioning service on Ray Serve: a FastAPI ingress (`Api`) in front of the model
deployments: a champion captioner per caption language (conceptual.serve.captioner_deployment;
English by default, more opt-in with `ServeConfig.languages`) and, opt-in
(`ServeConfig.retrievers`), the champion retrievers with their indexes
(conceptual.serve.retriever_deployment).

    serve run serve/config.yaml                  # import_path conceptual.serve.app:build_app
    url = start(ServeConfig(), port=8000)        # from Python: http://127.0.0.1:8000

Routes: POST /v1/captions (?language=en|zh picks the captioner, default en), GET /v1/models,
GET /healthz, GET /readyz, and FastAPI's /docs and /openapi.json; with retrievers, POST
/v1/search/images (a text query as JSON {"text": ..., "k": ...} via the text retriever, or an
audio query as the raw body, audio/wav, audio/flac or audio/mpeg, or the form field `audio`,
via the speech retriever; ?k=) and
POST /v1/search/captions (an image, as /v1/captions takes it, via the text retriever). The
ingress checks what it can without the model (sizes, parameters, media types, the multipart
form, the text) and forwards the bytes; decoding and the models run in the model replicas.
Search errors beyond schema.py's table: 415 unsupported_media_type (a query that is neither
JSON nor audio), 400 bad_json, missing_audio, empty_audio, 413 text_too_long, 422
bad_parameter (k, an empty text), 501 not_enabled (a retriever this service does not run);
the replicas' own are in retriever_deployment.py.

Hostile clients: a body must arrive whole within `body_timeout_s` (408 after), and at most
`max_concurrent_uploads` bodies are received at once (503 `busy` beyond), fewer than the
ingress's `max_ongoing_requests`: slow uploads can never take every slot of the ingress,
so health checks and the requests already received still get through. Forms are parsed as
they stream in (python-multipart), and refused past MAX_FORM_PARTS parts. Captions and
searches beyond `max_in_flight` at once, or beyond what a model deployment queues
(max_queued_requests), get 503 `busy` at once. Strangers are told model names and versions,
not runs, tags or why a model is not loaded (`admin_details`), and a value of theirs is
quoted at most MAX_ECHO_CHARS long. Header size and time, connections per client: the nginx
front door in front (conceptual.serve.front_door).

No `from __future__ import annotations` here: FastAPI reads the route parameters'
annotations at run time, and their bounds come from the config in `make_api`'s closure.
"""

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator, Mapping
from http import HTTPStatus
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from python_multipart import MultipartParser
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import parse_options_header
from ray import serve
from ray.exceptions import TaskCancelledError
from ray.serve import Application
from ray.serve.exceptions import BackPressureError
from ray.serve.handle import DeploymentHandle, DeploymentResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from conceptual.config import Config
from conceptual.runtime import init_ray
from conceptual.serve.captioner_deployment import DEPLOYMENT_NAMES as CAPTIONER_NAMES
from conceptual.serve.captioner_deployment import (
    CaptionerDeployment,
    CaptionerSettings,
    Language,
)
from conceptual.serve.retriever_deployment import (
    DEPLOYMENT_NAMES,
    CaptionSearchResponse,
    ImageSearchResponse,
    RetrievalSettings,
    RetrieverDeployment,
)
from conceptual.serve.schema import (
    ApiError,
    CaptionResponse,
    ErrorResponse,
    Health,
    Limits,
    ModelsResponse,
    ModelStatus,
    Readiness,
)
from conceptual.speech.audio import MEDIA_TYPES
from conceptual.tracking import tracking_uri
from conceptual.uris import redact_text

logger = logging.getLogger("ray.serve")

APP_NAME = "captioning"
IMAGE_FIELD = "image"  # the form field holding the image in a multipart request
AUDIO_FIELD = "audio"  # the form field holding a spoken query
# Audio media types a spoken query may be sent as (WAV, FLAC, MP3: conceptual.speech.audio).
AUDIO_TYPES = frozenset(MEDIA_TYPES)
# The image and a few other fields at most; thousands of tiny parts only burn CPU.
MAX_FORM_PARTS = 8
MAX_ECHO_CHARS = 64  # an error quotes at most this much of a client's value
AT_CAPACITY = "the service is at capacity; retry"
# The ingress's request slots: above max_in_flight, so health checks always find one free.
API_MAX_ONGOING_REQUESTS = 128


class ServeConfig(Config):
    """The application's arguments (`args:` in serve/config.yaml)."""

    # The caption languages served, each by a CaptionerDeployment of its own (Captioner,
    # CaptionerZh) following its registered model's champion; /readyz waits for each. English
    # may be left out (a Chinese-only service): requests that name no language ask for
    # English, and get 501 not_enabled there.
    languages: list[Language] = Field(["en"], min_length=1)
    captioner: CaptionerSettings = CaptionerSettings()  # English: models:/captioner@champion
    captioner_zh: CaptionerSettings = CaptionerSettings()  # models:/captioner-zh@champion
    max_beam: int = Field(8, ge=1)  # beam_size may go up to this
    default_beam: int = Field(3, ge=1)
    max_body_bytes: int = Field(16 << 20, gt=0)  # as the fetcher's cap on an image
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
    # Opt-in search: the retrievers to run (each needs a champion with an index to be ready).
    retrievers: list[Literal["text", "speech"]] = []
    retrieval: RetrievalSettings = RetrievalSettings()

    @model_validator(mode="after")
    def _default_beam_is_allowed(self) -> "ServeConfig":
        if self.default_beam > self.max_beam:
            raise ValueError(f"default_beam {self.default_beam} > max_beam {self.max_beam}")
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

    def captioner_settings(self, language: str) -> CaptionerSettings:
        """The settings of `language`'s captioner: `captioner` (en), `captioner_zh`."""
        return self.captioner if language == "en" else self.captioner_zh


class TextQuery(BaseModel):
    """The JSON body of a text search."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(description="what the images should show")
    k: int | None = Field(None, description="how many images (default: the query parameter's)")


# --- reading the image (or audio, or JSON) out of a request -------------------------------


class RawBody:
    """A body that is the image (or audio, or JSON) itself."""

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, chunk: bytes) -> None:
        self.data += chunk

    def value(self) -> bytes:
        return bytes(self.data)


class FormField:
    """The field `field` (IMAGE_FIELD, AUDIO_FIELD) of a multipart/form-data body, parsed as
    the body streams in (python-multipart): other fields are skipped, not kept, part headers
    are bounded by the parser, and a form is refused as soon as its part MAX_FORM_PARTS + 1
    begins."""

    def __init__(self, content_type: str, field: str = IMAGE_FIELD):
        self.field = field
        _, params = parse_options_header(content_type)
        boundary = params.get(b"boundary")
        if not boundary:
            raise ApiError(400, "bad_multipart", "a multipart/form-data body needs a boundary")
        self.parts = 0
        self.header_name, self.header_value = bytearray(), bytearray()
        self.in_image = self.found = self.complete = False
        self.data = bytearray()
        callbacks = {
            "on_part_begin": self._part_begins,
            "on_header_field": lambda data, start, end: self.header_name.extend(data[start:end]),
            "on_header_value": lambda data, start, end: self.header_value.extend(data[start:end]),
            "on_header_end": self._header_ends,
            "on_part_data": self._part_data,
            "on_part_end": self._part_ends,
            "on_end": self._form_ends,
        }
        try:
            self.parser = MultipartParser(boundary, callbacks)
        except FormParserError as error:  # a boundary over the parser's 256 bytes
            raise ApiError(400, "bad_multipart", "the form's boundary is too long") from error

    def write(self, chunk: bytes) -> None:
        try:
            self.parser.write(chunk)
        except FormParserError as error:
            raise ApiError(400, "bad_multipart", "the multipart form is malformed") from error

    def value(self) -> bytes:
        if not self.complete:
            raise ApiError(400, "bad_multipart", "the form ends before its closing boundary")
        if not self.found:
            raise ApiError(
                400, f"missing_{self.field}", f"the form has no field named {self.field!r}"
            )
        return bytes(self.data)

    def _part_begins(self) -> None:
        self.parts += 1
        if self.parts > MAX_FORM_PARTS:
            raise ApiError(400, "too_many_parts", f"a form may have {MAX_FORM_PARTS} parts")

    def _header_ends(self) -> None:
        if self.header_name.lower() == b"content-disposition":
            _, params = parse_options_header(bytes(self.header_value))
            # The first field named `field` is the value; a repeated one is skipped.
            self.in_image = params.get(b"name") == self.field.encode() and not self.found
        self.header_name.clear()
        self.header_value.clear()

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if self.in_image:
            self.data += data[start:end]

    def _part_ends(self) -> None:
        self.found = self.found or self.in_image
        self.in_image = False

    def _form_ends(self) -> None:
        self.complete = True


async def read_body(request: Request, limit: int, sink: RawBody | FormField) -> None:
    """Streams the body into `sink`, refused with 413 as soon as it is known to exceed
    `limit` bytes: by its Content-Length, else (chunked uploads) by counting."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise ApiError(413, "too_large", f"Content-Length {declared} > {limit} bytes")
    received = 0
    try:
        async for chunk in request.stream():
            received += len(chunk)
            if received > limit:
                raise ApiError(413, "too_large", f"the body is over {limit} bytes")
            sink.write(chunk)
    except (ClientDisconnect, TaskCancelledError) as error:  # Serve cancels the receive
        # The client left mid-body: nobody reads this answer, but it is no server error.
        raise ApiError(400, "incomplete_body", "the connection closed mid-body") from error


def media_type(request: Request) -> str:
    """The Content-Type without its parameters, lowercased."""
    return request.headers.get("content-type", "").split(";", 1)[0].strip().lower()


async def upload(
    request: Request,
    config: ServeConfig,
    uploads: asyncio.Semaphore,
    field: str = IMAGE_FIELD,
    limit: int | None = None,
) -> bytes:
    """The body, or the form field `field` of a multipart body, of at most `limit` bytes
    (default `config.max_body_bytes`), received within `config.body_timeout_s` while
    holding one of the `uploads` slots."""
    content_type = request.headers.get("content-type", "")
    multipart = media_type(request) == "multipart/form-data"
    sink = FormField(content_type, field) if multipart else RawBody()
    async with admitted(uploads, "too many uploads in progress; retry"):
        try:
            await asyncio.wait_for(
                read_body(request, limit or config.max_body_bytes, sink), config.body_timeout_s
            )
        except asyncio.TimeoutError as error:
            raise ApiError(
                408, "body_timeout", f"the body did not arrive within {config.body_timeout_s} s"
            ) from error
    return sink.value()


@contextlib.asynccontextmanager
async def admitted(slots: asyncio.Semaphore, busy: str) -> AsyncIterator[None]:
    """Holds one of `slots`; when none is free, 503 `busy` (saying `busy`) at once: waiting
    would hold an ingress slot."""
    if slots.locked():
        raise ApiError(503, "busy", busy)
    async with slots:
        yield


async def image_bytes(request: Request, config: ServeConfig, uploads: asyncio.Semaphore) -> bytes:
    """The encoded image: the raw body, or the form field IMAGE_FIELD of a multipart body."""
    body = await upload(request, config, uploads)
    if not body:
        raise ApiError(
            400, "empty_body", f"send an image as the body, or as the form field {IMAGE_FIELD!r}"
        )
    return body


async def text_query(
    request: Request, config: ServeConfig, uploads: asyncio.Semaphore
) -> TextQuery:
    """The JSON body of a text search, its text checked (422 empty, 413 too long)."""
    settings = config.retrieval
    body = await upload(request, config, uploads, limit=settings.max_text_bytes)
    try:
        query = TextQuery.model_validate_json(body)
    except ValidationError as error:
        if any(problem["type"] == "json_invalid" for problem in error.errors()):
            raise ApiError(400, "bad_json", "the body is not valid JSON") from error
        problems = "; ".join(
            f"{'.'.join(map(str, problem['loc'])) or 'body'}: {problem['msg']}"
            for problem in error.errors()
        )
        raise ApiError(422, "bad_parameter", problems) from error
    if not query.text.strip():
        raise ApiError(422, "bad_parameter", "text: the query text is empty")
    if len(query.text) > settings.max_text_chars:
        raise ApiError(
            413, "text_too_long", f"the text is over {settings.max_text_chars} characters"
        )
    if query.k is not None and not 1 <= query.k <= settings.max_k:
        raise ApiError(422, "bad_parameter", f"k: must be within 1..{settings.max_k}")
    return query


# --- talking to the model deployments ------------------------------------------------------


async def answer(response: DeploymentResponse) -> Any:
    """A model deployment's result; its ApiError, or 503 when it did not answer, raised."""
    try:
        result = await response
    except BackPressureError as error:  # its replicas and queue are full (max_queued_requests)
        raise ApiError(503, "busy", "the model is at capacity; retry") from error
    except Exception as error:  # a replica died, or Serve gave up on it: worth a retry
        logger.warning("a model deployment did not answer: %s", redact_text(str(error)))
        raise ApiError(503, "model_unavailable", "the model did not answer; retry") from error
    if isinstance(result, ApiError):
        raise result
    return result


# --- the HTTP API ---------------------------------------------------------------------------


def server_timing(milliseconds: Mapping[str, float]) -> str:
    """A Server-Timing header: where a request's time went, so that a client (or the
    benchmark) can tell the service's overhead from the model's time. `body`: receiving
    the upload; `handle`: the call to the model deployment, of which `replica` was spent in
    the replica (`decode`, `batch_wait`, `model`)."""
    return ", ".join(f"{name};dur={ms:.1f}" for name, ms in milliseconds.items())


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for error statuses, all with the ErrorResponse body."""
    return {
        status: {"model": ErrorResponse, "description": HTTPStatus(status).phrase}
        for status in statuses
    }


def image_body(max_bytes: int) -> dict[str, Any]:
    """The OpenAPI request body of POST /v1/captions, which the route reads itself."""
    binary = {"schema": {"type": "string", "format": "binary"}}
    form = {
        "type": "object",
        "required": [IMAGE_FIELD],
        "properties": {IMAGE_FIELD: {"type": "string", "format": "binary"}},
    }
    return {
        "requestBody": {
            "required": True,
            "description": f"an image (JPEG, PNG, WebP...) of at most {max_bytes} bytes, "
            f"as the raw body or as the form field {IMAGE_FIELD!r}",
            "content": {
                "image/*": binary,
                "application/octet-stream": binary,
                "multipart/form-data": {"schema": form},
            },
        }
    }


def search_body(max_bytes: int, max_text_bytes: int) -> dict[str, Any]:
    """The OpenAPI request body of POST /v1/search/images: JSON text, or audio."""
    binary = {"schema": {"type": "string", "format": "binary"}}
    form = {
        "type": "object",
        "required": [AUDIO_FIELD],
        "properties": {AUDIO_FIELD: {"type": "string", "format": "binary"}},
    }
    return {
        "requestBody": {
            "required": True,
            "description": f"a text query as JSON (at most {max_text_bytes} bytes), or a "
            f"spoken one (WAV, FLAC, MP3; at most {max_bytes} bytes) as the raw body or as "
            f"the form field {AUDIO_FIELD!r}",
            "content": {
                "application/json": {"schema": TextQuery.model_json_schema()},
                **{media: binary for media in ("audio/wav", "audio/flac", "audio/mpeg")},
                "multipart/form-data": {"schema": form},
            },
        }
    }


def make_api(
    config: ServeConfig,
    captioners: Mapping[str, DeploymentHandle],
    retrievers: Mapping[str, DeploymentHandle] | None = None,
) -> FastAPI:
    """The routes; `captioners` holds a handle per language in `config.languages`,
    `retrievers` one per modality in `config.retrievers`."""
    api = FastAPI(
        title="conceptual captioning",
        version="1",
        description="Captions for images from the registry's champion captioner of each "
        "language served, and (when enabled) image and caption search with the champion "
        "retrievers.",
    )
    add_error_handlers(api)
    uploads = asyncio.Semaphore(config.max_concurrent_uploads)  # bodies being received
    in_flight = asyncio.Semaphore(config.max_in_flight)  # model requests held

    async def model_statuses() -> list[ModelStatus]:
        handles = [*captioners.values(), *(retrievers or {}).values()]
        statuses = await asyncio.gather(*(answer(h.status.remote()) for h in handles))
        return [s if config.admin_details else s.public() for s in statuses]

    def captioner(language: str) -> DeploymentHandle:
        if language not in captioners:
            raise ApiError(
                501,
                "not_enabled",
                f"captions in {language!r} are not enabled on this service; it writes "
                f"{', '.join(map(repr, captioners))}",
            )
        return captioners[language]

    @api.post(
        "/v1/captions",
        response_model=CaptionResponse,
        responses=error_responses(400, 408, 413, 415, 422, 500, 501, 503),
        openapi_extra=image_body(config.max_body_bytes),
    )
    async def captions(
        request: Request,
        response: Response,
        beam_size: Annotated[
            int, Query(ge=1, le=config.max_beam, description="beam width of the search")
        ] = config.default_beam,
        num_captions: Annotated[
            int, Query(ge=1, le=config.max_beam, description="how many, at most beam_size")
        ] = 1,
        language: Annotated[
            Language,
            Query(description=f"the captions' language (enabled: {', '.join(config.languages)})"),
        ] = "en",
    ) -> CaptionResponse:
        """Captions for one image in one language, best first, naming the model version that
        made them."""
        if num_captions > beam_size:
            raise ApiError(
                422,
                "bad_parameter",
                f"num_captions {num_captions} > beam_size {beam_size}: "
                "a beam search keeps at most beam_size captions",
            )
        handle = captioner(language)  # refused before the body is received
        async with admitted(in_flight, AT_CAPACITY):
            started = time.perf_counter()
            data = await image_bytes(request, config, uploads)
            received = time.perf_counter()
            captioned = await answer(handle.caption.remote(data, beam_size, num_captions))
        response.headers["X-Batch-Size"] = str(captioned.batch_size)
        timings = {"body": received - started, "handle": time.perf_counter() - received}
        response.headers["Server-Timing"] = server_timing(
            {**{name: seconds * 1000 for name, seconds in timings.items()}, **captioned.timings}
        )
        return captioned.response

    add_search_routes(api, config, retrievers or {}, uploads, in_flight)

    @api.get("/v1/models", response_model=ModelsResponse, responses=error_responses(503))
    async def models() -> ModelsResponse:
        """What is served: each model's name, version, alias and language (with the
        service's `admin_details`, its run, tags and metrics too)."""
        limits = Limits(
            max_beam=config.max_beam,
            default_beam=config.default_beam,
            max_body_bytes=config.max_body_bytes,
        )
        return ModelsResponse(models=await model_statuses(), limits=limits)

    @api.get("/healthz", response_model=Health)
    async def healthz() -> Health:
        """Liveness: the ingress answers."""
        return Health()

    @api.get(
        "/readyz",
        response_model=Readiness,
        responses={503: {"model": Readiness, "description": "a model is not loaded yet"}},
    )
    async def readyz() -> JSONResponse:
        """Readiness: 200 once every model is loaded, 503 before."""
        statuses = await model_statuses()
        readiness = Readiness(ready=all(status.ready for status in statuses), models=statuses)
        return JSONResponse(readiness.model_dump(), status_code=200 if readiness.ready else 503)

    return api


def add_search_routes(
    api: FastAPI,
    config: ServeConfig,
    retrievers: Mapping[str, DeploymentHandle],
    uploads: asyncio.Semaphore,
    in_flight: asyncio.Semaphore,
) -> None:
    """POST /v1/search/images and /v1/search/captions (conceptual.serve.retriever_deployment);
    501 not_enabled for a retriever not in `retrievers`."""
    settings = config.retrieval
    k_query = Annotated[
        int | None,
        Query(ge=1, le=settings.max_k, description=f"how many (default {settings.default_k})"),
    ]

    def retriever(modality: str) -> DeploymentHandle:
        if modality not in retrievers:
            raise ApiError(501, "not_enabled", f"{modality} search is not enabled on this service")
        return retrievers[modality]

    @api.post(
        "/v1/search/images",
        response_model=ImageSearchResponse,
        responses=error_responses(400, 408, 413, 415, 422, 500, 501, 503),
        openapi_extra=search_body(config.max_body_bytes, settings.max_text_bytes),
    )
    async def search_images(request: Request, k: k_query = None) -> ImageSearchResponse:
        """The top k images for a text query (JSON) or a spoken one (audio), best first."""
        kind = media_type(request)
        if kind == "application/json":
            handle = retriever("text")
            async with admitted(in_flight, AT_CAPACITY):
                query = await text_query(request, config, uploads)
                top = query.k or k or settings.default_k  # the body's k, else the parameter
                return await answer(handle.search_text.remote(query.text, top))
        if kind in AUDIO_TYPES or kind == "multipart/form-data":
            handle = retriever("text" if settings.asr.enabled else "speech")  # asr: heard
            declared = kind if kind in AUDIO_TYPES else None  # a form's field: any of them
            async with admitted(in_flight, AT_CAPACITY):
                data = await upload(request, config, uploads, field=AUDIO_FIELD)
                if not data:
                    raise ApiError(400, "empty_audio", "the audio query is empty")
                top = k or settings.default_k
                return await answer(handle.search_audio.remote(data, top, declared))
        raise ApiError(
            415,
            "unsupported_media_type",
            "send a text query as application/json, or a spoken one (audio/wav, audio/flac, "
            f"audio/mpeg) as the body or as the form field {AUDIO_FIELD!r}",
        )

    @api.post(
        "/v1/search/captions",
        response_model=CaptionSearchResponse,
        responses=error_responses(400, 408, 413, 415, 422, 500, 501, 503),
        openapi_extra=image_body(config.max_body_bytes),
    )
    async def search_captions(request: Request, k: k_query = None) -> CaptionSearchResponse:
        """The top k captions for an image, best first."""
        handle = retriever("text")
        async with admitted(in_flight, AT_CAPACITY):
            data = await image_bytes(request, config, uploads)
            return await answer(handle.search_image.remote(data, k or settings.default_k))


def add_error_handlers(api: FastAPI) -> None:
    """Every error is {"error": {"code", "message"}} with its status, FastAPI's own too."""
    api.add_exception_handler(ApiError, lambda _, error: error.response())
    api.add_exception_handler(RequestValidationError, bad_parameters)
    api.add_exception_handler(StarletteHTTPException, http_error)
    api.add_exception_handler(Exception, internal_error)


def echo(value: Any) -> str:
    """A client's value as an error quotes it: repr, cut to MAX_ECHO_CHARS."""
    text = repr(value)
    return (
        text if len(text) <= MAX_ECHO_CHARS else f"{text[:MAX_ECHO_CHARS]}... ({len(text)} chars)"
    )


def bad_parameters(_: Request, error: RequestValidationError) -> JSONResponse:
    problems = "; ".join(
        f"{problem['loc'][-1]}: {problem['msg']} (got {echo(problem.get('input'))})"
        for problem in error.errors()
    )
    return ApiError(422, "bad_parameter", problems).response()


def http_error(_: Request, error: StarletteHTTPException) -> JSONResponse:
    """404, 405 and the like, under their standard names (not_found, method_not_allowed)."""
    code = HTTPStatus(error.status_code).phrase.lower().replace(" ", "_")
    response = ApiError(error.status_code, code, str(error.detail)).response()
    response.headers.update(error.headers or {})  # Allow, for a 405
    return response


def internal_error(_: Request, error: Exception) -> JSONResponse:
    # Starlette re-raises it: Serve logs the trace.
    logger.error("unexpected error: %s", redact_text(repr(error)))
    return ApiError(500, "internal_error", "unexpected error; see the service logs").response()


@serve.deployment(
    name="Api",
    num_replicas=1,
    ray_actor_options={"num_cpus": 0.1},  # it only parses requests and awaits the models
    # Awaiting is cheap: let requests queue at the model replicas. Above
    # ServeConfig.max_in_flight, so that health checks never wait behind model requests.
    max_ongoing_requests=API_MAX_ONGOING_REQUESTS,
)
@serve.ingress()
class Api:
    def __init__(
        self,
        config: ServeConfig,
        captioners: Mapping[str, DeploymentHandle],
        retrievers: Mapping[str, DeploymentHandle] | None = None,
    ):
        self.config, self.captioners, self.retrievers = config, captioners, retrievers

    def __serve_build_asgi_app__(self) -> FastAPI:  # Serve builds the app in each replica
        return make_api(self.config, self.captioners, self.retrievers)


# --- building and running the application --------------------------------------------------


def build(
    config: ServeConfig,
    captioner_options: Mapping[str, Any] | None = None,
    retriever_options: Mapping[str, Any] | None = None,
) -> Application:
    """The application; `captioner_options` and `retriever_options` are Serve deployment
    options for every captioner and retriever (autoscaling_config, num_replicas,
    ray_actor_options...) over their defaults."""
    captioners = {}
    for language in config.languages:
        settings = config.captioner_settings(language)
        if settings.tracking_uri is None:  # resolved once here: every replica reads the same
            settings = settings.model_copy(update={"tracking_uri": tracking_uri()})
        captioners[language] = CaptionerDeployment.options(
            name=CAPTIONER_NAMES[language], **(captioner_options or {})
        ).bind(settings, language)
    search = config.retrieval
    if search.tracking_uri is None:
        search = search.model_copy(update={"tracking_uri": tracking_uri()})
    retrievers = {
        modality: RetrieverDeployment.options(
            name=DEPLOYMENT_NAMES[modality], **(retriever_options or {})
        ).bind(search, modality)
        for modality in config.retrievers
    }
    return Api.bind(config, captioners, retrievers)


def build_app(args: dict[str, Any]) -> Application:
    """The import path of serve/config.yaml; `args` are a ServeConfig."""
    return build(ServeConfig.model_validate(args))


def start(
    config: ServeConfig | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    blocking: bool = False,
    captioner_options: Mapping[str, Any] | None = None,
) -> str:
    """Deploys the application on this process's Ray (a local one unless RAY_ADDRESS says
    otherwise), HTTP on host:port, and returns its base URL once its replicas are up. With
    `blocking`, serves until Ctrl-C, then deletes the application."""
    init_ray()
    serve.start(http_options={"host": host, "port": port})
    app = build(config or ServeConfig(), captioner_options)
    serve.run(app, name=APP_NAME, route_prefix="/")
    url = f"http://{host}:{port}"
    if blocking:
        print(f"captioning at {url} (API docs at {url}/docs); Ctrl-C stops", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            serve.delete(APP_NAME)
    return url
