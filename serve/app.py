"""The captioning service on Ray Serve: a FastAPI ingress (`Api`) in front of the model
deployments (today the champion captioner, conceptual.serve.captioner_deployment).

    serve run serve/config.yaml                  # import_path conceptual.serve.app:build_app
    url = start(ServeConfig(), port=8000)        # from Python: http://127.0.0.1:8000

Routes: POST /v1/captions, GET /v1/models, GET /healthz, GET /readyz, and FastAPI's /docs
and /openapi.json. The ingress checks what it can without the model (sizes, parameters,
the multipart form) and forwards the image bytes; decoding and the model run in the model
replicas. A retrieval model joins as one more deployment: one more handle for `Api`, a
route in `make_api`, and its status in `model_statuses`.

No `from __future__ import annotations` here: FastAPI reads the route parameters'
annotations at run time, and their bounds come from the config in `make_api`'s closure.
"""

import asyncio
import email.policy
import logging
import threading
from collections.abc import Mapping
from email.parser import BytesParser
from http import HTTPStatus
from typing import Annotated, Any

from fastapi import FastAPI, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import Field, model_validator
from ray import serve
from ray.serve import Application
from ray.serve.handle import DeploymentHandle, DeploymentResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from conceptual.config import Config
from conceptual.runtime import init_ray
from conceptual.serve.captioner_deployment import CaptionerDeployment, CaptionerSettings
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
from conceptual.tracking import tracking_uri

logger = logging.getLogger("ray.serve")

APP_NAME = "captioning"
IMAGE_FIELD = "image"  # the form field holding the image in a multipart request


class ServeConfig(Config):
    """The application's arguments (`args:` in serve/config.yaml)."""

    captioner: CaptionerSettings = CaptionerSettings()
    max_beam: int = Field(8, ge=1)  # beam_size may go up to this
    default_beam: int = Field(3, ge=1)
    max_body_bytes: int = Field(16 << 20, gt=0)  # as the fetcher's cap on an image

    @model_validator(mode="after")
    def _default_beam_is_allowed(self) -> "ServeConfig":
        if self.default_beam > self.max_beam:
            raise ValueError(f"default_beam {self.default_beam} > max_beam {self.max_beam}")
        return self


# --- reading the image out of a request ----------------------------------------------------


async def read_body(request: Request, limit: int) -> bytes:
    """The body, refused with 413 as soon as it is known to exceed `limit` bytes: by its
    Content-Length, else (chunked uploads) by counting."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise ApiError(413, "too_large", f"Content-Length {declared} > {limit} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise ApiError(413, "too_large", f"the body is over {limit} bytes")
    return bytes(body)


def form_file(content_type: str, body: bytes) -> bytes:
    """The field IMAGE_FIELD of a multipart/form-data body (the standard library's MIME
    parser: lenient, and never decodes the file)."""
    header = f"Content-Type: {content_type}\r\n\r\n".encode("latin-1")  # as HTTP decoded it
    form = BytesParser(policy=email.policy.HTTP).parsebytes(header + body)
    if not form.is_multipart():
        raise ApiError(400, "bad_multipart", "a multipart/form-data body needs a boundary")
    for part in form.iter_parts():
        if part.get_param("name", header="content-disposition") == IMAGE_FIELD:
            return part.get_payload(decode=True) or b""
    raise ApiError(400, "missing_image", f"the form has no field named {IMAGE_FIELD!r}")


async def image_bytes(request: Request, limit: int) -> bytes:
    """The encoded image: the raw body, or the form field IMAGE_FIELD of a multipart body."""
    body = await read_body(request, limit)
    content_type = request.headers.get("content-type", "")
    if content_type.lower().startswith("multipart/form-data"):
        body = await asyncio.to_thread(form_file, content_type, body)
    if not body:
        raise ApiError(
            400, "empty_body", f"send an image as the body, or as the form field {IMAGE_FIELD!r}"
        )
    return body


# --- talking to the model deployments ------------------------------------------------------


async def answer(response: DeploymentResponse) -> Any:
    """A model deployment's result; its ApiError, or 503 when it did not answer, raised."""
    try:
        result = await response
    except Exception as error:  # a replica died, or Serve gave up on it: worth a retry
        logger.warning("a model deployment did not answer: %s", error)
        raise ApiError(503, "model_unavailable", "the model did not answer; retry") from error
    if isinstance(result, ApiError):
        raise result
    return result


# --- the HTTP API ---------------------------------------------------------------------------


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


def make_api(config: ServeConfig, captioner: DeploymentHandle) -> FastAPI:
    api = FastAPI(
        title="conceptual captioning",
        version="1",
        description="Captions for images from the registry's champion captioner.",
    )
    add_error_handlers(api)

    async def model_statuses() -> list[ModelStatus]:
        return [await answer(captioner.status.remote())]

    @api.post(
        "/v1/captions",
        response_model=CaptionResponse,
        responses=error_responses(400, 413, 415, 422, 500, 503),
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
    ) -> CaptionResponse:
        """Captions for one image, best first, naming the model version that made them."""
        if num_captions > beam_size:
            raise ApiError(
                422,
                "bad_parameter",
                f"num_captions {num_captions} > beam_size {beam_size}: "
                "a beam search keeps at most beam_size captions",
            )
        data = await image_bytes(request, config.max_body_bytes)
        captioned = await answer(captioner.caption.remote(data, beam_size, num_captions))
        response.headers["X-Batch-Size"] = str(captioned.batch_size)
        return captioned.response

    @api.get("/v1/models", response_model=ModelsResponse, responses=error_responses(503))
    async def models() -> ModelsResponse:
        """What is served: registered name, version, alias, tags and metrics."""
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


def add_error_handlers(api: FastAPI) -> None:
    """Every error is {"error": {"code", "message"}} with its status, FastAPI's own too."""
    api.add_exception_handler(ApiError, lambda _, error: error.response())
    api.add_exception_handler(RequestValidationError, bad_parameters)
    api.add_exception_handler(StarletteHTTPException, http_error)
    api.add_exception_handler(Exception, internal_error)


def bad_parameters(_: Request, error: RequestValidationError) -> JSONResponse:
    problems = "; ".join(
        f"{problem['loc'][-1]}: {problem['msg']} (got {problem.get('input')!r})"
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
    logger.error("unexpected error: %r", error)  # Starlette re-raises it: Serve logs the trace
    return ApiError(500, "internal_error", "unexpected error; see the service logs").response()


@serve.deployment(
    name="Api",
    num_replicas=1,
    ray_actor_options={"num_cpus": 0.1},  # it only parses requests and awaits the models
    max_ongoing_requests=64,  # awaiting is cheap: let requests queue at the model replicas
)
@serve.ingress()
class Api:
    def __init__(self, config: ServeConfig, captioner: DeploymentHandle):
        self.config, self.captioner = config, captioner

    def __serve_build_asgi_app__(self) -> FastAPI:  # Serve builds the app in each replica
        return make_api(self.config, self.captioner)


# --- building and running the application --------------------------------------------------


def build(config: ServeConfig, captioner_options: Mapping[str, Any] | None = None) -> Application:
    """The application; `captioner_options` are Serve deployment options for the captioner
    (autoscaling_config, num_replicas, ray_actor_options...) over its defaults."""
    settings = config.captioner
    if settings.tracking_uri is None:  # resolved once here, so every replica reads the same
        settings = settings.model_copy(update={"tracking_uri": tracking_uri()})
    captioner = CaptionerDeployment.options(**(captioner_options or {})).bind(settings)
    return Api.bind(config, captioner)


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
