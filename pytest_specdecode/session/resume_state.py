"""--dflash-resume in the session: the tests the resumed report has results for are
deselected and their results carried; under xdist the workers deselect and the
controller carries what they wrote."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_specdecode.config.settings import Settings
from pytest_specdecode.config.spec import SpecConfig
from pytest_specdecode.distributed import shared_files
from pytest_specdecode.report.results import RunResults
from pytest_specdecode.session.items import item_config, item_kind
from pytest_specdecode.throughput.runner import LosslessBaseline

if TYPE_CHECKING:
    from pytest_specdecode.report.resume import Resume


class ResumeState:
    """The resumed report and what the run carries from it."""

    def __init__(self, resume: Resume, config: pytest.Config, results: RunResults) -> None:
        self.resume = resume
        self.config = config
        self.results = results
        self.controller = not hasattr(config, "workerinput")
        self.carried: dict[SpecConfig, tuple[int, int]] = {}  # config -> (carried, tests)

    @classmethod
    def for_run(
        cls,
        config: pytest.Config,
        settings: Settings,
        problem_set: Callable[[], dict[str, str] | None],
        results: RunResults,
    ) -> ResumeState | None:
        """The resume of a --dflash-resume run (None without it)."""
        if not settings.resume:
            return None
        from pytest_specdecode.report.resume import Resume

        # Workers read the copy the controller made before any test rewrote the report.
        shared = shared_files.worker_lease_dir(config)
        copy = shared_files.shared_resume(shared) if shared else None
        path = copy or settings.resume or ""
        return cls(Resume.load(path, settings, config.rootpath, problem_set), config, results)

    @property
    def path(self) -> Path:
        return self.resume.path

    def deselect(self, items: list[pytest.Item], baseline: LosslessBaseline) -> None:
        """Deselect the tests the resumed report has results for; carry those results."""
        carried = self.resume.plan(
            [
                (i.nodeid, item_kind(i), bool((c := item_config(i)) and c.algorithm == "NONE"))
                for i in items
            ]
        )
        for item in items:
            if (config := item_config(item)) is not None:
                done, total = self.carried.get(config, (0, 0))
                self.carried[config] = (done + (item.nodeid in carried), total + 1)
        gone = [item for item in items if item.nodeid in carried]
        if gone:
            self.config.hook.pytest_deselected(items=gone)
            items[:] = [item for item in items if item.nodeid not in carried]
        baseline.expected -= carried
        if self.controller:
            left = {c.key() for item in items if (c := item_config(item)) is not None}
            self.resume.carry_into(self.results, left)
        else:
            shared_files.write_carried(self.config, sorted(carried))

    def whole(self) -> list[tuple[SpecConfig, int]]:
        """The configs whose every test is carried, with their number of tests."""
        return [(config, n) for config, (done, n) in self.carried.items() if done == n]

    def notes(self, collected: int) -> list[tuple[str, bool]]:
        """The resume's lines after the collection, each with whether it is a warning."""
        lines = [(line, True) for line in self.resume.refusal_lines()]
        return [*lines, (self.resume.note(len(self.whole()), collected), False)]

    def carry_from_workers(self) -> None:
        """Under xdist the controller collects nothing: it carries what the workers
        deselected (once)."""
        if self.controller and self.results.resumed_from is None:
            carried = shared_files.read_carried(self.config)
            if carried is not None:
                left = shared_files.planned_tests(self.config) or {}
                self.resume.carry_into(self.results, left, carried)

    def exit_status(self, status: int) -> int:
        from pytest_specdecode.report.resume import exit_status

        self.carry_from_workers()
        return exit_status(status, self.results)
