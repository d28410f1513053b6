"""The end of the run: its exit status (interrupts, resume, gates), the report's
last write, and the summary on the terminal."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_specdecode.report import gates
from pytest_specdecode.report.sweep_progress import notes as sweep_notes
from pytest_specdecode.session.items import runs_tests

if TYPE_CHECKING:
    from pytest_specdecode.session.core import SpecDecodeSession

OK, TESTS_FAILED, INTERRUPTED = 0, 1, 2


def session_finish(run: SpecDecodeSession, session: pytest.Session, exitstatus: int) -> None:
    """Stop the servers, then settle the exit status and write the report."""
    outputs = run.outputs
    if outputs.phase is not None and not outputs.phase.startswith("cleanup"):
        outputs.phase = f"cleanup after {outputs.phase}"
    try:
        run.services.shutdown()
    except KeyboardInterrupt:
        # Ctrl-C again while stopping: the report is still written (unconfigure stops
        # what is left), and the run says it was interrupted.
        run.term.interrupted = run.term.interrupted or "KeyboardInterrupt"
    run.flush_messages()
    status = int(exitstatus)
    if run.term.interrupted and status in (OK, TESTS_FAILED):
        # A second interrupt can cut pytest short before it notes the first: never 0.
        status = INTERRUPTED
    if run.settings.dry_run:
        # Nothing was measured: no report, no gates; a bad config fails the plan.
        session.exitstatus = 1 if run.collection.invalid and status == 0 else status
    elif run.controller and runs_tests(session.config):
        if run.resume is not None:
            status = run.resume.exit_status(status)
        run.sweep.finish()
        try:
            session.exitstatus = outputs.finish(status)
        except KeyboardInterrupt:
            run.term.interrupted = run.term.interrupted or "KeyboardInterrupt"
            outputs.final.update(exitstatus=INTERRUPTED, interrupted=True)
            outputs.update()  # the report says so, whatever finish had done
            session.exitstatus = INTERRUPTED
    elif status != int(exitstatus):
        session.exitstatus = status


def benchmark_failed(run: SpecDecodeSession, outcome: gates.Outcome) -> None:
    """pytest-benchmark's --benchmark-compare-fail, as a gate of the run."""
    session = run.pytest_session
    if run.controller and session is not None and run.outputs.final:
        session.exitstatus = run.outputs.fail_after(outcome)
    elif session is not None and session.exitstatus == OK:
        session.exitstatus = TESTS_FAILED


def summary(run: SpecDecodeSession, terminalreporter: pytest.TerminalReporter) -> None:
    """The dflash summary section, the warnings and where the report is."""
    from pytest_specdecode.report import summary

    outputs, redactor = run.outputs, run.redactor
    lines = redactor.lines(summary.render(outputs.report(), outputs.gate_lines))
    if lines:
        terminalreporter.section("dflash summary")
        for line in lines:
            terminalreporter.write_line(line)
    if run.controller and any(r.coding for r in run.results.ordered()):
        run.notices.sandbox()  # under xdist the controller collects nothing: say it here
    if run.controller and run.settings.control == "local" and run.results.ordered():
        run.notices.untracked(terminalreporter)
    path, copy = outputs.report_path, outputs.report_copy
    if run.controller and runs_tests(terminalreporter.config):
        for line in redactor.lines(sweep_notes(outputs.report())):
            terminalreporter.write_line(f"dflash {line}")
    if path is not None and run.controller:
        kept = f" (this run's copy: {copy})" if copy is not None else ""
        terminalreporter.write_line(redactor(f"dflash report: {path}{kept}"))
    for note in redactor.lines(outputs.notes):
        terminalreporter.write_line(note)
