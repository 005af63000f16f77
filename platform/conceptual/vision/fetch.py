"""Fetching candidate images over HTTP(S), safely (docs/spec/curation.md section 7).

    fetcher = Fetcher(FetchConfig(threads=32))
    results = fetcher.fetch_many(urls)  # same order; each a Fetched: bytes or a Rejection

No Ray here: the curation pipeline calls `fetch_many` once per block of candidates. A crawl
is hostile input, so every hop of a redirect chain is checked before anything connects:
the scheme, the port (80 and 443 by default: a crawl must not reach mail, SSH or admin
services on other ports), then every address the host resolves to (loopback, private,
link-local, multicast, reserved and unspecified addresses are refused unless allowed). The fetcher
resolves each host once and connects to the vetted address itself, so a second DNS answer
cannot point it elsewhere (DNS rebinding); the Host header and TLS still use the name.
Bodies stream in chunks and stop at `max_bytes`; they are never decompressed.

Manners: an image whose response carries an `X-Robots-Tag` opt-out (`opt_out_directives`,
by default noai, noimageai, noindex and noimageindex) for every agent or for ours is
rejected before its body is read, as img2dataset does (`respect_opt_out`). A directive
list may name the agent it is for: `X-Robots-Tag: otherbot: noindex` is another
crawler's business; `X-Robots-Tag: conceptual: noai` (our User-Agent's product token,
any case) and a bare `noai` are ours; directives may be separated by commas or semicolons,
and `none` opts out as `noindex` does. And no server gets more than `per_host` requests
at once from one Fetcher, redirect hops included, counted by the address its host
resolved to (slot_key: `localhost` and `127.0.0.1` are one server): `fetch_many` holds a
host's further URLs back and starts other hosts' meanwhile, so the pool stays busy when
hosts differ.

An attempt ends within `total_timeout_s` whatever the server does: the DNS lookup, the
connection and every read (status line, headers, chunk sizes, body) wait at most the time
left, so a server trickling a byte at a time is cut at the deadline, not per read. Waiting
for a turn at a busy host (`per_host`) is not the server's doing and does not count.

Reasons (metric names, stage "fetch"; never reword one). Details never contain the URL,
which may carry credentials.

| reason | when |
|---|---|
| invalid_url | None, empty, over 2048 characters, no host, a bad port or host name |
| unsupported_scheme | anything but http and https (file:, ftp:, data:...), redirects included |
| dns | the host name does not resolve, or the resolver gives no answer in time |
| refused_port | a port not in `allow_ports`, on a host not in `allow_hosts`: "port 8080" |
| refused_address | the host resolves to an address that is not public and not allowed |
| timeout | connecting or a read took over `timeout_s`, or the attempt over `total_timeout_s` |
| connection | refused, reset, closed mid-body, TLS handshake failed |
| http_status | a status other than 2xx and redirects: "404 Not Found" |
| too_many_redirects | more than `max_redirects` redirects (loops end here) |
| too_large | over `max_bytes`, by Content-Length or by counting the body |
| empty | a zero-byte body |
| not_an_image | the first bytes are no JPEG, PNG, GIF, WebP, BMP or TIFF signature |
| opted_out | an `X-Robots-Tag` directive for us in `opt_out_directives`: "X-Robots-Tag: noai" |

Timeouts of one connect or read, temporary DNS failures (EAI_AGAIN, no answer in time),
connection errors (but refused connections and failed TLS handshakes), 429 and 5xx are
transient: the whole chain is tried again up to `retries` times, after an exponential
backoff with jitter or the server's Retry-After, whichever is longer (capped). An attempt
that used up `total_timeout_s` is not: a trickling server would trickle again.
"""

from __future__ import annotations

import http.client
import io
import ipaddress
import random
import re
import socket
import ssl
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from concurrent.futures import TimeoutError as LookupTimeout
from contextlib import contextmanager
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from urllib.parse import quote, urljoin, urlsplit

from pydantic import field_validator

from conceptual.config import Config
from conceptual.records import Rejection

# The reasons of the table above, in its order.
FETCH_REASONS = (
    "invalid_url",
    "unsupported_scheme",
    "dns",
    "refused_port",
    "refused_address",
    "timeout",
    "connection",
    "http_status",
    "too_many_redirects",
    "too_large",
    "empty",
    "not_an_image",
    "opted_out",
)
MAX_URL_CHARS = 2048
CHUNK_BYTES = 64 << 10
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# X-Robots-Tag directives that carry a value after a colon ("max-snippet: 20"): the name
# before their colon is no user agent.
VALUED_DIRECTIVES = frozenset(
    {"max-snippet", "max-image-preview", "max-video-preview", "unavailable_after"}
)
DEFAULT_PORTS = {"http": 80, "https": 443}

# Lookups run here so that a resolver that does not answer costs a thread, not the attempt
# (getaddrinfo cannot be interrupted). Bounded: when every thread waits on a dead resolver,
# further lookups queue and time out at their deadline.
_LOOKUPS = ThreadPoolExecutor(max_workers=32, thread_name_prefix="fetch-dns")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class FetchConfig(Config):
    """How images are fetched. Defaults suit a crawl of the public web."""

    timeout_s: float = 10.0  # connect and each read
    total_timeout_s: float = 60.0  # one attempt, redirects included: no trickling server
    retries: int = 2  # extra attempts on transient errors (timeouts, resets, 429, 5xx)
    backoff_s: float = 0.5  # exponential backoff base, with jitter
    max_wait_s: float = 10.0  # cap on any wait between attempts, Retry-After included
    max_redirects: int = 3
    max_bytes: int = 16 << 20  # larger bodies are rejected (Content-Length, then counted)
    user_agent: str = (
        "conceptual/0.1 (image-caption curation; "
        "+https://github.com/conceptual-captions/conceptual)"
    )
    threads: int = 16  # the bounded thread pool of one fetch_many call
    # at most this many requests to one server (the address its host resolves to) at once
    # per Fetcher, redirect hops included; other hosts' URLs go ahead meanwhile, up to
    # `threads`
    per_host: int = 4
    respect_opt_out: bool = True  # reject images whose X-Robots-Tag opts out for us
    # X-Robots-Tag directives that opt an image out, for every agent or for our User-Agent's
    # product token ("conceptual"); compared in any case
    opt_out_directives: list[str] = ["noai", "noimageai", "noindex", "noimageindex"]
    allow_private: bool = False  # fetch from loopback/private/link-local/... addresses
    allow_hosts: list[str] = []  # allowed even when private, on any port: IPs, CIDRs, names
    allow_ports: list[int] = [80, 443]  # other ports are refused, but on `allow_hosts`

    @field_validator("allow_hosts")
    @classmethod
    def _networks_or_names(cls, entries: list[str]) -> list[str]:
        for entry in entries:
            if "/" in entry:
                ipaddress.ip_network(entry, strict=False)  # ValueError says what is wrong
        return entries

    @field_validator("per_host")
    @classmethod
    def _at_least_one(cls, value: int) -> int:
        if value < 1:
            raise ValueError(f"must be at least 1, got {value}")
        return value

    @field_validator("allow_ports")
    @classmethod
    def _ports(cls, ports: list[int]) -> list[int]:
        if not all(0 < port < 65536 for port in ports):
            raise ValueError(f"ports are 1 to 65535, got {ports}")
        return ports


@dataclass
class Fetched:
    """What a fetch gave: the image's bytes, or the Rejection that says why not."""

    data: bytes | None  # the body, when it is an image
    rejection: Rejection | None  # why not, otherwise
    final_url: str | None  # the last URL of the redirect chain (the input when none)
    attempts: int


# --- what the bytes are ------------------------------------------------------------------

_SIGNATURES = (
    ("jpeg", re.compile(rb"\xff\xd8\xff")),
    ("png", re.compile(rb"\x89PNG\r\n\x1a\n")),
    ("gif", re.compile(rb"GIF8[79]a")),
    ("webp", re.compile(rb"RIFF.{4}WEBP", re.DOTALL)),
    ("bmp", re.compile(rb"BM")),
    ("tiff", re.compile(rb"II\*\x00|MM\x00\*")),
)


def sniff_image_format(data: bytes) -> str | None:
    """The image format the first bytes announce ("jpeg", "png"...), or None."""
    return next((name for name, magic in _SIGNATURES if magic.match(data)), None)


# --- which addresses may be fetched ------------------------------------------------------

_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def _embedded_ipv4(ip: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 one stands for (mapped, 6to4, NAT64), else `ip` itself."""
    if ip.version == 4:
        return ip
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip.ipv4_mapped or ip.sixtofour or ip


def address_kind(ip: IPAddress) -> str | None:
    """Why an address is not on the public internet ("loopback", "private"...), or None."""
    ip = _embedded_ipv4(ip)
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_multicast:
        return "multicast"
    if ip.is_reserved:
        return "reserved"
    if ip.is_private or getattr(ip, "is_site_local", False):
        return "private"
    if not ip.is_global:
        return "not global"  # shared address space (100.64.0.0/10) and the like
    return None


class AddressPolicy:
    """Decides whether a host's port and resolved addresses may be connected to."""

    def __init__(
        self,
        allow_private: bool = False,
        allow_hosts: Sequence[str] = (),
        allow_ports: Sequence[int] = (80, 443),
    ):
        self.allow_private = allow_private
        self.ports = frozenset(allow_ports)
        self.networks: list[IPNetwork] = []
        self.names: set[str] = set()
        for entry in allow_hosts:
            try:
                self.networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                self.names.add(entry.lower().rstrip("."))

    def port_refusal(self, host: str, port: int) -> Rejection | None:
        """A `refused_port` rejection unless the port is allowed, or the host is listed in
        `allow_hosts` by name or address (a test server or an internal mirror on its own
        port); decided on the URL alone, before any lookup."""
        if port in self.ports or self._listed_host(host):
            return None
        return Rejection("refused_port", f"port {port}")

    def refusal(self, host: str, addresses: Sequence[IPAddress]) -> Rejection | None:
        """A `refused_address` rejection unless every address may be fetched."""
        if self.allow_private or host.rstrip(".") in self.names:
            return None
        for ip in addresses:
            kind = address_kind(ip)
            if kind and not self._listed(ip):
                shown = str(ip) if host == str(ip) else f"{host} -> {ip}"
                return Rejection("refused_address", f"{shown} ({kind})")
        return None

    def _listed_host(self, host: str) -> bool:
        """Whether `allow_hosts` lists the host as the URL names it: its name, or its IP."""
        if host.rstrip(".") in self.names:
            return True
        try:
            return self._listed(ipaddress.ip_address(host))
        except ValueError:
            return False  # a name not listed

    def _listed(self, ip: IPAddress) -> bool:
        forms = (ip, _embedded_ipv4(ip))  # ::ffff:127.0.0.1 is as allowed as 127.0.0.1
        return any(form in network for network in self.networks for form in forms)


# --- one request -------------------------------------------------------------------------


class _Failure(Exception):
    """Ends an attempt with a rejection; transient ones are worth another attempt."""

    def __init__(
        self, reason: str, detail: str, transient: bool = False, retry_after: str | None = None
    ):
        super().__init__(reason, detail)
        self.rejection = Rejection(reason, detail)
        self.transient = transient
        self.retry_after = retry_after  # the raw header of a 429 or 5xx


@dataclass(frozen=True)
class _Target:
    """A URL taken apart into what a request needs."""

    scheme: str
    host: str  # ASCII (IDNA) host name or IP literal, without brackets
    port: int
    path: str  # the request target: path and query, percent-encoded


_HOST_NAME = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?")


def _parse(url: str | None) -> _Target:
    if not url or not url.strip():
        raise _Failure("invalid_url", "no URL")
    if len(url) > MAX_URL_CHARS:
        raise _Failure("invalid_url", f"longer than {MAX_URL_CHARS} characters")
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise _Failure("invalid_url", str(exc)) from exc
    if not parts.scheme:
        raise _Failure("invalid_url", "no scheme")
    if parts.scheme not in DEFAULT_PORTS:
        raise _Failure("unsupported_scheme", f"{parts.scheme}:")
    if not parts.hostname:
        raise _Failure("invalid_url", "no host")
    path = quote(parts.path or "/", safe="/%:@!$&'()*+,;=~")
    if parts.query:
        path += "?" + quote(parts.query, safe="/%:@!$&'()*+,;=~?")
    return _Target(
        parts.scheme, _ascii_host(parts.hostname), port or DEFAULT_PORTS[parts.scheme], path
    )


def _ascii_host(host: str) -> str:
    """The host as it goes on the wire: an IP literal, or a name in IDNA form."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:
        name = host.encode("idna").decode("ascii").lower()
    except UnicodeError as exc:
        raise _Failure("invalid_url", "bad host name") from exc
    if not _HOST_NAME.fullmatch(name):
        raise _Failure("invalid_url", "bad host name")
    return name


class _Deadline:
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

    def timed_out(self, waiting_for: str) -> _Failure:
        """A wait of `timeout_s` that ran out is worth another attempt; an attempt that ran
        out of time is not (a trickling server would trickle again)."""
        if time.monotonic() >= self.end:
            return _Failure("timeout", f"{waiting_for}: over {self.total_s}s for the attempt")
        return _Failure("timeout", waiting_for, transient=True)


class _DeadlineSocket:
    """The socket as http.client uses it (sendall, makefile, close), with every send and
    receive bounded by the deadline: http.client reads the status line, headers and chunk
    sizes a line at a time, and a socket timeout alone bounds each read, not the line."""

    def __init__(self, sock: socket.socket, deadline: _Deadline):
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

    def __init__(self, sock: socket.socket, deadline: _Deadline):
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


def _resolve(target: _Target, deadline: _Deadline) -> list[IPAddress]:
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
        raise _Failure("dns", detail, transient=True) from exc
    except (socket.gaierror, UnicodeError) as exc:
        temporary = getattr(exc, "errno", None) == socket.EAI_AGAIN
        raise _Failure("dns", f"{target.host}: {exc.args[-1]}", transient=temporary) from exc
    addresses = [ipaddress.ip_address(info[4][0]) for info in infos]
    return list(dict.fromkeys(addresses))  # IPv4 and IPv6 answers repeat per protocol


def _connect(addresses: Sequence[IPAddress], port: int, deadline: _Deadline) -> socket.socket:
    """A TCP connection to the first of the vetted addresses that answers."""
    error: OSError = OSError("no address")
    for ip in addresses:
        try:
            return socket.create_connection((str(ip), port), deadline.wait_s())
        except OSError as exc:
            error = exc
    raise error


def _redirect_url(url: str, location: str) -> str:
    """Where a redirect leads; a relative Location is relative to the URL that sent it."""
    try:
        return urljoin(url, location)
    except ValueError as exc:
        raise _Failure("invalid_url", "unreadable redirect Location") from exc


def _read_body(response: http.client.HTTPResponse, max_bytes: int) -> bytes:
    declared = response.getheader("Content-Length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise _Failure("too_large", f"Content-Length {declared} > {max_bytes}")
    chunks: list[bytes] = []
    received = 0
    # read1: what has arrived, up to a chunk, so the size check runs promptly
    while chunk := response.read1(min(CHUNK_BYTES, max_bytes + 1 - received)):
        received += len(chunk)
        if received > max_bytes:
            raise _Failure("too_large", f"over {max_bytes} bytes")
        chunks.append(chunk)
    if declared.isdigit() and received < int(declared):  # http.client does not check this
        raise _Failure("connection", f"closed after {received} of {declared} bytes", transient=True)
    return b"".join(chunks)


def _check_image(data: bytes) -> bytes:
    if not data:
        raise _Failure("empty", "zero-byte body")
    if sniff_image_format(data) is None:
        # Nothing the server sent goes into the detail: a local service's answer is its own.
        raise _Failure("not_an_image", f"{len(data)} bytes without an image signature")
    return data


def retry_delay(attempt: int, retry_after: str | None, config: FetchConfig) -> float:
    """Seconds to wait after failed attempt number `attempt` (1-based): exponential backoff
    with jitter, or the server's Retry-After (seconds or an HTTP date) when that is longer;
    never over `max_wait_s`."""
    delay = config.backoff_s * 2 ** (attempt - 1) * random.uniform(0.5, 1.5)
    if retry_after:
        delay = max(delay, _seconds_until(retry_after.strip()))
    return min(delay, config.max_wait_s)


def _seconds_until(retry_after: str) -> float:
    if retry_after.isdigit():
        return float(retry_after)
    try:
        return parsedate_to_datetime(retry_after).timestamp() - time.time()
    except (TypeError, ValueError):
        return 0.0  # unreadable: the backoff decides


# --- manners ------------------------------------------------------------------------------


def agent_token(user_agent: str) -> str:
    """The product token of a User-Agent, lowercased: "conceptual/0.1 (...)" -> "conceptual"."""
    product = user_agent.split(maxsplit=1)[0] if user_agent.strip() else ""
    return product.split("/", 1)[0].lower()


def opt_out_directive(
    header_values: Sequence[str], agent: str, directives: Sequence[str]
) -> str | None:
    """The first of `directives` that the X-Robots-Tag header values (one per header) give
    every agent or `agent` (a lowercased product token), as "noai" or "agent: noai"; None
    when there is none. In a value, directives are separated by commas or semicolons, and
    "name: d1, d2" gives the directives after the name to that agent only, up to the next
    name ("otherbot: noindex, conceptual: noai"). `none` is Google's `noindex, nofollow`,
    so it opts out wherever `noindex` does."""
    wanted = {directive.strip().lower() for directive in directives}
    for value in header_values:
        scope: str | None = None  # a bare directive is for every agent
        for item in re.split(r"[,;]", value):
            name, colon, rest = item.partition(":")
            name = name.strip().lower()
            if colon and name not in VALUED_DIRECTIVES:
                scope, item = name, rest
            directive = item.strip().lower()
            meant = {"noindex", "nofollow"} if directive == "none" else {directive}
            if meant & wanted and scope in (None, agent):
                return directive if scope is None else f"{scope}: {directive}"
    return None


class _HostSlots:
    """At most `limit` holders per host at once. A thread holds one slot at a time and
    never waits while holding one, and every holder lets go within its attempt's deadline,
    so a waiter always gets its turn."""

    def __init__(self, limit: int):
        self.limit = limit
        self.busy: Counter[str] = Counter()
        self.freed = threading.Condition()

    @contextmanager
    def hold(self, host: str, deadline: _Deadline) -> Iterator[None]:
        started = time.monotonic()
        with self.freed:
            while self.busy[host] >= self.limit:
                self.freed.wait()
            self.busy[host] += 1
        deadline.end += time.monotonic() - started  # our own queue is not the server's time
        try:
            yield
        finally:
            with self.freed:
                self.busy[host] -= 1
                if not self.busy[host]:
                    del self.busy[host]  # hosts come and go: the table stays small
                self.freed.notify_all()


IPV6_LOOPBACK = ipaddress.IPv6Address("::1")


def slot_key(addresses: Sequence[IPAddress]) -> str:
    """The server `per_host` counts requests to: the address a host resolved to first, IPv4
    hidden in IPv6 unwrapped and IPv6's loopback as IPv4's (`localhost`, `127.0.0.1` and
    `[::ffff:127.0.0.1]` are one server, not three)."""
    ip = _embedded_ipv4(addresses[0])
    return "127.0.0.1" if ip == IPV6_LOOPBACK else str(ip)


def _host_of(url: str | None) -> str | None:
    """The host a URL's first request goes to, as the slots count it; None when unusable."""
    try:
        return _parse(url).host
    except _Failure:
        return None


# --- the fetcher -------------------------------------------------------------------------


class Fetcher:
    """Fetches image URLs; thread-safe, so one instance serves a whole pool."""

    def __init__(self, config: FetchConfig | None = None):
        self.config = config or FetchConfig()
        self.policy = AddressPolicy(
            self.config.allow_private, self.config.allow_hosts, self.config.allow_ports
        )
        self.tls = ssl.create_default_context()
        self.agent = agent_token(self.config.user_agent)
        self.slots = _HostSlots(self.config.per_host)

    def fetch_many(
        self,
        urls: Sequence[str | None],
        on_done: Callable[[int, Fetched], None] | None = None,
    ) -> list[Fetched]:
        """`fetch` for each URL on a bounded thread pool; results in the same order, and
        each also handed to `on_done(index, result)` as soon as it is there.

        URLs start in order, but for a host that already has `per_host` of them under
        way: those wait for one of its URLs to end, while later URLs of other hosts
        start, so that `threads` threads stay busy rather than waiting on one host."""
        if not urls:
            return []
        threads, per_host = self.config.threads, self.config.per_host
        hosts = [_host_of(url) for url in urls]
        results: list[Fetched | None] = [None] * len(urls)
        queued = deque(range(len(urls)))
        held: dict[str, deque[int]] = {}  # per host, the URLs waiting for its turn
        active: Counter[str] = Counter()  # per host, its URLs under way
        running: dict[Future[Fetched], int] = {}
        with ThreadPoolExecutor(min(threads, len(urls))) as pool:

            def start(i: int) -> None:
                if hosts[i] is not None:
                    active[hosts[i]] += 1
                running[pool.submit(self.fetch, urls[i])] = i

            while queued or running:
                while queued and len(running) < threads:
                    i = queued.popleft()
                    host = hosts[i]
                    if host is None or active[host] < per_host:
                        start(i)
                    else:
                        held.setdefault(host, deque()).append(i)
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    i = running.pop(future)
                    results[i] = future.result()
                    if on_done is not None:
                        on_done(i, results[i])
                    host = hosts[i]
                    if host is None:
                        continue
                    active[host] -= 1
                    if held.get(host):
                        start(held[host].popleft())  # in the place of the one that ended
                    else:
                        held.pop(host, None)
                        if not active[host]:
                            del active[host]
        return results  # type: ignore[return-value]  # every one filled

    def fetch(self, url: str | None) -> Fetched:
        """The image at `url`, or why not; never raises for anything the URL or server does."""
        attempt = 0
        while True:
            attempt += 1
            final_url, outcome = self._follow(url)
            if isinstance(outcome, bytes):
                return Fetched(outcome, None, final_url, attempt)
            if not outcome.transient or attempt > self.config.retries:
                return Fetched(None, outcome.rejection, final_url, attempt)
            time.sleep(retry_delay(attempt, outcome.retry_after, self.config))

    def _follow(self, url: str | None) -> tuple[str | None, bytes | _Failure]:
        """One attempt: follow the redirect chain to an image or a failure, with its last URL."""
        deadline = _Deadline(self.config.timeout_s, self.config.total_timeout_s)
        try:
            for _ in range(self.config.max_redirects + 1):
                location, body = self._request(url, deadline)
                if location is None:
                    return url, body
                url = _redirect_url(url, location)
        except _Failure as failure:
            return url, failure
        return url, _Failure("too_many_redirects", f"over {self.config.max_redirects} redirects")

    def _request(self, url: str | None, deadline: _Deadline) -> tuple[str | None, bytes]:
        """One hop: (the redirect's Location, b"") or (None, the image's bytes)."""
        target = _parse(url)
        refusal = self.policy.port_refusal(target.host, target.port)
        if refusal:
            raise _Failure(refusal.reason, refusal.detail)
        try:
            addresses = _resolve(target, deadline)
        except TimeoutError as exc:  # the attempt's time ran out before this hop
            raise deadline.timed_out(f"resolving {target.host}") from exc
        refusal = self.policy.refusal(target.host, addresses)
        if refusal:
            raise _Failure(refusal.reason, refusal.detail)
        with self.slots.hold(slot_key(addresses), deadline):
            return self._connect_and_exchange(target, addresses, deadline)

    def _connect_and_exchange(
        self, target: _Target, addresses: Sequence[IPAddress], deadline: _Deadline
    ) -> tuple[str | None, bytes]:
        try:
            connection = self._open(target, addresses, deadline)
        except TimeoutError as exc:
            raise deadline.timed_out(f"connecting to {target.host}") from exc
        except ConnectionRefusedError as exc:
            raise _Failure("connection", f"{target.host}: connection refused") from exc
        except OSError as exc:
            raise _Failure(
                "connection", f"{target.host}: {_describe(exc)}", transient=True
            ) from exc
        try:
            return self._exchange(connection, target)
        except TimeoutError as exc:
            raise deadline.timed_out(f"reading from {target.host}") from exc
        except (OSError, http.client.HTTPException) as exc:
            raise _Failure(
                "connection", f"{target.host}: {_describe(exc)}", transient=True
            ) from exc
        finally:
            connection.close()

    def _open(
        self, target: _Target, addresses: Sequence[IPAddress], deadline: _Deadline
    ) -> http.client.HTTPConnection:
        """A connection to a vetted address: http.client never resolves the host again,
        because a connection given its socket does not connect by itself."""
        sock = _connect(addresses, target.port, deadline)
        if target.scheme == "http":
            connection = http.client.HTTPConnection(target.host, target.port)
        else:
            try:
                sock.settimeout(deadline.wait_s())
                sock = self.tls.wrap_socket(sock, server_hostname=target.host)
            except OSError as exc:
                sock.close()
                if isinstance(exc, ssl.SSLError):  # a failed handshake fails again: not transient
                    raise _Failure("connection", f"{target.host}: TLS {exc.reason or exc}") from exc
                raise
            connection = http.client.HTTPSConnection(target.host, target.port)
        connection.sock = _DeadlineSocket(sock, deadline)
        return connection

    def _exchange(
        self, connection: http.client.HTTPConnection, target: _Target
    ) -> tuple[str | None, bytes]:
        connection.request(
            "GET",
            target.path,
            headers={
                "User-Agent": self.config.user_agent,
                "Accept": "image/*, */*;q=0.5",
                "Accept-Encoding": "identity",  # compressed bodies could hide a bomb
                "Connection": "close",
            },
        )
        response = connection.getresponse()
        status = f"{response.status} {response.reason}"[:100]
        if response.status in REDIRECT_STATUSES and response.getheader("Location"):
            return response.getheader("Location"), b""
        if response.status == 429 or response.status >= 500:
            raise _Failure(
                "http_status", status, transient=True, retry_after=response.getheader("Retry-After")
            )
        if not 200 <= response.status < 300:
            raise _Failure("http_status", status)
        if self.config.respect_opt_out:  # before a byte of the body is read
            tags = response.msg.get_all("X-Robots-Tag") or []
            directive = opt_out_directive(tags, self.agent, self.config.opt_out_directives)
            if directive:
                raise _Failure("opted_out", f"X-Robots-Tag: {directive}")
        return None, _check_image(_read_body(response, self.config.max_bytes))


def _describe(exc: BaseException) -> str:
    """A short human description of a connection error."""
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
