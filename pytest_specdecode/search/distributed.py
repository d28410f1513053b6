"""A search over several hosts under pytest-xdist: the scheduler's chooser, the workers' side.

The controller collects nothing, so each worker writes the configs it
collected to the lease directory (``search-space.json``: key, label and
config in collection order; every worker writes the same). The controller's
config scheduler (:class:`pytest_specdecode.distributed.scheduling.ConfigScheduling`)
asks :class:`HostsSearch` for a host's next config when that host has at most
one config left to finish, and says when a config's tests have all completed:
their reports (and records) have reached the controller by then, so its
objective is read from the run's report as the serial loop reads it. Speedup
divides by the baseline's figures: a config finished before the baseline is
told once the baseline is done.

When the search stops, the reason of each unvisited config is written
(``search-skips.json``, config key -> reason) before any of its tests is sent;
a worker skips those tests at setup, before a fixture starts a server.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_specdecode.config.spec import config_to_dict
from pytest_specdecode.search import record
from pytest_specdecode.search.space import ConfigOf, Space, carry_whole
from pytest_specdecode.statefiles import read_json, write_json

if TYPE_CHECKING:
    from pytest_specdecode.search.loop import SearchLoop

SPACE = "search-space.json"
SKIPS = "search-skips.json"


class HostsSearch:
    """The search as the xdist scheduler's
    :class:`~pytest_specdecode.distributed.schedule.Chooser`."""

    def __init__(self, loop: SearchLoop, lease_dir: Path, hosts: int) -> None:
        self.loop = loop
        self.lease_dir = lease_dir
        self.hosts = hosts
        self.open = True
        self.stopped: str | None = None
        self._head: set[str] = set()  # baseline configs not yet done
        self._deferred: list[int] = []  # done before the baseline: told after it
        self._index: dict[str, int] = {}
        self._warm: dict[str, Hashable] = {}  # per host: the warm state it started last

    def header(self) -> str:
        return (
            f"dflash: --dflash-search over {self.hosts} hosts: one config per host at a time, "
            "each chosen knowing every config finished before it (a host's next config is "
            "chosen while its current one runs: a pytest-xdist worker runs a test only once "
            "it holds the next)"
        )

    def keys(self) -> Collection[str]:
        """The space from the workers' file; the optimiser, told what a resumed report
        carries. The keys of the configs it chooses among."""
        space = Space()
        for entry in read_json(self.lease_dir / SPACE) or []:
            if not isinstance(entry, dict) or not isinstance(entry.get("data"), dict):
                continue
            key, label, data = str(entry.get("key")), str(entry.get("label")), entry["data"]
            if data.get("algorithm") == "NONE":
                space.baseline = True
                self._head.add(key)
                continue
            space.add(key, label, dict(data))
        self.loop.before_space()
        carry_whole(space, self.loop.results)
        self.loop.prepare_space(space)
        self._index = {key: index for index, key in enumerate(space.keys)}
        return [key for index, key in enumerate(space.keys) if index not in space.carried]

    def ask(self, host: str) -> str | None:
        """The next config for ``host``; None once the search stopped (for good)."""
        search, space = self.loop.search, self.loop.space
        if search is None or space is None or not self.open:
            return None
        batch = search.ask(1, after=self._warm.get(host))
        if not batch:
            self.open = False
            self.stopped = search.stop_reason() or "done"
        else:
            self._warm[host] = search.group(batch[0])
        self.loop.publish(self.stopped)
        return space.keys[batch[0]] if batch else None

    def completed(self, key: str) -> None:
        """Every test of ``key`` completed: tell its objective (after the baseline's)."""
        search = self.loop.search
        if search is None:
            return
        if key in self._head:
            self._head.discard(key)
            if not self._head:
                deferred, self._deferred = self._deferred, []
                for index in deferred:
                    self._tell(index)
            return
        found = self._index.get(key)
        if found is None or found not in search.pending:
            return
        if self._head:
            self._deferred.append(found)
            return
        self._tell(found)

    def _tell(self, index: int) -> None:
        self.loop.tell(index)
        self.loop.publish(self.stopped)

    def closed(self, unvisited: Sequence[str]) -> None:
        """The search stopped: each unvisited config's reason, for the workers."""
        search, space = self.loop.search, self.loop.space
        if search is None or space is None:
            return
        reason = record.skip_reason(search, space.labels)
        reasons = {key: reason(self._index[key]) for key in unvisited if key in self._index}
        write_json(self.lease_dir / SKIPS, reasons)

    def finish(self) -> None:
        """At session end: tell what is still pending (an interrupted run: the report
        says how far the search got), then the section as it ends."""
        search = self.loop.search
        if search is None:
            return
        for index in [*self._deferred, *search.pending]:
            if index in search.pending:
                self.loop.tell(index)
        self._deferred = []
        self.loop.publish(self.stopped)


class WorkerSide:
    """On an xdist worker: the space it collected, and the search's skips."""

    def __init__(self, lease_dir: Path, config_of: ConfigOf) -> None:
        self.lease_dir = lease_dir
        self.config_of = config_of
        self._skips: dict[str, str] | None = None

    def write_space(self, items: Sequence[pytest.Item]) -> None:
        entries: dict[str, dict[str, Any]] = {}
        for item in items:
            config = self.config_of(item)
            if config is not None and config.key() not in entries:
                entries[config.key()] = {
                    "key": config.key(),
                    "label": config.label(),
                    "data": config_to_dict(config),
                }
        write_json(self.lease_dir / SPACE, list(entries.values()))

    def skip_unvisited(self, item: pytest.Item) -> None:
        """Skip ``item`` when the search stopped without visiting its config."""
        config = self.config_of(item)
        if config is None:
            return
        if self._skips is None:
            found = read_json(self.lease_dir / SKIPS)
            # Written once, before any skipped test is sent: absent means none yet.
            self._skips = (
                {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else None
            )
        reason = (self._skips or {}).get(config.key())
        if reason is not None:
            pytest.skip(reason)
