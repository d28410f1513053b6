"""Which process answers: the facts that prove a server is the one just started.

Locally, the kernel says who listens on a port: ``/proc/net/tcp`` (and
``tcp6``) list listening sockets with their inode, and ``/proc/PID/fd`` links
name the socket inodes a process holds. That works for real SGLang as for
the simulator, without any flag.

Over HTTP, a server shows what it is in ``/server_info``: ``launch_command``
(the argv it was started with) and ``random_seed`` (real SGLang draws one at
start-up unless ``--random-seed`` is given). A change in either between
before and after a restart proves a new process answers; their equality
proves nothing (the same command line restarted looks the same).

For a server the plugin does not run (external mode, a kept live server, one
another worker brought up) the identity is what it shows over HTTP
(:class:`HttpIdentity`): those ``/server_info`` fields and the monotonic
counters of ``/metrics``, which go back to zero when a server restarts. The
handle compares it with the one seen at the gate before a test's figures are
filed.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import requests

from pytest_specdecode.client import wire
from pytest_specdecode.client.sglang import prometheus_value
from pytest_specdecode.processes import lineage
from pytest_specdecode.service.base import ServiceError

_LISTEN = "0A"
_PROC = "/proc"


def port_busy(host: str, port: int) -> bool:
    """Whether binding ``host:port`` fails because something already listens there.

    ``SO_REUSEADDR`` as servers set it (uvicorn does), so sockets left in
    TIME_WAIT by a stopped server do not count.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def listening_inodes(port: int, proc: str = _PROC) -> set[int] | None:
    """Inodes of the TCP sockets listening on ``port`` (any address); None without /proc."""
    found: set[int] = set()
    seen_table = False
    for table in ("tcp", "tcp6"):
        try:
            with open(f"{proc}/net/{table}", encoding="ascii", errors="replace") as fh:
                lines = fh.read().splitlines()[1:]
        except OSError:
            continue
        seen_table = True
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != _LISTEN:
                continue
            _, _, local_port = fields[1].rpartition(":")
            with contextlib.suppress(ValueError):
                if int(local_port, 16) == port:
                    found.add(int(fields[9]))
    return found if seen_table else None


def pids_holding(inodes: set[int], proc: str = _PROC) -> set[int]:
    """Processes holding any of the socket ``inodes`` (those this user may inspect)."""
    if not inodes:
        return set()
    wanted = {f"socket:[{inode}]" for inode in inodes}
    pids: set[int] = set()
    for pid in lineage.table(proc):
        fd_dir = f"{proc}/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue  # gone, or another user's process
        for fd in fds:
            try:
                if os.readlink(f"{fd_dir}/{fd}") in wanted:
                    pids.add(pid)
                    break
            except OSError:
                continue
    return pids


@dataclass(frozen=True)
class Listener:
    """Who listens on a port: ``pids`` (empty when hidden from this user)."""

    port: int
    pids: frozenset[int]

    def describe(self) -> str:
        """``pid 4242 (python -m sglang.launch_server ...)`` or a hint when hidden."""
        if not self.pids:
            return f"a process this user cannot inspect (`ss -ltnp 'sport = :{self.port}'` as root)"
        return ", ".join(f"pid {pid} ({command_line(pid)})" for pid in sorted(self.pids))


def listener(port: int, proc: str = _PROC) -> Listener | None:
    """Who listens on ``port`` on this machine; None where /proc cannot tell (not Linux)."""
    inodes = listening_inodes(port, proc)
    if inodes is None or not inodes:
        return None
    return Listener(port, frozenset(pids_holding(inodes, proc)))


def session_of(pid: int, proc: str = _PROC) -> int | None:
    """The session id of ``pid`` (a launched server is its own session leader)."""
    fields = lineage.stat_fields(pid, proc)
    try:
        return int(fields[3]) if fields is not None else None
    except (IndexError, ValueError):
        return None


def command_line(pid: int, limit: int = 120, proc: str = _PROC) -> str:
    """``pid``'s command line, shortened, for messages ("?" when unreadable)."""
    try:
        with open(f"{proc}/{pid}/cmdline", "rb") as fh:
            words = fh.read().split(b"\0")
    except OSError:
        return "?"
    text = " ".join(w.decode("utf-8", "replace") for w in words if w)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class Fingerprint:
    """What ``/server_info`` shows of the process behind it."""

    launch_command: str | None
    random_seed: str | None

    @classmethod
    def of(cls, info: Mapping[str, Any] | None) -> Fingerprint | None:
        """The fingerprint of a ``/server_info`` answer; None for no answer."""
        if info is None:
            return None
        command = info.get("launch_command")
        seed = info.get("random_seed")
        return cls(
            str(command) if command is not None else None,
            str(seed) if seed is not None else None,
        )

    def changed(self, before: Fingerprint) -> str | None:
        """Which field shows another process than ``before``, or None."""
        if self.launch_command != before.launch_command:
            return "launch_command changed"
        if self.random_seed is not None and self.random_seed != before.random_seed:
            return f"random_seed changed ({before.random_seed} -> {self.random_seed})"
        return None


# -- identity over HTTP: what a server shows of itself, for servers the plugin does not run --

IDENTITY_FIELDS = (
    "launch_command",
    "version",
    "random_seed",
    "model_path",
    "speculative_algorithm",
    "speculative_draft_model_path",
    "speculative_num_draft_tokens",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_draft_window_size",
    "speculative_ddtree_budget",
)
"""``/server_info`` fields that stay put while one server process runs."""

COUNTERS = (
    "sglang:num_requests_total",
    "sglang:generation_tokens_total",
    "sglang:prompt_tokens_total",
)
"""Monotonic ``/metrics`` counters: a restarted server counts from zero again."""

IDENTITY_CAP = 16 << 20
"""Bytes of one identity answer (``/server_info`` or ``/metrics``)."""


class IdentityUnreadable(ServiceError):
    """``/server_info`` could not be read; the message is one line."""


@dataclass(frozen=True)
class HttpIdentity:
    """The fields and counters of one look at a server over HTTP."""

    fields: tuple[tuple[str, str], ...]
    counters: tuple[tuple[str, float], ...]

    @classmethod
    def of(cls, info: Mapping[str, Any], metrics: str | None) -> HttpIdentity:
        """From a ``/server_info`` answer and the ``/metrics`` text (None: not served)."""
        fields = tuple((name, repr(info[name])) for name in IDENTITY_FIELDS if name in info)
        counters: list[tuple[str, float]] = []
        for name in COUNTERS if metrics is not None else ():
            value = prometheus_value(metrics or "", name)
            if value is not None:
                counters.append((name, value))
        return cls(fields, tuple(counters))

    def changed(self, now: HttpIdentity) -> str | None:
        """What shows that ``now`` is another server than ``self``, or None."""
        before, after = dict(self.fields), dict(now.fields)
        for name in IDENTITY_FIELDS:
            if before.get(name) != after.get(name):
                was, got = before.get(name, "(absent)"), after.get(name, "(absent)")
                return f"{name} {_short(was)} -> {_short(got)}"
        counted = dict(now.counters)
        for name, value in self.counters:
            if name not in counted:
                return f"/metrics no longer shows {name}"
            if counted[name] < value:
                return (
                    f"{name} went back from {value:g} to {counted[name]:g} "
                    "(a restarted server counts from zero)"
                )
        return None


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def read_http_identity(
    session: Any, base_url: str, headers: Mapping[str, str], timeout: float = 10.0
) -> HttpIdentity:
    """One ``/server_info`` and one ``/metrics`` GET, each within ``timeout`` and a size cap.

    Raises :class:`IdentityUnreadable` when ``/server_info`` gives no object;
    a ``/metrics`` that is not served (no ``--enable-metrics``) gives no counters.
    """
    info_text = _get(session, base_url + "/server_info", headers, timeout)
    if info_text is None:
        raise IdentityUnreadable(f"GET {base_url}/server_info did not answer 200")
    try:
        info = json.loads(info_text)
    except ValueError:
        raise IdentityUnreadable(f"GET {base_url}/server_info is not JSON") from None
    if not isinstance(info, dict):
        raise IdentityUnreadable(f"GET {base_url}/server_info is not a JSON object")
    return HttpIdentity.of(info, _get(session, base_url + "/metrics", headers, timeout))


def _get(session: Any, url: str, headers: Mapping[str, str], timeout: float) -> str | None:
    """The body of a 200 answer (bounded), None for any other status; never follows a redirect."""
    try:
        resp = session.get(
            url,
            timeout=timeout,
            headers={**headers, "Accept-Encoding": wire.ACCEPTED_ENCODINGS},
            stream=True,
            allow_redirects=False,
        )
    except requests.RequestException as exc:
        raise IdentityUnreadable(f"GET {url} failed ({type(exc).__name__})") from None
    try:
        if int(resp.status_code) != 200:
            return None
        chunks = wire.read_chunks(
            resp.raw, deadline=time.monotonic() + timeout, stall=timeout, cap=IDENTITY_CAP
        )
        body = wire.decoded(
            wire.read_body(chunks), resp.headers.get("Content-Encoding"), cap=IDENTITY_CAP
        )
        return body.decode("utf-8", "replace")
    except wire.BoundExceeded as exc:
        raise IdentityUnreadable(f"GET {url} {exc}") from None
    except Exception as exc:
        raise IdentityUnreadable(f"GET {url} failed reading ({type(exc).__name__})") from None
    finally:
        resp.close()
