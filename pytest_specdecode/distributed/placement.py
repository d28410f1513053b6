"""Which host runs a config, and where it goes when its host is lost.

A run with several ``--dflash-host`` keeps going when one of them goes away:
the manager tells its placement a host is down (:mod:`pytest_specdecode.service.retry`
says when), and asks it again where the config runs now. Without pytest-xdist
that is :class:`pytest_specdecode.service.sharing.LocalPlacement`; here:

- :class:`SharedPlacement` (an xdist worker): the controller's scheduler
  decides (:mod:`.scheduling`). A worker that finds its host down writes a marker
  to ``down/`` in the lease directory; the scheduler marks the host down,
  moves its configs not yet done to a live host and publishes in
  ``placement.json`` where each config runs (``where``: config key -> host
  key, ``""`` when no host is left) and why configs moved (``moves``).
  Workers follow ``where``; only the scheduler writes it.

A move is recorded per config (``{"from", "to", "reason"}``) for the report.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pytest_specdecode import statefiles
from pytest_specdecode.config.settings import Host, Settings
from pytest_specdecode.distributed.lease import safe_name
from pytest_specdecode.service.retry import HostDown
from pytest_specdecode.service.sharing import NoHostLeft, none_left

PLACEMENT = "placement.json"
DOWN = "down"
# A worker waits this long for the scheduler to publish (or move) its config.
FOLLOW_TIMEOUT = 60.0


def host_key(settings: Settings, host: Host | None, port: int) -> str:
    """The lease name of the server a worker bound to ``host`` uses."""
    name = host.name if host is not None and settings.control != "local" else "localhost"
    return f"{name}-{port}"


class SharedPlacement:
    """An xdist worker's view: follows the scheduler's ``placement.json``."""

    def __init__(
        self,
        directory: Path,
        hosts: Mapping[str, Host],
        bound: str,
        worker: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        poll_interval: float = 0.1,
        timeout: float = FOLLOW_TIMEOUT,
    ) -> None:
        self.directory = directory
        self.hosts = dict(hosts)  # host key -> host
        self.keys = {host: key for key, host in self.hosts.items()}
        self.bound = bound
        self.worker = worker
        self._clock = clock
        self._sleep = sleep
        self._poll = poll_interval
        self._timeout = timeout

    def _read(self) -> dict[str, Any] | None:
        return read_placement(self.directory)

    def host_for(self, key: str) -> Host:
        unpublished_until = self._clock() + min(5.0, self._timeout)
        down: dict[str, str] = {}

        def placed() -> Host | None:
            nonlocal down
            data = self._read()
            down = down_hosts(self.directory)
            if data is None and self.bound not in down:
                return self.hosts[self.bound]  # no config scheduler in this run
            where = (data or {}).get("where", {}).get(key)
            if where == "":
                raise NoHostLeft(none_left(down), host=self.bound)
            if where is None and self.bound not in down and self._clock() >= unpublished_until:
                return self.hosts[self.bound]
            if where is not None and where not in down and where in self.hosts:
                return self.hosts[where]
            return None

        try:
            return statefiles.wait_until(
                placed,
                timeout=self._timeout,
                what=f"config {key} waiting for the scheduler",
                poll=self._poll,
                clock=self._clock,
                sleep=self._sleep,
            )
        except statefiles.WaitTimeout:
            raise HostDown(
                f"config {key} waited {self._timeout:g} s for the scheduler to move it off "
                f"the lost host(s) {sorted(down)} and was not moved; rerun with "
                "--dflash-resume to finish the sweep",
                host=self.bound,
            ) from None

    def mark_down(self, host: Host, reason: str, key: str) -> None:
        write_down(self.directory, self.keys.get(host, str(host)), reason, self.worker, key)

    def still_here(self, key: str, host: Host) -> bool:
        where = ((self._read() or {}).get("where") or {}).get(key)
        return where is None or where == self.keys.get(host)

    def moves(self, key: str) -> list[dict[str, str]]:
        found = ((self._read() or {}).get("moves") or {}).get(key) or []
        return [dict(m) for m in found if isinstance(m, dict)]


# --- the files ---------------------------------------------------------------


def write_down(directory: Path, host: str, reason: str, worker: str, key: str) -> None:
    """A worker's word that ``host`` (a host key) is down."""
    data = {"host": host, "reason": reason, "worker": worker, "config": key}
    statefiles.write_json(directory / DOWN / f"{safe_name(host)}.json", data)


def down_hosts(directory: Path) -> dict[str, str]:
    """Host key -> reason, for every host a worker found down."""
    found: dict[str, str] = {}
    for path in sorted((directory / DOWN).glob("*.json")):
        data = statefiles.read_json(path)
        if isinstance(data, dict) and isinstance(data.get("host"), str):
            found[data["host"]] = str(data.get("reason") or "")
    return found


def read_placement(directory: Path) -> dict[str, Any] | None:
    data = statefiles.read_json(directory / PLACEMENT)
    return data if isinstance(data, dict) else None


def write_placement(
    directory: Path, where: Mapping[str, str], moves: Mapping[str, list[dict[str, str]]]
) -> None:
    """The scheduler's word: where each config runs, and why some moved."""
    statefiles.write_json(directory / PLACEMENT, {"where": dict(where), "moves": dict(moves)})
