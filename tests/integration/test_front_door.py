"""The front door (conceptual.serve.front_door): a real nginx, run as this user under its own
prefix on a free 127.0.0.1 port, in front of a real Serve application (no champion: every
attack here is stopped before a model is needed). The attacks of issue 32's review,
small-scale: each is cut off with its status while /healthz keeps answering."""

from __future__ import annotations

import select
import socket
import time

import httpx
import pytest
from ray import serve

from conceptual.serve.app import ServeConfig, start
from conceptual.serve.captioner_deployment import CaptionerSettings
from conceptual.serve.front_door import FrontDoor, FrontDoorConfig

pytestmark = pytest.mark.integration

HEADER_TIMEOUT_S = 2
PER_CLIENT = 4
WORKER_CONNECTIONS = 64
MAX_BODY = 1 << 20


@pytest.fixture(scope="module")
def door(ray_local, free_port):
    """The front door's URL, in front of one Serve application for the module."""
    upstream = start(ServeConfig(captioner=CaptionerSettings(model_name="front-door-none")),
                     port=free_port())  # fmt: skip
    config = FrontDoorConfig(
        listen=f"127.0.0.1:{free_port()}",
        upstream=upstream.removeprefix("http://"),
        worker_processes="1",
        worker_connections=WORKER_CONNECTIONS,
        connections_per_client=PER_CLIENT,
        header_timeout_s=HEADER_TIMEOUT_S,
        max_body_bytes=MAX_BODY,
    )
    front = FrontDoor(config)
    yield front.url
    front.stop()
    serve.shutdown()


def healthy(url: str) -> bool:
    response = httpx.get(f"{url}/healthz", timeout=3)
    return response.status_code == 200 and response.json() == {"status": "ok"}


def connect(url: str) -> socket.socket:
    address = httpx.URL(url)
    return socket.create_connection((address.host, address.port), timeout=30)


def status_line(connection: socket.socket) -> str:
    """The response's status line, or '' when the server closed without one."""
    data = b""
    while b"\r\n" not in data:
        chunk = connection.recv(4096)
        if not chunk:
            break
        data += chunk
    return data.split(b"\r\n", 1)[0].decode()


def test_requests_pass_through(door):
    assert healthy(door)
    assert httpx.get(f"{door}/readyz").status_code == 503  # no champion: not ready
    refused = httpx.post(f"{door}/v1/captions", content=b"x")
    assert refused.status_code == 503 and refused.json()["error"]["code"] == "not_ready"


@pytest.mark.parametrize("where", ["header", "request line"])
def test_big_headers_are_refused(door, where):
    huge = "a" * (64 << 10)
    with connect(door) as connection:
        if where == "header":
            connection.sendall(
                f"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: {huge}\r\n\r\n".encode()
            )
        else:
            connection.sendall(f"GET /healthz?{huge} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        status = status_line(connection)
    assert status.split()[1] in {"400", "414", "431", "494"}, status
    assert healthy(door)


def test_unfinished_headers_are_cut_off_at_the_header_timeout(door):
    started = time.monotonic()
    with connect(door) as connection:
        connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Never: end")
        assert status_line(connection) in {"", "HTTP/1.1 408 Request Time-out"}
    assert time.monotonic() - started < HEADER_TIMEOUT_S + 3
    assert healthy(door)


def test_idle_connections_are_limited_and_closed(door):
    """More idle connections than the worker holds: all are closed by the header timeout,
    and /healthz answers meanwhile and after."""
    idle = [connect(door) for _ in range(2 * WORKER_CONNECTIONS)]
    try:
        time.sleep(0.5)
        started = time.monotonic()
        assert healthy(door)  # waits at most until the timeout frees the worker's slots
        assert time.monotonic() - started < HEADER_TIMEOUT_S + 2
        time.sleep(HEADER_TIMEOUT_S + 1)
        for connection in idle:
            connection.settimeout(5)
            closed = connection.recv(1024)
            assert closed == b"" or b" 408 " in closed
    finally:
        for connection in idle:
            connection.close()
    assert healthy(door)


def test_connections_past_the_per_client_limit_get_503(door):
    """Slow uploads from one address: past connections_per_client, 503 busy with
    Retry-After at once; health probes are not counted."""
    uploads = [connect(door) for _ in range(PER_CLIENT + 3)]
    try:
        statuses = []
        for connection in uploads:
            connection.sendall(b"POST /v1/captions HTTP/1.1\r\nHost: x\r\n"
                               b"Content-Length: 1000\r\n\r\nx")  # fmt: skip
            time.sleep(0.05)
        for connection in uploads[PER_CLIENT:]:
            connection.settimeout(5)
            statuses.append(status_line(connection))
        assert statuses == ["HTTP/1.1 503 Service Temporarily Unavailable"] * 3
        assert healthy(door)
    finally:
        for connection in uploads:
            connection.close()


def test_a_chunked_oversize_body_gets_413_before_it_is_all_sent(door):
    total, chunk = 64 * MAX_BODY, b"\xff" * (64 << 10)
    sent = 0
    with connect(door) as connection:
        connection.sendall(b"POST /v1/captions HTTP/1.1\r\nHost: x\r\n"
                           b"Transfer-Encoding: chunked\r\n\r\n")  # fmt: skip
        while sent < total and not select.select([connection], [], [], 0)[0]:  # no answer yet
            try:
                connection.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            except OSError:  # closed by the server after its answer
                break
            sent += len(chunk)
        connection.settimeout(5)
        status = status_line(connection)
    assert status.startswith("HTTP/1.1 413"), status
    assert sent < total / 4
    assert healthy(door)
