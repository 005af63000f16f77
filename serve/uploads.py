"""Receiving a request's body at the ingress (conceptual.serve.routes): the image, the audio
or the JSON text query, with the guards that hostile clients meet before any model does.

A body must arrive whole within `body_timeout_s` (408 after) and hold at most its limit (413,
by its Content-Length, else counted), and at most `max_concurrent_uploads` bodies are
received at once (503 `busy` beyond; `admitted`), fewer than the ingress's
`max_ongoing_requests`: slow uploads can never take every slot of the ingress, so health
checks and the requests already received still get through. Forms are parsed as they stream
in (python-multipart), and refused past MAX_FORM_PARTS parts.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from python_multipart import MultipartParser
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import parse_options_header
from ray.exceptions import TaskCancelledError
from starlette.requests import ClientDisconnect

from conceptual.serve.retriever_deployment import RetrievalSettings
from conceptual.serve.schema import ApiError, parameter_problem
from conceptual.speech.audio import MEDIA_TYPES

IMAGE_FIELD = "image"  # the form field holding the image in a multipart request
AUDIO_FIELD = "audio"  # the form field holding a spoken query
# Audio media types a spoken query may be sent as (WAV, FLAC, MP3: conceptual.speech.audio).
AUDIO_TYPES = frozenset(MEDIA_TYPES)
# The image and a few other fields at most; thousands of tiny parts only burn CPU.
MAX_FORM_PARTS = 8


class TextQuery(BaseModel):
    """The JSON body of a text search."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(description="what the images should show")
    k: int | None = Field(None, description="how many images (default: the query parameter's)")


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
    request: Request, uploads: asyncio.Semaphore, limit: int, timeout_s: float, field: str
) -> bytes:
    """The body, or the form field `field` of a multipart body, of at most `limit` bytes,
    received within `timeout_s` while holding one of the `uploads` slots."""
    content_type = request.headers.get("content-type", "")
    multipart = media_type(request) == "multipart/form-data"
    sink = FormField(content_type, field) if multipart else RawBody()
    async with admitted(uploads, "too many uploads in progress; retry"):
        try:
            await asyncio.wait_for(read_body(request, limit, sink), timeout_s)
        except asyncio.TimeoutError as error:
            raise ApiError(
                408, "body_timeout", f"the body did not arrive within {timeout_s} s"
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


def text_query(body: bytes, settings: RetrievalSettings) -> TextQuery:
    """The JSON body of a text search, its text checked (422 empty, 413 too long)."""
    try:
        query = TextQuery.model_validate_json(body)
    except ValidationError as error:
        if any(problem["type"] == "json_invalid" for problem in error.errors()):
            raise ApiError(400, "bad_json", "the body is not valid JSON") from error
        problems = "; ".join(
            f"{'.'.join(map(str, problem['loc'])) or 'body'}: {parameter_problem(problem)}"
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
