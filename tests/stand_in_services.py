"""HTTP stand-ins on 127.0.0.1 for the services a job calls (a tracking server, a translation
service), each route answering, hanging (the request read, never answered) or trickling its
answer a byte at a time: what a service that stops answering looks like to its client."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

Behaviour = Callable[["Handler"], None]


@dataclass
class Request:
    method: str
    path: str  # with its query
    headers: Mapping[str, str]
    body: bytes


def answer(status: int, body: bytes | dict | Callable[[Request], dict]) -> Behaviour:
    """Answer at once: `body` itself, JSON of a dict, or of what `body(request)` returns."""

    def respond(handler: Handler) -> None:
        data = body(handler.received) if callable(body) else body
        payload = data if isinstance(data, bytes) else json.dumps(data).encode()
        handler.send_response(status)
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    return respond


def hang(handler: Handler) -> None:
    """Never answer (until the stand-in stops)."""
    handler.server.stopped.wait()


def trickle(every_s: float = 0.2, size: int = 1000) -> Behaviour:
    """Headers at once, then a body of `size` bytes, one byte every `every_s`."""

    def respond(handler: Handler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", str(size))
        handler.end_headers()
        for _ in range(size):
            if handler.server.stopped.wait(every_s):
                return
            handler.wfile.write(b" ")
            handler.wfile.flush()

    return respond


class Handler(http.server.BaseHTTPRequestHandler):
    server: StandIn

    def handle_one(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        self.received = Request(self.command, self.path, dict(self.headers), body)
        path = urlsplit(self.path).path
        served = self.server.requests.setdefault(path, [])
        served.append(self.received)
        behaviours = self.server.routes.get(path, [answer(404, b"")])
        try:
            behaviours[min(len(served), len(behaviours)) - 1](self)
        except OSError:  # the client gave up
            pass

    do_GET = do_POST = handle_one

    def log_message(self, *args) -> None:  # quiet
        pass


class StandIn(http.server.ThreadingHTTPServer):
    """`routes`: path -> behaviours, the n-th request to it getting the n-th (the last one
    for every request after). `requests`: path -> the requests it got. A context manager."""

    daemon_threads = True

    def __init__(self, routes: Mapping[str, Behaviour | Sequence[Behaviour]]):
        super().__init__(("127.0.0.1", 0), Handler)
        self.routes = {p: [b] if callable(b) else list(b) for p, b in routes.items()}
        self.requests: dict[str, list[Request]] = {}
        self.stopped = threading.Event()
        self.url = f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> StandIn:
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopped.set()
        self.shutdown()
        self.server_close()
