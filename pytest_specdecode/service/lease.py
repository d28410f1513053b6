"""A lease on one server shared by pytest-xdist workers: who may switch its config.

One GPU host serves one config at a time. Under ``pytest -n N`` several
workers run tests against the same host, so they agree through a small JSON
state file next to a lock file (filelock) in a directory they all share:

- the *live* config and the server facts every worker needs to use it
  (base URL, local process group);
- *users*: workers running tests of the live config (the shared mode);
- *needs*: per worker, the lowest config rank it still needs (from the test it
  runs and the next one); configs are ranked in collection order;
- *switching*: the worker restarting the server right now (the exclusive mode).

A worker may switch only when nobody uses the live config, nobody is already
switching, and no live worker needs a config ranked before the one it wants:
so each config is applied once, in order, and a worker that waits holds
nothing (no deadlock). Entries of dead workers (their pid is gone) are
dropped on every read, so a killed worker never leaves the others waiting.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from filelock import FileLock

from pytest_specdecode.errors import SpecDecodeError


class LeaseTimeout(SpecDecodeError):
    """Waiting for a config to become live took longer than the deadline."""


class SwitchFailed(SpecDecodeError):
    """Another worker tried to bring this config up and failed; carries its message."""


def pid_alive(pid: int) -> bool:
    """Whether a process with ``pid`` runs (workers share one machine).

    A killed worker stays a zombie until xdist reaps it, and signal 0 still
    reaches zombies: on Linux, /proc tells them apart.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return True  # no /proc (macOS): trust the signal
    return stat[stat.rfind(b")") + 2 :][:1] not in (b"Z", b"X")


class HostLease:
    """One worker's view of the lease on one host's server."""

    def __init__(
        self,
        directory: Path,
        host_key: str,
        worker: str,
        *,
        pid: int | None = None,
        poll_interval: float = 0.1,
        alive: Callable[[int], bool] = pid_alive,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in host_key)
        directory.mkdir(parents=True, exist_ok=True)
        self.state_path = directory / f"{safe}.json"
        self._lock = FileLock(str(directory / f"{safe}.lock"))
        self.worker = worker
        self.pid = os.getpid() if pid is None else pid
        self._poll = poll_interval
        self._alive = alive
        self._clock = clock
        self._sleep = sleep

    # --- state file ---------------------------------------------------------

    def read(self) -> dict[str, Any]:
        """The current state (dead workers already dropped); call under the lock."""
        try:
            state: dict[str, Any] = json.loads(self.state_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            state = {}
        state.setdefault("live", None)
        state.setdefault("server", None)
        state.setdefault("users", {})
        state.setdefault("needs", {})
        state.setdefault("switching", None)
        state.setdefault("failed", {})
        state.setdefault("history", [])
        state["users"] = {w: p for w, p in state["users"].items() if self._alive(p)}
        state["needs"] = {w: v for w, v in state["needs"].items() if self._alive(v[1])}
        switching = state["switching"]
        if switching and not self._alive(switching["pid"]):
            # The switcher died half-way: the server is in an unknown state.
            state["switching"] = None
            state["live"] = None
        return state

    def _write(self, state: dict[str, Any]) -> None:
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1), encoding="utf-8")
        os.replace(tmp, self.state_path)

    # --- what workers call ----------------------------------------------------

    def announce(self, need: int | None, keep: str | None) -> None:
        """Say the lowest rank this worker still needs; stop using anything but ``keep``."""
        with self._lock:
            state = self.read()
            if need is None:
                state["needs"].pop(self.worker, None)
            else:
                state["needs"][self.worker] = [need, self.pid]
            if keep is None or state["live"] != keep:
                state["users"].pop(self.worker, None)
            self._write(state)

    def hold(
        self,
        key: str,
        rank: int,
        switch: Callable[[dict[str, Any] | None], dict[str, Any]],
        *,
        timeout: float,
    ) -> tuple[dict[str, Any], bool]:
        """Block until ``key`` is live and this worker uses it; returns (server, switched).

        ``switch(old_server)`` restarts the server with ``key`` and returns the
        new server facts; it runs without the file lock held, marked as
        *switching*. If it raises, the failure is recorded so other workers
        needing ``key`` fail the same way instead of restarting again.
        """
        deadline = self._clock() + timeout
        while True:
            with self._lock:
                state = self.read()
                state["needs"][self.worker] = [rank, self.pid]
                if key in state["failed"]:
                    self._write(state)
                    raise SwitchFailed(state["failed"][key])
                if state["live"] == key and not state["switching"]:
                    state["users"][self.worker] = self.pid
                    self._write(state)
                    return state["server"], False
                state["users"].pop(self.worker, None)
                lowest = min((v[0] for v in state["needs"].values()), default=rank)
                may_switch = not state["users"] and not state["switching"] and rank <= lowest
                if may_switch:
                    old = state["server"]
                    state["switching"] = {"worker": self.worker, "pid": self.pid, "key": key}
                    state["live"] = None
                self._write(state)
            if may_switch:
                return self._switch(key, switch, old), True
            if self._clock() > deadline:
                raise LeaseTimeout(
                    f"waited {timeout:.0f}s for the server to switch to {key}; live: "
                    f"{state['live']!r}, used by {sorted(state['users'])}, "
                    f"switching: {state['switching']!r}"
                )
            self._sleep(self._poll)

    def _switch(
        self,
        key: str,
        switch: Callable[[dict[str, Any] | None], dict[str, Any]],
        old: dict[str, Any] | None,
    ) -> dict[str, Any]:
        try:
            server = switch(old)
        except Exception as exc:
            with self._lock:
                state = self.read()
                state["switching"] = None
                state["failed"][key] = str(exc)
                self._write(state)
            raise
        with self._lock:
            state = self.read()
            state.update(live=key, server=server, switching=None)
            state["users"][self.worker] = self.pid
            state["history"].append([key, self.worker])
            self._write(state)
        return server

    def leave(self) -> None:
        """This worker is done: drop its use and its needs."""
        with self._lock:
            state = self.read()
            state["users"].pop(self.worker, None)
            state["needs"].pop(self.worker, None)
            self._write(state)
