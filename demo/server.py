"""The demo's image server: a directory over HTTP on 127.0.0.1, plus the ways a web server
fails, so that every rejection reason of the fetch stage has a URL that triggers it.

    with serve_directory(catalogue.directory) as server:
        fetch(f"{server.url}/coffee.jpg")

Paths besides the directory's files (and its listing at /):

| path | answers |
|---|---|
| /status/<code> | that HTTP status, e.g. /status/404, /status/500 |
| /redirect-loop | a redirect to itself, forever |
| /redirect-private | a redirect to PRIVATE_TARGET, an address on a private network |
| /slow | nothing for `slow_s` seconds (longer than the demo's fetch timeout), then a 204 |

To browse the images: `python -m conceptual_demo.server DIR [--port N]`.
"""

from __future__ import annotations

import argparse
import functools
import sys
import threading
import time
from collections import Counter
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

STATUS_PREFIX = "/status/"
REDIRECT_LOOP = "/redirect-loop"
REDIRECT_PRIVATE = "/redirect-private"
SLOW = "/slow"
PRIVATE_TARGET = "http://10.0.0.1/photo.jpg"
SLOW_RESPONSE_S = 5.0


class _Handler(SimpleHTTPRequestHandler):
    """Files from the directory, except on the special paths."""

    server: _Server

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        with self.server.lock:
            self.server.requests[path] += 1
        if path.startswith(STATUS_PREFIX):
            self._status(path.removeprefix(STATUS_PREFIX))
        elif path == REDIRECT_LOOP:
            self._redirect(REDIRECT_LOOP)
        elif path == REDIRECT_PRIVATE:
            self._redirect(PRIVATE_TARGET)
        elif path == SLOW:
            time.sleep(self.server.slow_s)
            self._reply(HTTPStatus.NO_CONTENT)
        else:
            super().do_GET()

    def _status(self, code: str) -> None:
        if code.isdigit() and 400 <= int(code) <= 599:
            self.send_error(int(code))
        else:
            self.send_error(HTTPStatus.NOT_FOUND, f"no such status: {code}")

    def _redirect(self, location: str) -> None:
        self._reply(HTTPStatus.FOUND, location=location)

    def _reply(self, status: HTTPStatus, location: str | None = None) -> None:
        self.send_response(status)
        if location:
            self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args) -> None:
        pass  # the demo's output is the funnel, not an access log


class _Server(ThreadingHTTPServer):
    # /slow keeps a thread asleep after its client gave up: stop() must not wait for it.
    block_on_close = False

    def __init__(self, address: tuple[str, int], directory: Path, slow_s: float):
        super().__init__(address, functools.partial(_Handler, directory=str(directory)))
        self.slow_s = slow_s
        self.requests: Counter[str] = Counter()  # GETs by path: what a client fetched twice
        self.lock = threading.Lock()

    def handle_error(self, request, client_address) -> None:
        # Clients that time out (on /slow, by design) or stop reading (a file over their size
        # limit) close the connection under the handler: expected, not worth a traceback.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class DemoServer:
    """A running server: `url` is its base URL ("http://127.0.0.1:PORT"); `stop()` ends it."""

    def __init__(self, directory: Path, host: str, port: int, slow_s: float):
        self._httpd = _Server((host, port), directory, slow_s)
        self.url = f"http://{host}:{self._httpd.server_port}"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="demo-image-server", daemon=True
        )
        self._thread.start()

    @property
    def requests(self) -> Counter[str]:
        """How often each path was asked for so far."""
        with self._httpd.lock:
            return Counter(self._httpd.requests)

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def __enter__(self) -> DemoServer:
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()


def serve_directory(
    directory: str | Path,
    host: str = "127.0.0.1",
    port: int = 0,
    slow_s: float = SLOW_RESPONSE_S,
) -> DemoServer:
    """Serve `directory` and the special paths from a daemon thread; port 0 picks a free
    port. Binds 127.0.0.1 unless told otherwise: the demo's files are for this machine."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"no such directory: {directory}")
    return DemoServer(directory, host, port, slow_s)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m conceptual_demo.server", description="Serve the demo's images."
    )
    parser.add_argument("directory", type=Path)
    parser.add_argument("--port", type=int, default=0, help="default: any free port")
    args = parser.parse_args(argv)
    try:
        running = serve_directory(args.directory, port=args.port)
    except OSError as exc:  # no such directory, or the port is taken
        parser.error(str(exc))
    with running as server:
        print(f"serving {args.directory} at {server.url}/ (Ctrl-C to stop)", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
