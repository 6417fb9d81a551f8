"""Which Host headers the status port answers to (pure): the defence against DNS rebinding.

A rebinding page is served from the attacker's name, which then resolves to this address: the browser sends that
name as Host, so a name is allowed only when configured (`--metrics-host-name`), plus `localhost` where the port
listens on loopback. An IP literal as Host is the origin itself (no attacker can serve pages from it), so on a
wildcard address (0.0.0.0, ::) any IP literal is allowed: Kubernetes probes send `Host: <pod IP>:<port>` and
Prometheus its target. On one address, that address. The port is not compared: a rebinding page uses the same
port anyway, and `kubectl port-forward 8080:9108` sends another one.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass

_NAME = re.compile(r"[a-z0-9._-]+")  # a DNS name or an IPv4 literal, lower-cased


def host_name(value: str) -> str | None:
    """`Example.COM.:9108` → `example.com`, `[::1]:9108` → `::1`; None when it is no host[:port]."""
    value = value.lower()
    if value.startswith("["):
        name, bracket, rest = value[1:].partition("]")
        port = rest.removeprefix(":")
        if not bracket or (rest and rest[0] != ":") or (port and not _port(port)):
            return None
        return name if _ip(name) is not None else None
    name, _colon, port = value.partition(":")
    name = name.removesuffix(".")
    return name if _NAME.fullmatch(name) and not (port and not _port(port)) else None


def _port(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 5


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class HostPolicy:
    """Which Host headers this port answers: see the module's docstring for why."""

    bound: str  # the address listened on, an IP literal (`0.0.0.0`, `127.0.0.1`, `::1`, …)
    names: frozenset[str] = frozenset()  # configured names (lower case), allowed on any address

    def allows(self, header: str) -> bool:
        name = host_name(header)
        if name is None:
            return False
        if name in self.names:
            return True
        ip, bound = _ip(name), ipaddress.ip_address(self.bound)
        if bound.is_unspecified:
            return ip is not None or name == "localhost"
        if bound.is_loopback:
            return name == "localhost" or (ip is not None and ip.is_loopback)
        return ip == bound

    def described(self) -> str:
        bound = ipaddress.ip_address(self.bound)
        if bound.is_unspecified:
            shown = "any IP address, localhost"
        else:
            shown = "localhost, loopback addresses" if bound.is_loopback else _literal(self.bound)
        return ", ".join([shown, *sorted(self.names)])


def _literal(address: str) -> str:
    return f"[{address}]" if ":" in address else address


def names_of(host: str, more: Iterable[str]) -> frozenset[str]:
    """The configured names, plus the address as given when it is a name (`--metrics-host localhost`)."""
    given = [host] if _ip(host) is None and host else []
    return frozenset(n.lower().removesuffix(".") for n in (*given, *more))
