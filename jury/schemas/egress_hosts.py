"""Hosts and addresses as the egress policy (jury.schemas.egress) compares them: a URL's
destination, with hosts written in odd ways refused; the special addresses (loopback,
private, link-local, …); and the rules of JURY_EGRESS_ALLOW and JURY_KEY_HOSTS. Pure."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


# Addresses a batch may not reach unless the operator allows them: the IANA special-purpose
# registries (RFC 6890 and its updates), by the kind a message names.
_SPECIAL_V4: Final = tuple(
    (ipaddress.IPv4Network(net), kind)
    for net, kind in (
        ("0.0.0.0/8", "'this host'"),
        ("10.0.0.0/8", "private"),
        ("100.64.0.0/10", "shared (carrier-grade NAT)"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local"),
        ("172.16.0.0/12", "private"),
        ("192.0.0.0/24", "IETF protocol"),
        ("192.0.2.0/24", "documentation"),
        ("192.88.99.0/24", "6to4 relay"),
        ("192.168.0.0/16", "private"),
        ("198.18.0.0/15", "benchmarking"),
        ("198.51.100.0/24", "documentation"),
        ("203.0.113.0/24", "documentation"),
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved"),
    )
)
_SPECIAL_V6: Final = tuple(
    (ipaddress.IPv6Network(net), kind)
    for net, kind in (
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("::/96", "IPv4-compatible"),
        ("64:ff9b:1::/48", "local NAT64"),
        ("100::/64", "discard"),
        ("2001::/23", "IETF protocol"),  # Teredo (2001::/32) among them
        ("2001:db8::/32", "documentation"),
        ("2002::/16", "6to4"),
        ("3fff::/20", "documentation"),
        ("5f00::/16", "segment routing"),
        ("fc00::/7", "private (unique local)"),
        ("fe80::/10", "link-local"),
        ("fec0::/10", "site-local"),
        ("ff00::/8", "multicast"),
    )
)
# NAT64's well-known prefix: the IPv4 address in its last 32 bits is the one reached.
_NAT64: Final = ipaddress.IPv6Network("64:ff9b::/96")

# Words JURY_EGRESS_ALLOW takes for groups of addresses. Link-local (cloud metadata services
# live there) has none: it takes a network written out.
KEYWORDS: Final[dict[str, tuple[str, ...]]] = {
    "loopback": ("127.0.0.0/8", "[::1]", "localhost", "*.localhost"),
    "private": ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "[fc00::]/7"),
}


# --- hosts as written ----------------------------------------------------------------------

# Linear to match (no nested repetition): a URL's host may be as long as the batch likes.
_NAME: Final = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*")
MAX_HOST_CHARS: Final = 253
_NUMERIC_LABEL: Final = re.compile(r"0x[0-9a-f]*|[0-9]+")
_DECIMAL_OCTET: Final = re.compile(r"0|[1-9][0-9]{0,2}")
_UNSAFE_URL_CHARS: Final = re.compile(r"[\x00-\x20\x7f\\]")
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


def _localhost(name: str) -> bool:
    return name == "localhost" or name.endswith(".localhost")


def normal_host(text: str) -> tuple[str, IPAddress | None]:
    """A URL's host as jury compares it: lowercase, without a final dot; and the address it
    is, if it is one. ValueError for a host some parser would read otherwise."""
    shown = repr(text[:80])
    host = text.strip().lower()
    bracketed = host.startswith("[") and host.endswith("]")
    if bracketed or ":" in host:
        try:
            address = ipaddress.IPv6Address(host[1:-1] if bracketed else host)
        except ValueError:
            raise ValueError(f"{shown} is not an IPv6 address") from None
        if address.scope_id is not None:
            raise ValueError(f"{shown} names a network interface (%): write the address alone")
        if address.ipv4_mapped is not None or (int(address) >> 32 == 0 and int(address) > 1):
            raise ValueError(
                f"{shown} is an IPv4 address written as IPv6: write the IPv4 address itself"
            )
        return str(address), address
    if not host.isascii():
        # Parsers encode international names differently (IDNA 2003 or 2008): the ASCII form
        # is the one name they all connect to.
        raise ValueError(f"{shown} is not ASCII: write the host in its ASCII (xn--) form")
    labels = host.split(".")
    if all(_NUMERIC_LABEL.fullmatch(label) for label in labels if label) and any(labels):
        # Digits and dots only (or 0x…): an IPv4 address, written plainly or not at all.
        # `127.1`, `2130706433`, `0x7f.1`, `0177.0.0.1`, `127.0.0.1.` all reach 127.0.0.1
        # through inet_aton, and parsers disagree about them.
        if len(labels) != 4 or not all(_DECIMAL_OCTET.fullmatch(part) for part in labels):
            raise ValueError(
                f"{shown} is an address written in an unusual way: write it as four decimal "
                "numbers (e.g. 127.0.0.1)"
            )
        try:
            return host, ipaddress.IPv4Address(host)
        except ValueError:
            raise ValueError(f"{shown} is not an IPv4 address") from None
    host = host.removesuffix(".")
    labels = host.split(".")
    if (
        len(host) > MAX_HOST_CHARS
        or not _NAME.fullmatch(host)
        or any(label.startswith("-") or label.endswith("-") for label in labels)
    ):
        raise ValueError(f"{shown} is not a valid host name")
    return host, None


@dataclass(frozen=True)
class Destination:
    """Where a URL's request goes: its scheme, host (as normal_host gives it) and port."""

    scheme: str
    host: str
    port: int
    address: IPAddress | None = None

    @property
    def label(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def local_name(self) -> bool:
        """`localhost` and its subdomains, which resolve to loopback whatever DNS says."""
        return self.address is None and _localhost(self.host)


def destination(url: str) -> Destination:
    """Where `url` goes; ValueError saying why it cannot be told for sure."""
    if _UNSAFE_URL_CHARS.search(url):
        raise ValueError("the URL holds a space, a control character or a backslash")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"the URL is malformed: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise ValueError("the URL is not http(s)")
    # urlsplit's hostname drops the brackets and lowercases; the text after `@` is the host.
    written = parts.netloc.rpartition("@")[2]
    written = written.rsplit(":", 1)[0] if not written.endswith("]") else written
    if not written or parts.hostname is None:
        raise ValueError("the URL has no host")
    host, address = normal_host(written)
    return Destination(scheme, host, port or _DEFAULT_PORTS[scheme], address)


# --- rules -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class HostRule:
    """One entry of JURY_EGRESS_ALLOW or of a JURY_KEY_HOSTS list: a host name, `*.domain`,
    an address or a network (`10.0.0.0/8`, `[fd00::]/8`), `*` for any, each with an optional
    `:port`."""

    written: str
    name: str | None = None
    suffix: str | None = None  # `*.example.com` as `.example.com`; `*` as ``
    network: IPNetwork | None = None
    port: int | None = None

    def admits(self, dest: Destination) -> bool:
        """Whether the host as written in the URL is this rule's."""
        if self.port is not None and self.port != dest.port:
            return False
        if dest.address is not None:
            return self.network is not None and dest.address in self.network
        if self.name is not None:
            return dest.host == self.name
        return self.suffix is not None and (self.suffix == "" or dest.host.endswith(self.suffix))

    def admits_address(self, address: IPAddress, port: int) -> bool:
        return (
            self.network is not None
            and (self.port is None or self.port == port)
            and address.version == self.network.version
            and address in self.network
        )


_ANY_V4: Final = ipaddress.IPv4Network("0.0.0.0/0")
_ANY_V6: Final = ipaddress.IPv6Network("::/0")


def _split_port(text: str) -> tuple[str, int | None]:
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        network, _, port = rest.rpartition(":") if ":" in rest else (rest, "", "")
        host += network  # `[fd00::]/8` is the network fd00::/8
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    else:
        host, port = text, ""
    if not port:
        return host, None
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text[:80]!r}: the port must be a number from 1 to 65535")
    return host, int(port)


def parse_rule(text: str, setting: str) -> tuple[HostRule, ...]:
    """One written entry as its rules (a keyword stands for several); ValueError naming the
    setting and the entry."""
    written = text.strip()
    try:
        host, port = _split_port(written.lower())
    except ValueError as exc:
        raise ValueError(f"{setting}: {exc}") from None
    if host in KEYWORDS:
        suffix = "" if port is None else f":{port}"
        return tuple(r for part in KEYWORDS[host] for r in parse_rule(part + suffix, setting))
    if host == "*":
        return (
            HostRule(written, suffix="", port=port),
            HostRule(written, network=_ANY_V4, port=port),
            HostRule(written, network=_ANY_V6, port=port),
        )
    try:
        if "/" in host:
            return (HostRule(written, network=ipaddress.ip_network(host, strict=False), port=port),)
        if host.startswith("*."):
            name, _ = normal_host(host[2:])
            return (HostRule(written, suffix="." + name, port=port),)
        name, address = normal_host(host)
    except ValueError as exc:
        raise ValueError(
            f"{setting}: {written[:80]!r} is not a host, `*.domain`, address or network "
            f"({exc}; the words {', '.join(KEYWORDS)} stand for their addresses)"
        ) from None
    if address is not None:
        return (HostRule(written, network=ipaddress.ip_network(address), port=port),)
    return (HostRule(written, name=name, port=port),)


def parse_rules(entries: Iterable[str], setting: str) -> tuple[HostRule, ...]:
    return tuple(rule for entry in entries if entry.strip() for rule in parse_rule(entry, setting))


def split_list(text: str) -> list[str]:
    """A setting's comma- or space-separated list."""
    return [part for part in re.split(r"[,\s]+", text) if part]


def special_kind(address: IPAddress) -> str | None:
    """What kind of special address this is (loopback, private, …), or None for a public one.
    An IPv4 address carried in IPv6 (mapped, NAT64) is judged by that IPv4 address."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return special_kind(address.ipv4_mapped)
        if address in _NAT64:
            return special_kind(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
        return next((kind for net, kind in _SPECIAL_V6 if address in net), None)
    return next((kind for net, kind in _SPECIAL_V4 if address in net), None)
