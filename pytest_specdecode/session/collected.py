"""What the collection tells the terminal (at collection, so --collect-only tells it
too): its errors, the live server's config, the sandbox warning, the resume's notes
and, for --dflash-dry-run, the plan instead of a run."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import pytest

from pytest_specdecode.session.items import item_config, item_kind, terminal

if TYPE_CHECKING:
    from pytest_specdecode.session.core import SpecDecodeSession


def write(run: SpecDecodeSession, items: list[pytest.Item]) -> None:
    reporter = terminal(run.config)
    if reporter is not None and run.controller:
        for line, red in run.collection.notes():
            reporter.write_line(line, red=red)
    if any(item_kind(item) == "coding" for item in items) and run.controller:
        run.notices.sandbox()
    if run.resume is not None and reporter is not None and run.controller:
        for line, yellow in run.resume.notes(len(items)):
            reporter.write_line(line, yellow=yellow)
    if run.settings.dry_run and reporter is not None:
        reporter.section("dflash dry run")
        for line in dry_run_lines(run, items):
            reporter.write_line(line)


def dry_run_lines(run: SpecDecodeSession, items: list[pytest.Item]) -> list[str]:
    """The configs to start in order (those a resume carries whole first), each with
    its tests, and the collection's errors."""
    from pytest_specdecode.service.dryrun import Planned, plan_lines

    counts = Counter(config for item in items if (config := item_config(item)) is not None)
    carried = run.resume.whole() if run.resume is not None else []
    planned = [Planned(c, n, carried=True) for c, n in carried]
    planned += [Planned(config, n) for config, n in counts.items()]
    lines = plan_lines(
        run.settings,
        run.collection.resolver.dialect,
        planned,
        workers=run.target.dry_workers,
        port=run.services.port,
        invalid=run.collection.invalid,
        redactor=run.redactor,
    )
    return run.redactor.lines(lines)
