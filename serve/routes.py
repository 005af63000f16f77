"""The HTTP API of the captioning service: every route in one table (ROUTES), built into the
ingress's FastAPI app by `make_api`.

- POST /v1/captions (`captions`): an image's captions, by the captioner ?captioner= names
  (a captioning key the service runs, ServeConfig.captioners, from the family table), or the
  first that writes ?language= (en, zh; default en).
- POST /v1/search/images (`search_images`): the top ?k= images for a text query, as JSON
  {"text": ..., "k": ...}, or a spoken one, as the raw body (audio/wav, audio/flac,
  audio/mpeg) or the form field `audio`.
- POST /v1/search/captions (`search_captions`): the top ?k= captions for an image, sent as
  to /v1/captions.
- GET /v1/models, /healthz, /readyz (`models`, `healthz`, `readyz`): what is served and the
  limits; liveness; readiness. FastAPI adds /docs and /openapi.json.

The search routes take ?retriever=<key>, one of the search keys the service runs
(ServeConfig.retrievers, from the family table, conceptual.pipelines.families); without it a text
or image query goes to `text`, a spoken one to `speech` (to `text` with retrieval.asr, which
hears it). A retriever of modality text takes text and images, and speech with asr only; a
speech one takes speech.

The ingress checks what it can without the model (sizes, parameters, media types, the
multipart form, the text: conceptual.serve.uploads) and forwards the bytes; decoding and the
models run in the model replicas. Search errors beyond schema.py's table: 415
unsupported_media_type (a query that is neither JSON nor audio), 400 bad_json, missing_audio,
empty_audio, 413 text_too_long, 422 bad_parameter (k, an empty text, a retriever that is no
search key or takes other queries), 501 not_enabled (a retriever this service does not run);
the replicas' own are in retriever_deployment.py. Captions and searches beyond
`max_in_flight` at once, or beyond what a model deployment queues (max_queued_requests), get
503 `busy` at once. Strangers are told model names and versions, not runs, tags or why a
model is not loaded (`admin_details`), and a value of theirs is quoted at most
MAX_ECHO_CHARS long.

No `from __future__ import annotations` here: FastAPI reads the endpoints' parameter
annotations at run time, and their bounds come from the config, so each route's `handler`
makes its endpoint for one Service.
"""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Annotated, Any

from fastapi import FastAPI, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from ray.serve.exceptions import BackPressureError
from ray.serve.handle import DeploymentHandle, DeploymentResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from conceptual.models.variants import Language
from conceptual.pipelines.families import captionings, searches
from conceptual.serve.config import ServeConfig
from conceptual.serve.retriever_deployment import CaptionSearchResponse, ImageSearchResponse
from conceptual.serve.schema import (
    ApiError,
    CaptionResponse,
    ErrorResponse,
    Health,
    Limits,
    ModelsResponse,
    ModelStatus,
    Readiness,
    parameter_problem,
)
from conceptual.serve.uploads import (
    AUDIO_FIELD,
    AUDIO_TYPES,
    IMAGE_FIELD,
    TextQuery,
    admitted,
    media_type,
    text_query,
    upload,
)
from conceptual.uris import redact_text

logger = logging.getLogger("ray.serve")

MAX_ECHO_CHARS = 64  # an error quotes at most this much of a client's value
AT_CAPACITY = "the service is at capacity; retry"

Endpoint = Callable[..., Awaitable[Any]]


@dataclass(frozen=True)
class Handles:
    """The model deployments the ingress calls: a captioner per captioning key served
    (ServeConfig.captioners), a retriever per search key served (ServeConfig.retrievers)."""

    captioners: Mapping[str, DeploymentHandle]
    retrievers: Mapping[str, DeploymentHandle] = field(default_factory=dict)


class Service:
    """What one ingress replica's routes share: the config, the model deployments and the
    slots (bodies being received, model requests held)."""

    def __init__(self, config: ServeConfig, handles: Handles):
        self.config, self.handles = config, handles
        self.uploads = asyncio.Semaphore(config.max_concurrent_uploads)
        self.in_flight = asyncio.Semaphore(config.max_in_flight)
        # Every search key's query modality, which a request's retriever must take, and every
        # captioning key's entry (its language): read once, not per request.
        self.modalities = {key: search.modality for key, search in searches().items()}
        self.captionings = captionings()

    def captioner(self, key: str | None, language: str | None) -> DeploymentHandle:
        """The captioner `key` names, or without one the first served writing `language`
        (None: English)."""
        entries, served = self.captionings, self.handles.captioners
        if key is None:
            language = language or "en"
            writing = [k for k in served if entries[k].language == language]
            if not writing:
                languages = sorted({entries[k].language for k in served})
                raise ApiError(
                    501,
                    "not_enabled",
                    f"captions in {language!r} are not enabled on this service; it writes "
                    f"{', '.join(map(repr, languages))}",
                )
            return served[writing[0]]
        if key not in entries:
            raise ApiError(
                422,
                "bad_parameter",
                f"captioner: {echo(key)} is not a captioning key ({', '.join(entries)})",
            )
        if language is not None and entries[key].language != language:
            raise ApiError(
                422,
                "bad_parameter",
                f"captioner {key!r} writes {entries[key].language!r}, not {language!r}",
            )
        if key not in served:
            raise ApiError(501, "not_enabled", f"the captioner {key!r} is not enabled here")
        return served[key]

    def retriever(self, key: str | None, query: str) -> DeploymentHandle:
        """The retriever `key` names for a `query` ("text", "image" or "speech"); None: the
        query's own (text; speech, or text when retrieval.asr hears it)."""
        hears = self.config.retrieval.asr.enabled
        if key is None:
            key = "speech" if query == "speech" and not hears else "text"
        if key not in self.modalities:
            raise ApiError(
                422,
                "bad_parameter",
                f"retriever: {echo(key)} is not a search key ({', '.join(self.modalities)})",
            )
        if key not in self.handles.retrievers:
            raise ApiError(501, "not_enabled", f"{key} search is not enabled on this service")
        modality = self.modalities[key]
        # A text model embeds images too, and with asr hears speech as its transcript.
        if modality != query and not (modality == "text" and (query == "image" or hears)):
            raise ApiError(
                422, "bad_parameter", f"retriever: {key} takes {modality} queries, not {query}"
            )
        return self.handles.retrievers[key]

    async def statuses(self) -> list[ModelStatus]:
        handles = [*self.handles.captioners.values(), *self.handles.retrievers.values()]
        statuses = await asyncio.gather(*(answer(h.status.remote()) for h in handles))
        return [s if self.config.admin_details else s.public() for s in statuses]

    async def body(
        self, request: Request, field: str = IMAGE_FIELD, limit: int | None = None
    ) -> bytes:
        """The body or its form field `field`, at most `limit` bytes (default max_body_bytes)."""
        config = self.config
        limit = limit or config.max_body_bytes
        return await upload(request, self.uploads, limit, config.body_timeout_s, field)

    async def image(self, request: Request) -> bytes:
        """The encoded image: the raw body, or the form field IMAGE_FIELD of a multipart body."""
        data = await self.body(request, IMAGE_FIELD)
        if not data:
            raise ApiError(
                400,
                "empty_body",
                f"send an image as the body, or as the form field {IMAGE_FIELD!r}",
            )
        return data

    async def text_query(self, request: Request) -> TextQuery:
        """The JSON body of a text search, checked (uploads.text_query)."""
        settings = self.config.retrieval
        data = await self.body(request, limit=settings.max_text_bytes)
        return text_query(data, settings)


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


def server_timing(milliseconds: Mapping[str, float]) -> str:
    """A Server-Timing header: where a request's time went, so that a client (or the
    benchmark) can tell the service's overhead from the model's time. `body`: receiving
    the upload; `handle`: the call to the model deployment, of which `replica` was spent in
    the replica (`decode`, `batch_wait`, `model`)."""
    return ", ".join(f"{name};dur={ms:.1f}" for name, ms in milliseconds.items())


# --- the routes' endpoints, each made for one Service -----------------------------------------


def captions(service: Service) -> Endpoint:
    config = service.config

    async def endpoint(
        request: Request,
        response: Response,
        beam_size: Annotated[
            int | None,
            Query(
                ge=1,
                le=config.max_beam,
                description="beam width of the search (default: the model's evaluation beam)",
            ),
        ] = config.default_beam,
        num_captions: Annotated[
            int, Query(ge=1, le=config.max_beam, description="how many, at most beam_size")
        ] = 1,
        captioner: Annotated[
            str | None,
            Query(
                description="the captioner that answers, by key (enabled: "
                f"{', '.join(config.captioners)}); default the first that writes `language`"
            ),
        ] = None,
        language: Annotated[
            Language | None,
            Query(description="the captions' language: en, zh (default the captioner's, or en)"),
        ] = None,
    ) -> CaptionResponse:
        """Captions for one image by one captioner, best first, naming the model version that
        made them."""
        if beam_size is not None and num_captions > beam_size:
            raise ApiError(
                422,
                "bad_parameter",
                f"num_captions {num_captions} > beam_size {beam_size}: "
                "a beam search keeps at most beam_size captions",
            )
        handle = service.captioner(captioner, language)  # refused before the body arrives
        async with admitted(service.in_flight, AT_CAPACITY):
            started = time.perf_counter()
            data = await service.image(request)
            received = time.perf_counter()
            captioned = await answer(handle.caption.remote(data, beam_size, num_captions))
        response.headers["X-Batch-Size"] = str(captioned.batch_size)
        timings = {"body": received - started, "handle": time.perf_counter() - received}
        response.headers["Server-Timing"] = server_timing(
            {**{name: seconds * 1000 for name, seconds in timings.items()}, **captioned.timings}
        )
        return captioned.response

    return endpoint


def k_parameter(config: ServeConfig) -> Any:
    settings = config.retrieval
    return Annotated[
        int | None,
        Query(ge=1, le=settings.max_k, description=f"how many (default {settings.default_k})"),
    ]


def retriever_parameter(config: ServeConfig, default: str) -> Any:
    enabled = ", ".join(config.retrievers) or "none"
    return Annotated[
        str | None,
        Query(description=f"the retriever that answers, by key (enabled: {enabled}); {default}"),
    ]


def search_images(service: Service) -> Endpoint:
    config = service.config
    settings = config.retrieval
    k_query = k_parameter(config)
    retriever_query = retriever_parameter(
        config, "default text for a text query, speech for a spoken one (text with asr)"
    )

    async def endpoint(
        request: Request, k: k_query = None, retriever: retriever_query = None
    ) -> ImageSearchResponse:
        """The top k images for a text query (JSON) or a spoken one (audio), best first."""
        kind = media_type(request)
        if kind == "application/json":
            handle = service.retriever(retriever, "text")
            async with admitted(service.in_flight, AT_CAPACITY):
                query = await service.text_query(request)
                top = query.k or k or settings.default_k  # the body's k, else the parameter
                return await answer(handle.search_text.remote(query.text, top))
        if kind in AUDIO_TYPES or kind == "multipart/form-data":
            handle = service.retriever(retriever, "speech")
            declared = kind if kind in AUDIO_TYPES else None  # a form's field: any of them
            async with admitted(service.in_flight, AT_CAPACITY):
                data = await service.body(request, AUDIO_FIELD)
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

    return endpoint


def search_captions(service: Service) -> Endpoint:
    config = service.config
    k_query = k_parameter(config)
    retriever_query = retriever_parameter(config, "default text")

    async def endpoint(
        request: Request, k: k_query = None, retriever: retriever_query = None
    ) -> CaptionSearchResponse:
        """The top k captions for an image, best first."""
        handle = service.retriever(retriever, "image")
        async with admitted(service.in_flight, AT_CAPACITY):
            data = await service.image(request)
            top = k or config.retrieval.default_k
            return await answer(handle.search_image.remote(data, top))

    return endpoint


def models(service: Service) -> Endpoint:
    config = service.config

    async def endpoint() -> ModelsResponse:
        """What is served: each model's name, version, alias and language (with the
        service's `admin_details`, its run, tags and metrics too)."""
        limits = Limits(
            max_beam=config.max_beam,
            default_beam=config.default_beam,
            max_body_bytes=config.max_body_bytes,
        )
        return ModelsResponse(models=await service.statuses(), limits=limits)

    return endpoint


def healthz(service: Service) -> Endpoint:
    async def endpoint() -> Health:
        """Liveness: the ingress answers."""
        return Health()

    return endpoint


def readyz(service: Service) -> Endpoint:
    async def endpoint() -> JSONResponse:
        """Readiness: 200 once every model is loaded, 503 before."""
        statuses = await service.statuses()
        readiness = Readiness(ready=all(status.ready for status in statuses), models=statuses)
        return JSONResponse(readiness.model_dump(), status_code=200 if readiness.ready else 503)

    return endpoint


# --- the table ------------------------------------------------------------------------------


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for error statuses, all with the ErrorResponse body."""
    return {
        status: {"model": ErrorResponse, "description": HTTPStatus(status).phrase}
        for status in statuses
    }


BINARY = {"type": "string", "format": "binary"}


def request_body(description: str, content: Mapping[str, Any], field: str) -> dict[str, Any]:
    """The OpenAPI request body of a route that reads its body itself: `content` (media type
    -> schema), or a multipart form with the file field `field`."""
    form = {"type": "object", "required": [field], "properties": {field: BINARY}}
    return {
        "requestBody": {
            "required": True,
            "description": description,
            "content": {**content, "multipart/form-data": {"schema": form}},
        }
    }


def image_body(config: ServeConfig) -> dict[str, Any]:
    """An image: /v1/captions, /v1/search/captions."""
    return request_body(
        f"an image (JPEG, PNG, WebP...) of at most {config.max_body_bytes} bytes, as the raw "
        f"body or as the form field {IMAGE_FIELD!r}",
        {media: {"schema": BINARY} for media in ("image/*", "application/octet-stream")},
        IMAGE_FIELD,
    )


def search_body(config: ServeConfig) -> dict[str, Any]:
    """JSON text, or audio: /v1/search/images."""
    audio = {media: {"schema": BINARY} for media in ("audio/wav", "audio/flac", "audio/mpeg")}
    return request_body(
        f"a text query as JSON (at most {config.retrieval.max_text_bytes} bytes), or a spoken "
        f"one (WAV, FLAC, MP3; at most {config.max_body_bytes} bytes) as the raw body or as "
        f"the form field {AUDIO_FIELD!r}",
        {"application/json": {"schema": TextQuery.model_json_schema()}, **audio},
        AUDIO_FIELD,
    )


@dataclass(frozen=True)
class Route:
    """One route: FastAPI's arguments, and `handler`, which makes its endpoint for a Service
    (the route is named after it: OpenAPI's summary and operationId)."""

    method: str
    path: str
    handler: Callable[[Service], Endpoint]
    response_model: type[BaseModel]
    # What answers it, its section in /docs: the captioners or the retrievers (Handles'
    # fields), or the service itself.
    answered_by: str
    responses: Mapping[int | str, dict[str, Any]] = field(default_factory=dict)
    body: Callable[[ServeConfig], dict[str, Any]] | None = None  # read by the endpoint itself


MODEL_ERRORS = error_responses(400, 408, 413, 415, 422, 500, 501, 503)
NOT_READY = {503: {"model": Readiness, "description": "a model is not loaded yet"}}

ROUTES = (
    Route("POST", "/v1/captions", captions, CaptionResponse, "captioners",
          responses=MODEL_ERRORS, body=image_body),
    Route("POST", "/v1/search/images", search_images, ImageSearchResponse, "retrievers",
          responses=MODEL_ERRORS, body=search_body),
    Route("POST", "/v1/search/captions", search_captions, CaptionSearchResponse, "retrievers",
          responses=MODEL_ERRORS, body=image_body),
    Route("GET", "/v1/models", models, ModelsResponse, "service",
          responses=error_responses(503)),
    Route("GET", "/healthz", healthz, Health, "service"),
    Route("GET", "/readyz", readyz, Readiness, "service", responses=NOT_READY),
)  # fmt: skip


def make_api(config: ServeConfig, handles: Handles) -> FastAPI:
    """The ingress's app: every route of ROUTES, over one Service."""
    api = FastAPI(
        title="conceptual captioning",
        version="1",
        description="Captions for images from the registry's champion captioners served "
        "(`?captioner=`, or `?language=`), and (when enabled) image and caption search with "
        "the champion retrievers (`?retriever=`).",
    )
    add_error_handlers(api)
    service = Service(config, handles)
    for route in ROUTES:
        api.add_api_route(
            route.path,
            route.handler(service),
            methods=[route.method],
            name=route.handler.__name__,
            response_model=route.response_model,
            responses=dict(route.responses),
            openapi_extra=route.body(config) if route.body else None,
            tags=[route.answered_by],
        )
    return api


# --- errors ---------------------------------------------------------------------------------


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
        f"{problem['loc'][-1]}: {parameter_problem(problem)} (got {echo(problem.get('input'))})"
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
