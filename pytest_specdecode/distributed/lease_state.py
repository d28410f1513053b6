"""The lease file's content as a typed value (:mod:`pytest_specdecode.distributed.lease`).

The JSON on disk keeps the keys it always had (``live``, ``server``, ``users``,
``switching``, ``failed``, ``history``, ``down``), so a lease written by an older
worker reads the same. The file is shared by processes: :meth:`LeaseState.from_json`
takes any JSON and keeps only the values of the right shape (a missing or garbled
file is an empty lease).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, TypeGuard


@dataclass(frozen=True)
class Switching:
    """The worker restarting the server right now, and the config it brings up."""

    worker: str
    pid: int
    key: str

    @classmethod
    def from_json(cls, data: object) -> Switching | None:
        if not isinstance(data, dict):
            return None
        worker, pid, key = data.get("worker"), data.get("pid"), data.get("key")
        if isinstance(worker, str) and _pid(pid) and isinstance(key, str):
            return cls(worker, pid, key)
        return None


@dataclass
class LeaseState:
    """Who uses and who switches one host's server.

    ``live``: the config the server runs (None while unknown); ``server``: the
    facts other workers need to use it (base URL, local process group, log),
    opaque to the lease; ``users``: worker id -> pid of the workers using the live
    config; ``switching``: the worker restarting it; ``failed``: config key -> the
    message of its failed switch; ``history``: ``[key, worker]`` of every switch;
    ``down``: why the host was found down (it will not come back in this run).
    """

    live: str | None = None
    server: dict[str, Any] | None = None
    users: dict[str, int] = field(default_factory=dict)
    switching: Switching | None = None
    failed: dict[str, str] = field(default_factory=dict)
    history: list[tuple[str, str]] = field(default_factory=list)
    down: str | None = None

    @classmethod
    def from_json(cls, data: object) -> LeaseState:
        """The state in ``data`` (the parsed file); values of the wrong shape are dropped."""
        if not isinstance(data, dict):
            return cls()
        live, server, down = data.get("live"), data.get("server"), data.get("down")
        history = data.get("history")
        return cls(
            live=live if isinstance(live, str) else None,
            server=server if isinstance(server, dict) else None,
            users={w: p for w, p in _items(data.get("users")) if _pid(p)},
            switching=Switching.from_json(data.get("switching")),
            failed={k: m for k, m in _items(data.get("failed")) if isinstance(m, str)},
            history=[
                (entry[0], entry[1])
                for entry in (history if isinstance(history, list) else [])
                if isinstance(entry, list)
                and len(entry) == 2
                and all(isinstance(part, str) for part in entry)
            ],
            down=down if isinstance(down, str) and down else None,
        )

    def to_json(self) -> dict[str, Any]:
        """The file's content: the same keys and shapes as ever (the fields, in order)."""
        return {**asdict(self), "history": [list(entry) for entry in self.history]}

    def without_the_dead(self, alive: Callable[[int], bool]) -> LeaseState:
        """Dead workers' entries dropped; a switcher that died leaves no live config
        (the server is in an unknown state), so the next worker switches again."""
        self.users = {w: p for w, p in self.users.items() if alive(p)}
        if self.switching is not None and not alive(self.switching.pid):
            self.switching = None
            self.live = None
        return self


def _items(data: object) -> list[tuple[str, object]]:
    return [(str(k), v) for k, v in data.items()] if isinstance(data, dict) else []


def _pid(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)
