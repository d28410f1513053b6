"""The run order of a search: a ``pytest_runtestloop`` that starts the configs asked for.

Registered (by the plugin) only when ``--dflash-search`` is given, like
pytest-xdist's ``DSession``. Tests that run under no config, and the
non-speculative baseline (its figures are what speedup divides by), run
first; then the optimiser asks for one config at a time, its tests run, its
objective is told back; at the end the tests of the configs never visited
are reported as skipped with the reason. The last test of each config is run
with ``nextitem=None``: the next config is not known until this one has been
measured, so the session-scoped fixtures are torn down then, once per config.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_specdecode.config.settings import Settings
from pytest_specdecode.config.spec import SpecConfig, config_to_dict
from pytest_specdecode.report import gates
from pytest_specdecode.report.outputs import RunOutputs
from pytest_specdecode.report.results import RunResults
from pytest_specdecode.search import record
from pytest_specdecode.search.objective import measure
from pytest_specdecode.search.optimizer import GridSearch, Measured, default_restarts

ConfigOf = Callable[[pytest.Item], SpecConfig | None]


@dataclass
class Space:
    """The configs a search chooses among, in collection order, and their tests."""

    keys: list[str] = field(default_factory=list)  # canonical config keys
    labels: list[str] = field(default_factory=list)
    data: list[dict[str, Any]] = field(default_factory=list)  # config_to_dict of each
    items: list[list[pytest.Item]] = field(default_factory=list)
    head: list[pytest.Item] = field(default_factory=list)  # run first, outside the search

    def add(self, key: str, label: str, data: dict[str, Any]) -> int:
        if key not in self.keys:
            self.keys.append(key)
            self.labels.append(label)
            self.data.append(data)
            self.items.append([])
        return self.keys.index(key)

    def points(self) -> list[dict[str, Hashable]]:
        """Each config as the values of the keys that vary over the space."""
        flat = [{k: _hashable(v) for k, v in d.items()} for d in self.data]
        varying = [k for k in dict.fromkeys(k for d in flat for k in d) if _varies(flat, k)]
        return [{k: d.get(k) for k in varying} for d in flat]


def build_space(items: list[pytest.Item], config_of: ConfigOf, results: RunResults) -> Space:
    """Group the collected items by config; configs a resumed report carries whole are in the
    space too (visited), though none of their tests was collected to run."""
    space = Space()
    for item in items:
        config = config_of(item)
        if config is None or config.algorithm == "NONE":
            space.head.append(item)
            continue
        index = space.add(config.key(), config.label(), config_to_dict(config))
        space.items[index].append(item)
    for key, found in results.configs.items():
        whole = found.carried and found.carried.get("whole")
        if whole and found.config.get("algorithm") != "NONE":
            space.add(key, found.label, dict(found.config))
    return space


def metric_of(
    settings: Settings, space: Space, head: list[pytest.Item], config_of: ConfigOf
) -> str:
    """speedup when the run has a non-speculative baseline (or a saved one), else tok/s."""
    if settings.search_metric:
        return settings.search_metric
    baseline = settings.baseline or any(
        (c := config_of(i)) is not None and c.algorithm == "NONE" for i in head
    )
    return "speedup" if baseline else "tok_s"


class SearchLoop:
    """Owns the run order while a search is active (see the module docstring)."""

    def __init__(
        self, settings: Settings, outputs: RunOutputs, results: RunResults, config_of: ConfigOf
    ) -> None:
        self.settings = settings
        self.outputs = outputs
        self.results = results
        self.config_of = config_of
        self.search: GridSearch | None = None
        self.space: Space | None = None
        self.metric = "tok_s"
        self.workers_asked = 0  # -n N given: the search runs serially here instead

    def pytest_report_header(self) -> list[str]:
        if not self.workers_asked:
            return []
        return [
            f"dflash: --dflash-search runs in this process, one config at a time (-n "
            f"{self.workers_asked} starts no workers): each config is chosen from the figures "
            "of the ones before, and throughput cases skip under xdist; a lost host's config "
            "moves to the next live host"
        ]

    def prepare(self, items: list[pytest.Item]) -> GridSearch:
        """The space and the optimiser, told what a resumed report carries."""
        space = self.space = build_space(items, self.config_of, self.results)
        self.metric = metric_of(self.settings, space, space.head, self.config_of)
        size = len(space.keys)
        restarts = min(size, self.settings.search_restarts or default_restarts(size))
        search = self.search = GridSearch(space.points(), restarts, seed=self.settings.search_seed)
        data = self.outputs.data() if self.results.configs else {}
        for index, items_of in enumerate(space.items):
            if not items_of:  # carried whole by --dflash-resume
                search.tell(index, self._measure(data, index), carried=True)
        self._publish()
        return search

    def _measure(self, data: Mapping[str, Any], index: int) -> Measured:
        assert self.space is not None
        excluded = gates.config_failures(self.settings, self.results)
        return measure(data, self.space.keys[index], self.metric, excluded)

    def _publish(self, stopped: str | None = None) -> None:
        assert self.search is not None
        assert self.space is not None
        self.results.search = record.section(
            self.search, self.space.labels, self.metric, stopped, self.settings.search_seed
        )

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if self.settings.dry_run and reporter is not None:
            reporter.section("dflash search (dry run)")
            for line in self.plan_lines(session.items):
                reporter.write_line(line)

    def plan_lines(self, items: list[pytest.Item]) -> list[str]:
        """What a dry run says: the space, the restart budget, the first configs started."""
        search = self.prepare(items)
        assert self.space is not None
        labels = self.space.labels
        seed = self.settings.search_seed
        lines = [
            f"dflash search: {len(labels)} configs in the space, restart budget "
            f"{search.restarts} (metric {self.metric}, seed {seed}, {record.SAMPLER})"
        ]
        lines += [f"dflash search: carried from the resumed report: {labels[v.index]}"
                  for v in search.visits]  # fmt: skip
        if self.space.head:
            lines.append(f"dflash search: {len(self.space.head)} tests run first, outside the "
                         "search (the baseline and tests under no config)")  # fmt: skip
        first = search.ask(len(search.initial_design(search.startup_trials)) or 1)
        for n, index in enumerate(first, 1):
            lines.append(f"dflash search: start {n}: {labels[index]}")
        if seed is None:
            lines.append("dflash search: no --dflash-search-seed: after the first, the configs "
                         "started differ from run to run")  # fmt: skip
        lines.append("dflash search: then each next config is chosen from the results so far")
        return lines

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool | None:
        option = session.config.option
        if self.settings.dry_run or getattr(option, "collectonly", False):
            return None  # the session's own loop (a dry run plans, nothing runs)
        if session.testsfailed and not getattr(option, "continue_on_collection_errors", False):
            raise session.Interrupted(f"{session.testsfailed} errors during collection")
        search = self.prepare(session.items)
        assert self.space is not None
        space = self.space
        _run(session, space.head)
        while batch := search.ask(1):
            index = batch[0]
            try:
                _run(session, space.items[index])
            finally:
                # Told even when interrupted: the report says how far the search got.
                search.tell(index, self._measure(self.outputs.data(), index))
                self._publish()
        stopped = search.stop_reason() or "done"
        self._publish(stopped)
        skipped = [i for i in range(len(space.keys)) if i not in search.visited]
        reason = record.skip_reason(search, space.labels)
        for index in skipped:
            for item in space.items[index]:
                item.add_marker(pytest.mark.skip(reason=reason(index)))
        _run(session, [item for index in skipped for item in space.items[index]])
        return True


def register(
    config: pytest.Config,
    settings: Settings,
    outputs: RunOutputs,
    results: RunResults,
    config_of: ConfigOf,
) -> SearchLoop:
    """Register the search's run loop (only with --dflash-search; inert otherwise)."""
    loop = SearchLoop(settings, outputs, results, config_of)
    config.pluginmanager.register(loop, "specdecode-search")
    return loop


def _run(session: pytest.Session, items: list[pytest.Item]) -> None:
    """Run ``items`` in order, as pytest's own loop does; the last one tears everything down."""
    for position, item in enumerate(items):
        nextitem = items[position + 1] if position + 1 < len(items) else None
        item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
        if session.shouldfail:
            raise session.Failed(session.shouldfail)
        if session.shouldstop:
            raise session.Interrupted(session.shouldstop)


def _hashable(value: Any) -> Hashable:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value  # type: ignore[no-any-return]


def _varies(points: list[dict[str, Hashable]], key: str) -> bool:
    return len({p.get(key) for p in points}) > 1
