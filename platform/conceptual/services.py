"""Calls to the services a job is pointed at (its tracking server, a translation service):
one request that ends within a total deadline whatever the server does, its answer read to
at most `max_bytes`.

urllib's `timeout` bounds each wait on the socket, not the request: a server that answers
a byte every few seconds, or whose API hangs behind a health check that answers, held a job
for as long as it liked. Here the connect, the status line, the headers and the body all
share one deadline (vision/http_client.py's, the image fetcher's client). Unlike the
fetcher's URLs, these are the user's own: any address may be called, loopback and private
ones too, and userinfo in the URL is sent as HTTP basic authentication, as curl sends it.
Like the fetcher, a call connects itself: proxy variables (HTTPS_PROXY...) are not used.
"""

from __future__ import annotations

import base64
import http.client
import ssl
from urllib.parse import unquote, urlsplit

from conceptual.vision.http_client import Deadline, describe, open_connection, read_body, resolve
from conceptual.vision.url_safety import Failure, parse_url

_TLS = ssl.create_default_context()


class ServiceDown(RuntimeError):
    """A service did not answer in time, or could not be reached: the system's fault, never
    a row's (pipelines/dataflow/steps.py `isolated` does not run a batch that raised it again row by
    row, each row waiting out the deadline again)."""


def request(
    url: str, total_s: float, max_bytes: int, body: bytes | None = None, headers=None
) -> tuple[int, bytes]:
    """(status, answer) of a GET of `url`, or a POST of `body`, all of it within `total_s`;
    ServiceDown (its message what went wrong, "timed out" when the time ran out) when it
    could not be had."""
    deadline = Deadline(total_s, total_s)
    try:
        target = parse_url(url, credentials=True)
        headers = {**(headers or {}), **_basic_auth(url)}
        connection = open_connection(target, resolve(target, deadline), deadline, _TLS)
        try:
            method = "GET" if body is None else "POST"
            connection.request(method, target.path, body=body, headers=headers)
            response = connection.getresponse()
            return response.status, read_body(response, max_bytes)
        finally:
            connection.close()
    except Failure as exc:
        raise ServiceDown(exc.rejection.detail) from exc
    except TimeoutError as exc:
        raise ServiceDown("timed out") from exc
    except (OSError, http.client.HTTPException) as exc:
        raise ServiceDown(describe(exc)) from exc


def _basic_auth(url: str) -> dict[str, str]:
    parts = urlsplit(url)
    if parts.username is None:
        return {}
    pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
    return {"Authorization": "Basic " + base64.b64encode(pair.encode()).decode()}
