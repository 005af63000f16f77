"""Whether a URL may be fetched, before anything connects (vision/fetch.py's reasons
invalid_url, unsupported_scheme, refused_port and refused_address): the URL taken apart
(`parse_url`: by the URL Standard, conceptual/weburl.py, so the host checked is the
parser's: http and https only, no credentials, an IP address or an ASCII host name) and the
policy on its port and on every address its host resolves to (`AddressPolicy`: only public
addresses on ports 80 and 443, but what the config allows; an IPv4 address hidden in IPv6
is judged as itself).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass

from conceptual.records import Rejection
from conceptual.weburl import parts, standard_href, web_url, why_not

MAX_URL_CHARS = 2048
DEFAULT_PORTS = {"http": 80, "https": 443}

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class Failure(Exception):
    """Ends an attempt with a rejection; transient ones are worth another attempt."""

    def __init__(
        self, reason: str, detail: str, transient: bool = False, retry_after: str | None = None
    ):
        super().__init__(reason, detail)
        self.rejection = Rejection(reason, detail)
        self.transient = transient
        self.retry_after = retry_after  # the raw header of a 429 or 5xx


@dataclass(frozen=True)
class Target:
    """A URL taken apart into what a request needs."""

    scheme: str
    host: str  # the parser's: ASCII (IDNA) host name or canonical IP address, no brackets
    port: int
    path: str  # the request target: path and query, percent-encoded


_HOST_NAME = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?")


def parse_url(url: str | None, credentials: bool = False) -> Target:
    """The URL as a request needs it, by conceptual/weburl.py's `web_url`, the harvest's
    and the deduplication's own; Failure (invalid_url, unsupported_scheme) when it is none
    to fetch. `credentials`: userinfo is let through (a service's URL the user wrote,
    conceptual/services.py, which sends it as basic authentication), never an image's."""
    if not url or not url.strip():
        raise Failure("invalid_url", "no URL")
    if len(url) > MAX_URL_CHARS:
        raise Failure("invalid_url", f"longer than {MAX_URL_CHARS} characters")
    href = standard_href(url) if credentials else web_url(url)
    if href is None or not href.startswith(("http://", "https://")):
        raise Failure(*(why_not(url) or ("invalid_url", "not a URL")))
    if len(href) > MAX_URL_CHARS:  # percent-encoding made it longer
        raise Failure("invalid_url", f"longer than {MAX_URL_CHARS} characters")
    scheme, host, port, path = parts(href)
    port = DEFAULT_PORTS[scheme] if port is None else port  # :0 is port 0, refused
    return Target(scheme, _ascii_host(host), port, path)


def _ascii_host(host: str) -> str:
    """The host as it goes on the wire and as the address checks see it: the parser's
    (a dotted IPv4 address, whatever form the URL wrote it in; a compressed IPv6 address; a
    lower-case ASCII name), and a name that cannot be one in the DNS refused."""
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    if not _HOST_NAME.fullmatch(host):
        raise Failure("invalid_url", "bad host name")
    return host


_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def embedded_ipv4(ip: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 one stands for (mapped, 6to4, NAT64), else `ip` itself."""
    if ip.version == 4:
        return ip
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip.ipv4_mapped or ip.sixtofour or ip


def address_kind(ip: IPAddress) -> str | None:
    """Why an address is not on the public internet ("loopback", "private"...), or None."""
    ip = embedded_ipv4(ip)
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
        forms = (ip, embedded_ipv4(ip))  # ::ffff:127.0.0.1 is as allowed as 127.0.0.1
        return any(form in network for network in self.networks for form in forms)
