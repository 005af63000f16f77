"""The HTTP API's data, shared by the ingress and the model deployments: the response bodies
(pydantic, so the OpenAPI document describes them) and the error every refusal becomes.

Error codes are stable (clients and dashboards key on them):

| status | code | when |
|---|---|---|
| 400 | empty_body, missing_image, bad_multipart | no image in the request |
| 400 | too_many_parts | a multipart form with more than MAX_FORM_PARTS parts |
| 400 | incomplete_body | the client closed the connection mid-body (nobody reads it) |
| 404, 405 | not_found, method_not_allowed | no such route or method |
| 408 | body_timeout | the body did not arrive within `body_timeout_s` |
| 413 | too_large | the body is over `max_body_bytes` (Content-Length, then counted) |
| 415 | not_an_image | bytes that no image decoder recognizes |
| 422 | truncated, corrupt, too_many_pixels, ... | an image that cannot be decoded safely (any code of the decoder's ImageError) |
| 422 | bad_parameter | beam_size or num_captions missing their bounds, or not integers; a language or captioner the service does not know, or a captioner that writes another language than the one asked |
| 501 | not_enabled | a captioner, a caption language (or a search) this service does not run (ServeConfig.captioners, .retrievers) |
| 503 | busy | `max_concurrent_uploads` bodies are being received already; retry |
| 503 | not_ready, model_unavailable | no model loaded yet; the model deployment did not answer (its replica died mid-request, or Serve has none up) |
| 500 | model_error, internal_error | a bug: the model or the service failed on a valid request |

Every 503 carries `Retry-After` (seconds, RETRY_AFTER_S): Serve replaces a dead replica in
seconds, and a model still loading takes longer.

Messages are the service's own words: never a library's exception text, which can quote
the request's bytes or the service's internals.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from conceptual.models.inference import ImageError


def image_reference(image_url: str | None) -> tuple[str | None, str | None]:
    """(image_url, image_path) of an indexed image, as answers show it: an http(s) URL as it
    is; a path in its dataset (`val2017/000000000139.jpg`, importers.dataset_path) as
    image_path; a location on the service's machines (a `file://` URI or an absolute path, as
    imports before dataset paths stored them; `s3://`...) by its file name only: answers
    never tell the server's folders."""
    if not image_url:
        return None, None
    scheme = urlsplit(image_url).scheme.lower() if "://" in image_url else ""
    if scheme in ("http", "https"):
        return image_url, None
    if scheme:
        return None, posixpath.basename(unquote(urlsplit(image_url).path)) or None
    if image_url.startswith(("/", "\\")) or image_url[1:3] in (":/", ":\\"):
        return None, posixpath.basename(image_url.replace("\\", "/")) or None
    return None, image_url


class ErrorDetail(BaseModel):
    code: str = Field(description="stable, machine-readable: see the table in the API docs")
    message: str = Field(description="for humans")


class ErrorResponse(BaseModel):
    error: ErrorDetail


# Seconds a client should wait before retrying a 503, by code.
RETRY_AFTER_S = {"busy": 1, "model_unavailable": 1, "not_ready": 5}


class ApiError(Exception):
    """A request answered with an error. The ingress raises it; a model deployment returns
    it instead, because an exception raised in a replica crosses Ray as a logged failure."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(status, code, message)  # args as given, so it pickles across Ray
        self.status, self.code, self.message = status, code, message

    def response(self) -> JSONResponse:
        body = ErrorResponse(error=ErrorDetail(code=self.code, message=self.message))
        headers = (
            {"Retry-After": str(RETRY_AFTER_S.get(self.code, 1))} if self.status == 503 else None
        )
        return JSONResponse(body.model_dump(), status_code=self.status, headers=headers)


def not_ready() -> ApiError:
    """A model deployment's answer before its first model is loaded (why: /readyz with
    `admin_details`, and the replica's log)."""
    return ApiError(503, "not_ready", "no model loaded yet; retry later")


# What a client is told for each decoder refusal; a code not listed here gets the generic
# message, so a new guard in the decoder needs no change in serving.
IMAGE_ERROR_MESSAGES = {
    "not_an_image": "the body is not an image in a format the service reads",
    "truncated": "the image ends before its pixel data does",
    "corrupt": "the image data is damaged and cannot be decoded",
    "too_many_pixels": "the image declares more pixels than the service decodes",
    "implausible_size": "the image file is too small for the size its header declares",
    "too_many_scans": "the image has more progressive scans than the service decodes",
}


def image_error(error: ImageError) -> ApiError:
    """415 for bytes that are no image at all, 422 for an image that cannot be decoded,
    whatever the decoder's code; the message is ours, not the decoder's exception text."""
    message = IMAGE_ERROR_MESSAGES.get(error.reason, "the image cannot be decoded safely")
    return ApiError(415 if error.reason == "not_an_image" else 422, error.reason, message)


# What a refused parameter is told, by the validation library's error type: its own words
# ("Unable to parse input string as an integer, exceeded maximum size" for a 6,000-digit
# beam_size) change with its version and are not the service's.
PARAMETER_PROBLEMS = {
    "missing": "missing",
    "int_parsing": "not an integer",
    "int_type": "not an integer",
    "int_from_float": "not an integer",
    "int_parsing_size": "a number of too many digits",
    "string_type": "not a string",
    "greater_than_equal": "must be at least {ge}",
    "less_than_equal": "must be at most {le}",
    "extra_forbidden": "not a parameter of this route",
}


def parameter_problem(problem: Mapping[str, Any]) -> str:
    """One refused parameter (an entry of pydantic's `errors()`), in the service's words."""
    words = PARAMETER_PROBLEMS.get(problem.get("type", ""), "not a valid value")
    try:
        return words.format(**problem.get("ctx", {}))
    except (KeyError, IndexError):
        return "not a valid value"


class ModelRef(BaseModel):
    """Which registered model version answered."""

    name: str = Field(description="registered model name")
    version: str = Field(description="registered version number")
    alias: str = Field(description="the registry alias the service follows")
    variant: str | None = Field(None, description="the version's `variant` tag")


class RegisteredModel(ModelRef):
    """A served version as the registry recorded it."""

    run_id: str | None = None
    tags: dict[str, str] = Field(
        default_factory=dict, description="version tags: variant, eval.<set>.<metric> scores"
    )
    metrics: dict[str, float] = Field(
        default_factory=dict, description="the training run's final metrics"
    )
    datasets: list[dict[str, Any]] = Field(
        default_factory=list,
        description="what the training run read (conceptual.lineage): each dataset's name, "
        "source URI, part, digest, rows per split and the splits read with their contexts",
    )

    def ref(self) -> ModelRef:
        return ModelRef(
            name=self.name, version=self.version, alias=self.alias, variant=self.variant
        )


class ModelStatus(BaseModel):
    """One deployment's model, as the replica that answered holds it."""

    task: str = Field(description="what the model does: captioning")
    captioner: str | None = Field(
        None, description="a captioner's key, which `?captioner=` names: en, zh"
    )
    language: str | None = Field(None, description="the language a captioner writes: en, zh")
    ready: bool
    model: RegisteredModel | ModelRef | None = Field(
        None,
        description="null until a version is loaded; its run id, tags and metrics only with "
        "the service's `admin_details`",
    )
    problem: str | None = Field(
        None,
        description="why the last registry check failed, if it did; only with the service's "
        "`admin_details` (else in the replica's log)",
    )

    def public(self) -> ModelStatus:
        """What any client is shown: the model's name, version and alias, not its run, tags,
        metrics or problem (which can name the service's paths)."""
        model = self.model.ref() if isinstance(self.model, RegisteredModel) else self.model
        return self.model_copy(update={"model": model, "problem": None})


class CaptionResponse(BaseModel):
    captions: list[str] = Field(
        description="num_captions captions, best first, as the model writes them: words joined "
        "by spaces (Chinese too: 一只 狗 在 草地 上 跑)"
    )
    display: list[str] = Field(
        description="the same captions as a reader writes them: Chinese without the spaces "
        "between its words (一只狗在草地上跑); English as in `captions`"
    )
    language: str = Field(description="the captions' language: en, zh")
    captioner: str = Field(description="the key of the captioner that wrote them: en, zh")
    model: ModelRef
    beam_size: int


class Limits(BaseModel):
    max_beam: int
    default_beam: int | None = Field(
        description="the beam of a request without beam_size; null: each model's own, the "
        "beam it was evaluated at"
    )
    max_body_bytes: int


class ModelsResponse(BaseModel):
    models: list[ModelStatus]
    limits: Limits


class Readiness(BaseModel):
    ready: bool = Field(description="true when every model is loaded")
    models: list[ModelStatus]


class Health(BaseModel):
    status: str = "ok"
