"""Hosts as the options name them: ``gpu1``, ``gpu1:2222`` (SSH port), ``[::1]:22``."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Host:
    """An SSH target; ``port`` is the SSH port when given as ``host:port``."""

    name: str
    port: int | None = None

    def __str__(self) -> str:
        return self.name if self.port is None else f"{self.name}:{self.port}"


def parse_host(text: str) -> Host:
    """``gpu1`` or ``gpu1:2222`` (SSH port) or ``[::1]:2222``."""
    text = text.strip()
    if not text:
        raise ValueError("empty host name")
    if text.startswith("["):
        name, _, rest = text[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    elif text.count(":") == 1:
        name, port_text = text.split(":")
    else:
        name, port_text = text, ""
    _check_host_name(name, text)
    if not port_text:
        return Host(name)
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"bad port {port_text!r} in host {text!r}; use HOST or HOST:PORT")
    return Host(name, int(port_text))


_HOST_NAME = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9._-]*[A-Za-z0-9_])?")


def _check_host_name(name: str, text: str) -> None:
    """A DNS name, an IPv4 address or an IPv6 address: what SSH and a URL both take."""
    if ":" in name:
        try:
            ipaddress.IPv6Address(name)
        except ValueError:
            raise ValueError(
                f"bad host {text!r}: use HOST, HOST:PORT (SSH port) or [IPv6]:PORT"
            ) from None
    elif not _HOST_NAME.fullmatch(name):
        raise ValueError(
            f"bad host {text!r}: a host is a name or an address like gpu1, gpu1.example.org "
            "or 192.0.2.7, optionally with :PORT (SSH port)"
        )
