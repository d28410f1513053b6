"""A lease on one server shared by pytest-xdist workers: who may switch its config.

One GPU host serves one config at a time. Under ``pytest -n N`` several
workers run tests against the same host, so they agree through a small JSON
state file next to a lock file (filelock) in a directory they all share:

- the *live* config and the server facts every worker needs to use it
  (base URL, local process group, log file);
- *switching*: the worker restarting the server right now (exclusive);
- *failed*: configs whose switch failed, with the message, so no other worker
  tries again;
- *users*: workers using the live config.

Which config may become live is the xdist controller's decision, not the
workers': its scheduler (:mod:`.scheduling`) writes the
*active* config of each host to a file once every test of the configs before
it has completed, and a worker may switch the server only to the active
config. So each config is applied once, in order, by construction: a worker
that joins late cannot bring an old config back. The file also names the
workers holding the active config's remaining tests: if all of them exited
(``-x``, a crash), nobody waits for those tests. Without that file (another
plugin's scheduler), a worker may switch once nobody uses the live config.

Entries of dead workers (their pid is gone) are dropped on every read, so a
killed worker never leaves the others waiting; a switcher that died leaves
no live config, so the next worker switches again.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path

from filelock import FileLock

from pytest_specdecode import statefiles
from pytest_specdecode.distributed.lease_state import LeaseState, Switching
from pytest_specdecode.errors import SpecDecodeError
from pytest_specdecode.service.ownership import Registry, pid_alive
from pytest_specdecode.service.sharing import LeaseHostDown, Moved, Turn


class LeaseTimeout(SpecDecodeError):
    """Waiting for another worker's switch took longer than the deadline."""


class SwitchFailed(SpecDecodeError):
    """Another worker tried to bring this config up and failed; carries its message."""


def safe_name(host_key: str) -> str:
    """``host_key`` as a file name."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in host_key)


def write_active(
    directory: Path, host_key: str, key: str | None, holders: list[str] | None = None
) -> None:
    """The scheduler's word: ``key`` is the config host ``host_key`` may switch to now,
    and ``holders`` are the workers holding its remaining tests."""
    path = directory / f"{safe_name(host_key)}.active"
    statefiles.write_json(path, {"active": key, "holders": holders or []})


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
        safe = safe_name(host_key)
        directory.mkdir(parents=True, exist_ok=True)
        self.state_path = directory / f"{safe}.json"
        self._workers = directory / "workers"
        self.active_path = directory / f"{safe}.active"
        self._lock = FileLock(str(directory / f"{safe}.lock"))
        self.registry = Registry(directory, alive=alive)
        self.worker = worker
        self.pid = os.getpid() if pid is None else pid
        self._poll = poll_interval
        self._alive = alive
        self._clock = clock
        self._sleep = sleep

    # --- state file ---------------------------------------------------------

    def read(self) -> LeaseState:
        """The current state (dead workers already dropped); call under the lock."""
        found = LeaseState.from_json(statefiles.read_json(self.state_path))
        return found.without_the_dead(self._alive)

    def register(self) -> None:
        """Record this worker's pid, so others can tell when it is gone."""
        statefiles.write_text(self._workers / f"{safe_name(self.worker)}.pid", str(self.pid))

    def active(self) -> tuple[bool, str | None, list[str]]:
        """(whether a scheduler decides, the config it lets this host switch to, its holders)."""
        data = statefiles.read_json(self.active_path)
        if not isinstance(data, dict):
            return False, None, []
        key = data.get("active")
        holders = [str(h) for h in data.get("holders") or []]
        return True, key if isinstance(key, str) else None, holders

    def _abandoned(self, holders: list[str]) -> bool:
        """Every worker holding the active config's tests exited (``-x``, a crash):
        those tests will never run, so waiting for them would never end."""
        if not holders:
            return False
        for worker in holders:
            try:
                pid = int(statefiles.read_text(self._workers / f"{safe_name(worker)}.pid") or "")
            except ValueError:
                return False  # not started yet, as far as we know
            if self._alive(pid):
                return False
        return True

    def _write(self, state: LeaseState) -> None:
        statefiles.write_json(self.state_path, state.to_json(), indent=1)

    # --- what workers call ----------------------------------------------------

    @contextlib.contextmanager
    def turn(
        self, key: str, *, timeout: float, still_here: Callable[[], bool] | None = None
    ) -> Iterator[Turn]:
        """This worker's turn with ``key``: blocks until ``key`` is live (join it) or this
        worker may switch the server to it (:attr:`Turn.switching`).

        To switch, the block restarts the server (no file lock held, marked as
        *switching*) and ends with :meth:`Turn.switched` and the new server's facts;
        if it raises instead, the failure is recorded so other workers needing
        ``key`` fail the same way instead of restarting again (a host-down error
        marks the host down, not the config failed).

        ``timeout`` bounds the wait for another worker's switch (and, without a
        scheduler, for the users of another config); waiting for the scheduler to
        make ``key`` active has no deadline of its own: it moves on as tests
        complete. ``still_here()`` False (checked while waiting) means the scheduler
        moved ``key`` to another host: :class:`Moved`. A host another worker found
        down raises :class:`LeaseHostDown`.
        """
        turn = self._wait_for_turn(key, timeout, still_here)
        if not turn.switching:
            yield turn
            return
        try:
            yield turn
            if turn.facts is None:
                raise SpecDecodeError(f"the switch to {key} ended without the new server's facts")
        except Exception as exc:
            self._failed(key, exc)
            raise
        with self._lock:
            state = self.read()
            state.live, state.server, state.switching = key, turn.facts, None
            state.users[self.worker] = self.pid
            state.history.append((key, self.worker))
            self._write(state)

    def _wait_for_turn(
        self, key: str, timeout: float, still_here: Callable[[], bool] | None
    ) -> Turn:
        state = LeaseState()
        blocked_by_others = False

        def one_look() -> Turn | None:
            """The turn, or None to wait; ``blocked_by_others``: the wait is on another
            worker's clock."""
            nonlocal state, blocked_by_others
            with self._lock:
                state = self.read()
                if state.down:
                    raise LeaseHostDown(state.down, reason="host-down")
                if key in state.failed:
                    raise SwitchFailed(state.failed[key])
                if state.live == key and not state.switching:
                    state.users[self.worker] = self.pid
                    self._write(state)
                    return Turn(key, state.server or {}, switching=False)
                state.users.pop(self.worker, None)
                scheduled, active, holders = self.active()
                blocked_by_others = bool(state.switching) or (not scheduled and bool(state.users))
                may_switch = not blocked_by_others and (
                    not scheduled or active in (key, None) or self._abandoned(holders)
                )
                old = state.server
                if may_switch:
                    # A worker that died left its server running (killed mid-start or
                    # after): stop it through the record, so it holds no port.
                    self.registry.reap()
                    state.switching = Switching(self.worker, self.pid, key)
                    state.live = None
                self._write(state)
            if may_switch:
                return Turn(key, old, switching=True)
            if still_here is not None and not still_here():
                raise Moved(f"{key} moved to another host while this worker waited for it")
            return None

        try:
            return statefiles.wait_until(
                one_look,
                timeout=timeout,
                what=f"server switch to {key}",
                poll=self._poll,
                clock=self._clock,
                sleep=self._sleep,
                # Waiting for the scheduler to make ``key`` active has no deadline.
                timed=lambda: blocked_by_others,
            )
        except statefiles.WaitTimeout:
            raise LeaseTimeout(
                f"waited {timeout:.0f} s for the server to switch to {key}; live: "
                f"{state.live!r}, used by {sorted(state.users)}, "
                f"switching: {asdict(state.switching) if state.switching else None!r}"
            ) from None

    def _failed(self, key: str, exc: Exception) -> None:
        """This worker's switch to ``key`` failed: recorded for the others."""
        with self._lock:
            state = self.read()
            state.switching = None
            if getattr(exc, "reason", None) == "host-down":
                # The host's fault, not the config's: the config runs elsewhere.
                state.down = getattr(exc, "summary", str(exc))
            else:
                state.failed[key] = str(exc)
            self._write(state)

    def leave(self) -> None:
        """This worker is done: drop its use."""
        with self._lock:
            state = self.read()
            state.users.pop(self.worker, None)
            self._write(state)
