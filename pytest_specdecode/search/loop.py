"""The run order of a search: a ``pytest_runtestloop`` that starts the configs asked for.

Registered (by the plugin) only when ``--dflash-search`` is given, like
pytest-xdist's ``DSession``. Tests that run under no config, and the
non-speculative baseline (its figures are what speedup divides by), run
first; then the optimiser asks for one config at a time, its tests run, its
objective is told back (with what it took: its restart plus its measurement,
charged to ``--dflash-search-budget``); at the end the tests of the configs
never visited are reported as skipped with the reason. After each throughput
case of a config with more to come, its objective so far goes to the
search's successive-halving pruner: a config clearly worse than the ones
measured that far skips its remaining tests. The last test of each config is run
with ``nextitem=None``: the next config is not known until this one has been
measured, so the session-scoped fixtures are torn down then, once per config.

Under pytest-xdist with several hosts the run order is xdist's: the config
scheduler asks :class:`~.distributed.HostsSearch` (built here) for each host's next
config, and the workers skip the configs never visited (:mod:`.distributed`).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pytest_specdecode.config.settings import Settings
from pytest_specdecode.distributed.run import controller_of
from pytest_specdecode.distributed.shared_files import worker_lease_dir
from pytest_specdecode.report import gates
from pytest_specdecode.report.model import Report
from pytest_specdecode.report.outputs import RunOutputs
from pytest_specdecode.report.results import RunResults
from pytest_specdecode.search import record
from pytest_specdecode.search.distributed import HostsSearch, WorkerSide
from pytest_specdecode.search.objective import cases_of, measure, seconds_of
from pytest_specdecode.search.optimizer import GridSearch, Measured, default_restarts
from pytest_specdecode.search.space import ConfigOf, Space, build_space, metric_of


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
        # Under xdist over several hosts: the xdist scheduler's chooser (controller), or
        # the worker's side (space file, skips); None: this loop runs the search.
        self.hosts: HostsSearch | None = None
        self.worker: WorkerSide | None = None
        # Under xdist: brings what a resumed run carried into ``results`` first.
        self.before_space: Callable[[], None] = lambda: None

    def pytest_report_header(self) -> list[str]:
        if self.hosts is not None:
            return [self.hosts.header()]
        if not self.workers_asked:
            return []
        return [
            f"dflash: --dflash-search runs in this process, one config at a time (-n "
            f"{self.workers_asked} starts no workers: it needs two --dflash-hosts or more to "
            "run configs in parallel): each config is chosen from the figures of the ones "
            "before; a lost host's config moves to the next live host"
        ]

    def prepare(self, items: list[pytest.Item]) -> GridSearch:
        """The space and the optimiser, told what a resumed report carries."""
        return self.prepare_space(build_space(items, self.config_of, self.results))

    def prepare_space(self, space: Space) -> GridSearch:
        """The optimiser over ``space``, told what a resumed report carries."""
        self.space = space
        self.metric = metric_of(self.settings, space)
        size = len(space.keys)
        budget = self.settings.search_budget
        restarts = size if budget else self.settings.search_restarts or default_restarts(size)
        search = self.search = GridSearch(
            space.points(),
            min(size, restarts),
            seed=self.settings.search_seed,
            budget_seconds=budget,
            groups=space.warm_states(),
        )
        data = self.outputs.report() if self.results.configs else Report()
        for index in sorted(space.carried):  # carried whole by --dflash-resume
            seconds = seconds_of(data, space.keys[index])
            search.tell(index, self._measure(data, index), carried=True, seconds=seconds)
        self.publish()
        return search

    def tell(self, index: int, *, pruned: bool = False) -> None:
        """Tell config ``index``'s objective and what it took, from the report as it stands."""
        assert self.search is not None
        assert self.space is not None
        data = self.outputs.report()
        seconds = seconds_of(data, self.space.keys[index])
        self.search.tell(index, self._measure(data, index), seconds=seconds, pruned=pruned)

    def _measure(self, data: Report, index: int) -> Measured:
        assert self.space is not None
        excluded = gates.config_failures(self.settings, self.results)
        return measure(data, self.space.keys[index], self.metric, excluded)

    def publish(self, stopped: str | None = None) -> None:
        """The report's ``search`` section as the search stands now."""
        assert self.search is not None
        assert self.space is not None
        self.results.search = record.section(
            self.search, self.space.labels, self.metric, stopped, self.settings.search_seed
        )

    @pytest.hookimpl(tryfirst=True)  # a worker's space file, before xdist sends the collection
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if self.worker is not None:
            self.worker.write_space(session.items)
            return
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
        budget = self.settings.search_budget
        spent = f"time budget {budget:g} s" if budget else f"restart budget {search.restarts}"
        lines = [
            f"dflash search: {len(labels)} configs in the space, {spent} "
            f"(metric {self.metric}, seed {seed}, {record.SAMPLER})"
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
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if self.worker is not None:
            self.worker.skip_unvisited(item)

    @pytest.hookimpl(tryfirst=True)  # before the session writes the report
    def pytest_sessionfinish(self) -> None:
        if self.hosts is not None:
            self.hosts.finish()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool | None:
        option = session.config.option
        if self.settings.dry_run or getattr(option, "collectonly", False):
            return None  # the session's own loop (a dry run plans, nothing runs)
        if self.hosts is not None or self.worker is not None:
            return None  # pytest-xdist's loop; its scheduler asks self.hosts
        if session.testsfailed and not getattr(option, "continue_on_collection_errors", False):
            raise session.Interrupted(f"{session.testsfailed} errors during collection")
        search = self.prepare(session.items)
        assert self.space is not None
        space = self.space
        _run(session, space.head)
        while batch := search.ask(1):
            index = batch[0]
            pruned = False
            try:
                pruned = self._run_config(session, index)
            finally:
                # Told even when interrupted: the report says how far the search got.
                self.tell(index, pruned=pruned)
                self.publish()
        stopped = search.stop_reason() or "done"
        self.publish(stopped)
        skipped = [i for i in range(len(space.keys)) if i not in search.visited]
        reason = record.skip_reason(search, space.labels)
        for index in skipped:
            for item in space.items[index]:
                item.add_marker(pytest.mark.skip(reason=reason(index)))
        _run(session, [item for index in skipped for item in space.items[index]])
        return True

    def _run_config(self, session: pytest.Session, index: int) -> bool:
        """Run config ``index``'s tests; True when the pruner stopped it after a case."""
        assert self.search is not None
        assert self.space is not None
        items, key = self.space.items[index], self.space.keys[index]
        cases, pruned = 0, False
        for item, nextitem in zip(items, [*items[1:], None], strict=False):
            if pruned:
                item.add_marker(pytest.mark.skip(reason=_pruned_reason(cases)))
            _run_one(session, item, nextitem)
            # The report is built only after a throughput test, and not after the last.
            if pruned or nextitem is None or item.get_closest_marker("throughput") is None:
                continue
            data = self.outputs.report()
            if (now := cases_of(data, key)) > cases:
                cases = now
                found = self._measure(data, index)
                if found.usable and found.objective is not None:
                    pruned = self.search.report(index, cases, found.objective)
        return pruned


def _pruned_reason(cases: int) -> str:
    return (
        f"stopped by the search after {cases} throughput case(s): clearly worse than the "
        "configs measured that far (successive halving)"
    )


def register(
    config: pytest.Config,
    settings: Settings,
    outputs: RunOutputs,
    results: RunResults,
    config_of: ConfigOf,
) -> SearchLoop:
    """Register the search's run loop (only with --dflash-search; inert otherwise).

    Under pytest-xdist (the session started workers: several hosts) the xdist
    controller's scheduler gets the search as its chooser, and each worker its side."""
    loop = SearchLoop(settings, outputs, results, config_of)
    if (lease_dir := worker_lease_dir(config)) is not None:
        loop.worker = WorkerSide(lease_dir, config_of)
    elif (controller := controller_of(config)) is not None:
        hosts = HostsSearch(loop, controller.lease_dir, len(settings.hosts))
        loop.hosts = controller.chooser = hosts
    config.pluginmanager.register(loop, "specdecode-search")
    return loop


def _run(session: pytest.Session, items: list[pytest.Item]) -> None:
    """Run ``items`` in order, as pytest's own loop does; the last one tears everything down."""
    # Each item with the next one, None after the last (not strict: no items, no None).
    for item, nextitem in zip(items, [*items[1:], None], strict=False):
        _run_one(session, item, nextitem)


def _run_one(session: pytest.Session, item: pytest.Item, nextitem: pytest.Item | None) -> None:
    item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
    if session.shouldfail:
        raise session.Failed(session.shouldfail)
    if session.shouldstop:
        raise session.Interrupted(session.shouldstop)
