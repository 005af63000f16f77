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

Here the Fetcher puts the parts together (retries, redirects, turns at a host, what the
response and its bytes must be); whether a URL and its addresses may be fetched is
vision/url_safety.py's, one request within the attempt's deadline vision/http_client.py's,
and reading X-Robots-Tag vision/robots.py's.
"""

from __future__ import annotations

import http.client
import ipaddress
import random
import re
import ssl
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

from pydantic import field_validator

from conceptual.config import Config
from conceptual.limits import IMAGE_BYTES
from conceptual.records import Rejection
from conceptual.vision.http_client import (
    Deadline,
    describe,
    open_connection,
    read_body,
    redirect_url,
    resolve,
)
from conceptual.vision.robots import agent_token, opt_out_directive
from conceptual.vision.url_safety import (
    AddressPolicy,
    Failure,
    IPAddress,
    Target,
    embedded_ipv4,
    parse_url,
)

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
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})


class FetchConfig(Config):
    """How images are fetched. Defaults suit a crawl of the public web."""

    timeout_s: float = 10.0  # connect and each read
    total_timeout_s: float = 60.0  # one attempt, redirects included: no trickling server
    retries: int = 2  # extra attempts on transient errors (timeouts, resets, 429, 5xx)
    backoff_s: float = 0.5  # exponential backoff base, with jitter
    max_wait_s: float = 10.0  # cap on any wait between attempts, Retry-After included
    max_redirects: int = 3
    max_bytes: int = IMAGE_BYTES  # larger bodies are rejected (Content-Length, then counted)
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


def _check_image(data: bytes) -> bytes:
    if not data:
        raise Failure("empty", "zero-byte body")
    if sniff_image_format(data) is None:
        # Nothing the server sent goes into the detail: a local service's answer is its own.
        raise Failure("not_an_image", f"{len(data)} bytes without an image signature")
    return data


# --- retries, and turns at a busy host ------------------------------------------------


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


class _HostSlots:
    """At most `limit` holders per host at once. A thread holds one slot at a time and
    never waits while holding one, and every holder lets go within its attempt's deadline,
    so a waiter always gets its turn."""

    def __init__(self, limit: int):
        self.limit = limit
        self.busy: Counter[str] = Counter()
        self.freed = threading.Condition()

    @contextmanager
    def hold(self, host: str, deadline: Deadline) -> Iterator[None]:
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
    ip = embedded_ipv4(addresses[0])
    return "127.0.0.1" if ip == IPV6_LOOPBACK else str(ip)


def _host_of(url: str | None) -> str | None:
    """The host a URL's first request goes to, as the slots count it; None when unusable."""
    try:
        return parse_url(url).host
    except Failure:
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

    def _follow(self, url: str | None) -> tuple[str | None, bytes | Failure]:
        """One attempt: follow the redirect chain to an image or a failure, with its last URL."""
        deadline = Deadline(self.config.timeout_s, self.config.total_timeout_s)
        try:
            for _ in range(self.config.max_redirects + 1):
                location, body = self._request(url, deadline)
                if location is None:
                    return url, body
                url = redirect_url(url, location)
        except Failure as failure:
            return url, failure
        return url, Failure("too_many_redirects", f"over {self.config.max_redirects} redirects")

    def _request(self, url: str | None, deadline: Deadline) -> tuple[str | None, bytes]:
        """One hop: (the redirect's Location, b"") or (None, the image's bytes)."""
        target = parse_url(url)
        refusal = self.policy.port_refusal(target.host, target.port)
        if refusal:
            raise Failure(refusal.reason, refusal.detail)
        try:
            addresses = resolve(target, deadline)
        except TimeoutError as exc:  # the attempt's time ran out before this hop
            raise deadline.timed_out(f"resolving {target.host}") from exc
        refusal = self.policy.refusal(target.host, addresses)
        if refusal:
            raise Failure(refusal.reason, refusal.detail)
        with self.slots.hold(slot_key(addresses), deadline):
            return self._connect_and_exchange(target, addresses, deadline)

    def _connect_and_exchange(
        self, target: Target, addresses: Sequence[IPAddress], deadline: Deadline
    ) -> tuple[str | None, bytes]:
        try:
            connection = open_connection(target, addresses, deadline, self.tls)
        except TimeoutError as exc:
            raise deadline.timed_out(f"connecting to {target.host}") from exc
        except ConnectionRefusedError as exc:
            raise Failure("connection", f"{target.host}: connection refused") from exc
        except OSError as exc:
            raise Failure("connection", f"{target.host}: {describe(exc)}", transient=True) from exc
        try:
            return self._exchange(connection, target)
        except TimeoutError as exc:
            raise deadline.timed_out(f"reading from {target.host}") from exc
        except (OSError, http.client.HTTPException) as exc:
            raise Failure("connection", f"{target.host}: {describe(exc)}", transient=True) from exc
        finally:
            connection.close()

    def _exchange(
        self, connection: http.client.HTTPConnection, target: Target
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
            raise Failure(
                "http_status", status, transient=True, retry_after=response.getheader("Retry-After")
            )
        if not 200 <= response.status < 300:
            raise Failure("http_status", status)
        if self.config.respect_opt_out:  # before a byte of the body is read
            tags = response.msg.get_all("X-Robots-Tag") or []
            directive = opt_out_directive(tags, self.agent, self.config.opt_out_directives)
            if directive:
                raise Failure("opted_out", f"X-Robots-Tag: {directive}")
        return None, _check_image(read_body(response, self.config.max_bytes))
