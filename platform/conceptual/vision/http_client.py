"""The HTTP client under vision/fetch.py: one request to a vetted address (vision/url_safety.py
vetted it) within an attempt's deadline. The host is resolved once and the connection made
to the address that was vetted, so a second DNS answer cannot point it elsewhere; the Host
header and TLS still use the name. Every lookup, connect and read (status line, headers,
chunk sizes, body) waits at most the time the attempt has left, and the body streams in
chunks that stop at `max_bytes`.
"""

from __future__ import annotations

import http.client
import io
import ipaddress
import socket
import ssl
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as LookupTimeout

from conceptual.vision.url_safety import Failure, IPAddress, Target
from conceptual.weburl import standard_href, web_url

CHUNK_BYTES = 64 << 10

# Lookups run here so that a resolver that does not answer costs a thread, not the attempt
# (getaddrinfo cannot be interrupted). Bounded: when every thread waits on a dead resolver,
# further lookups queue and time out at their deadline.
_LOOKUPS = ThreadPoolExecutor(max_workers=32, thread_name_prefix="fetch-dns")


class Deadline:
    """The end of an attempt: each wait lasts at most `timeout_s`, and never past the end."""

    def __init__(self, timeout_s: float, total_s: float):
        self.timeout_s, self.total_s = timeout_s, total_s
        self.end = time.monotonic() + total_s

    def wait_s(self) -> float:
        """How long the next connect, lookup or read may wait; TimeoutError when none."""
        left = self.end - time.monotonic()
        if left <= 0:
            raise TimeoutError("no time left")
        return min(self.timeout_s, left)

    def timed_out(self, waiting_for: str) -> Failure:
        """A wait of `timeout_s` that ran out is worth another attempt; an attempt that ran
        out of time is not (a trickling server would trickle again)."""
        if time.monotonic() >= self.end:
            return Failure("timeout", f"{waiting_for}: over {self.total_s}s for the attempt")
        return Failure("timeout", waiting_for, transient=True)


class _DeadlineSocket:
    """The socket as http.client uses it (sendall, makefile, close), with every send and
    receive bounded by the deadline: http.client reads the status line, headers and chunk
    sizes a line at a time, and a socket timeout alone bounds each read, not the line."""

    def __init__(self, sock: socket.socket, deadline: Deadline):
        self.sock, self.deadline = sock, deadline

    def sendall(self, data: bytes) -> None:
        self.sock.settimeout(self.deadline.wait_s())
        self.sock.sendall(data)

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(_Reader(self.sock, self.deadline))

    def close(self) -> None:
        self.sock.close()  # the socket stays open while a reader made from it is


class _Reader(io.RawIOBase):
    """The raw stream under http.client's buffered reader: the socket's own file (which
    keeps the socket open until it closes), each read bounded by the deadline."""

    def __init__(self, sock: socket.socket, deadline: Deadline):
        self.sock, self.deadline = sock, deadline
        self.file = sock.makefile("rb", buffering=0)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        self.sock.settimeout(self.deadline.wait_s())
        return self.file.readinto(buffer)

    def close(self) -> None:
        self.file.close()
        super().close()


def resolve(target: Target, deadline: Deadline) -> list[IPAddress]:
    """Every address of the host, in the resolver's order (an IP literal is itself)."""
    try:
        return [ipaddress.ip_address(target.host)]
    except ValueError:
        pass
    wait_s = deadline.wait_s()
    lookup = _LOOKUPS.submit(socket.getaddrinfo, target.host, target.port, type=socket.SOCK_STREAM)
    try:
        infos = lookup.result(timeout=wait_s)
    except LookupTimeout as exc:
        lookup.cancel()  # when still queued
        detail = f"{target.host}: no answer within {wait_s:.1f}s"
        raise Failure("dns", detail, transient=True) from exc
    except (socket.gaierror, UnicodeError) as exc:
        temporary = getattr(exc, "errno", None) == socket.EAI_AGAIN
        raise Failure("dns", f"{target.host}: {exc.args[-1]}", transient=temporary) from exc
    addresses = [ipaddress.ip_address(info[4][0]) for info in infos]
    return list(dict.fromkeys(addresses))  # IPv4 and IPv6 answers repeat per protocol


def _connect(addresses: Sequence[IPAddress], port: int, deadline: Deadline) -> socket.socket:
    """A TCP connection to the first of the vetted addresses that answers."""
    error: OSError = OSError("no address")
    for ip in addresses:
        try:
            return socket.create_connection((str(ip), port), deadline.wait_s())
        except OSError as exc:
            error = exc
    raise error


def open_connection(
    target: Target, addresses: Sequence[IPAddress], deadline: Deadline, tls: ssl.SSLContext
) -> http.client.HTTPConnection:
    """A connection to a vetted address: http.client never resolves the host again,
    because a connection given its socket does not connect by itself."""
    sock = _connect(addresses, target.port, deadline)
    if target.scheme == "http":
        connection = http.client.HTTPConnection(target.host, target.port)
    else:
        try:
            sock.settimeout(deadline.wait_s())
            sock = tls.wrap_socket(sock, server_hostname=target.host)
        except OSError as exc:
            sock.close()
            if isinstance(exc, ssl.SSLError):  # a failed handshake fails again: not transient
                raise Failure("connection", f"{target.host}: TLS {exc.reason or exc}") from exc
            raise
        connection = http.client.HTTPSConnection(target.host, target.port)
    connection.sock = _DeadlineSocket(sock, deadline)
    return connection


def redirect_url(url: str, location: str) -> str:
    """Where a redirect leads (a relative Location is relative to the URL that sent it), as
    conceptual/weburl.py's `web_url` writes it; a URL that is no web URL (ftp:, credentials)
    as the standard writes it, for the next hop's parse_url to refuse by name. Failure
    (invalid_url) when the Location is no URL at all."""
    href = web_url(location, url) or standard_href(location, url)
    if href is None:
        raise Failure("invalid_url", "redirect Location: not a URL by the URL Standard")
    return href


def read_body(response: http.client.HTTPResponse, max_bytes: int) -> bytes:
    declared = response.getheader("Content-Length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise Failure("too_large", f"Content-Length {declared} > {max_bytes}")
    chunks: list[bytes] = []
    received = 0
    # read1: what has arrived, up to a chunk, so the size check runs promptly
    while chunk := response.read1(min(CHUNK_BYTES, max_bytes + 1 - received)):
        received += len(chunk)
        if received > max_bytes:
            raise Failure("too_large", f"over {max_bytes} bytes")
        chunks.append(chunk)
    if declared.isdigit() and received < int(declared):  # http.client does not check this
        raise Failure("connection", f"closed after {received} of {declared} bytes", transient=True)
    return b"".join(chunks)


def describe(exc: BaseException) -> str:
    """A short human description of a connection error."""
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
