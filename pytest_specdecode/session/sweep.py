"""The sweep's progress in the xdist controller or the serial run: configs done and
the time left, on the progress line and in the report."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_specdecode import records
from pytest_specdecode.distributed import shared_files
from pytest_specdecode.output.progress import Progress
from pytest_specdecode.report.results import RunResults
from pytest_specdecode.report.sweep_progress import SweepProgress, describe, duration
from pytest_specdecode.session.collect import Collection
from pytest_specdecode.session.target import Target


class Sweep:
    """Plans the sweep once (serially from the collection, under xdist from what the
    workers collected) and follows it report by report."""

    def __init__(
        self,
        config: pytest.Config,
        results: RunResults,
        progress: Progress,
        target: Target,
        collection: Collection,
    ) -> None:
        self.config = config
        self.results = results
        self.progress = progress
        self.progress_of = SweepProgress(parallel=target.parallel)
        self.collection = collection
        self._done_planning = False

    def plan(self) -> None:
        if not self._done_planning:
            self._done_planning = True
            tests = shared_files.planned_tests(self.config) or self.collection.planned
            configs = self.results.configs
            whole = {k for k, r in configs.items() if r.carried and r.carried["whole"]}
            self.progress_of.plan(tests, dict.fromkeys(whole, 0))

    def report(self, report: pytest.TestReport) -> None:
        self.plan()
        props: dict[str, Any] = dict(report.user_properties)
        finished = self.progress_of.report(
            report.nodeid,
            report.when,
            props.get(records.CONFIG_KEY),
            props.get(records.KIND),
            report.duration,
            props.get(records.SERVICE),
        )
        status = self.results.sweep = self.progress_of.status()
        if finished:
            left = status.left_seconds
            self.progress.context = f"{status.configs_done}/{status.configs_total} configs" + (
                f" | about {duration(left)} left" if left is not None else ""
            )
            self.progress.done(describe(status))

    def finish(self) -> None:
        """The sweep's last status for the report (when it planned any config)."""
        self.plan()
        if self.progress_of.planned:
            self.results.sweep = self.progress_of.status()
