"""The plugin's session object: the parts of a run, composed, and the hooks that
call them.

Registered by :func:`pytest_specdecode.plugin.pytest_configure`, like
pytest-xdist's ``DSession``: hook methods stay short and call the parts, each
with one job: the target and its header (:mod:`.target`), the collection
(:mod:`.collect`), the resume (:mod:`.resume_state`), each test's guard
(:mod:`.running`), the sweep's progress (:mod:`.sweep`), the calibration
(:mod:`.calibrate`), the warnings (:mod:`.notices`), what the collection
tells the terminal (:mod:`.collected`) and the end of the run (:mod:`.finish`).
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any

import pytest

from pytest_specdecode.config.settings import Settings
from pytest_specdecode.distributed import worker_side
from pytest_specdecode.distributed.shared_files import worker_lease_dir
from pytest_specdecode.output import redact
from pytest_specdecode.output.progress import Progress
from pytest_specdecode.report import gates, results
from pytest_specdecode.report.outputs import RunOutputs
from pytest_specdecode.service.signals import TermAsInterrupt
from pytest_specdecode.session import collected, finish
from pytest_specdecode.session.calibrate import Calibrating
from pytest_specdecode.session.collect import Collection
from pytest_specdecode.session.items import skip_reason, terminal
from pytest_specdecode.session.notices import Notices
from pytest_specdecode.session.resume_state import ResumeState
from pytest_specdecode.session.running import Running
from pytest_specdecode.session.sweep import Sweep
from pytest_specdecode.session.target import Target, verbose_header_lines
from pytest_specdecode.throughput.runner import LosslessBaseline


class SpecDecodeSession:
    """Per-run state: resolved settings, services, collected results."""

    def __init__(self, config: pytest.Config, settings: Settings, *, late: bool = False) -> None:
        self.config = config
        self.settings = settings
        self.controller = not hasattr(config, "workerinput")
        # Started at the first test that needs a config (inert.py), after pytest wrote
        # its header: its header lines follow the collection (write_header).
        self.header_due = late
        # One redactor for every sink: what one part learns (a key on a launch
        # line), all of them mask.
        self.redactor = redact.for_settings(settings)
        # Everything that can reject the options comes first, before resources.
        self.collection = Collection(config, settings)
        self.results = results.RunResults()
        self.pytest_session: pytest.Session | None = None  # set at pytest_sessionfinish
        self.outputs = RunOutputs(settings, self.results, config.rootpath, redactor=self.redactor)
        self.outputs.problem_set = self.collection.problem_set
        # Under xdist the baseline goes to the directory the controller shares.
        self.lossless_baseline = LosslessBaseline(worker_lease_dir(config))
        self.calibrating = Calibrating(config, settings, self.outputs)
        self.notices = Notices(config, settings)
        self.target = Target(config, settings)
        self.resume = ResumeState.for_run(
            config, settings, self.collection.problem_set, self.results
        )
        # -qq: no progress lines at all (errors still say what happened).
        shown = self.controller and config.get_verbosity() > -2
        self.progress = Progress.for_stderr(enabled=shown, redact=self.redactor)
        self.sweep = Sweep(config, self.results, self.progress, self.target, self.collection)
        self.services = self.target.services(
            self.progress, self.collection.resolver.dialect, self.redactor
        )
        if self.resume is not None:
            self.target.share_resume(self.resume.path)
        self.running = Running(
            settings, self.collection, self.services, self.lossless_baseline, self.outputs
        )
        # A cancelled CI job (SIGTERM) stops what was started, as Ctrl-C does.
        self.term = TermAsInterrupt()
        self.term.install()

    def holds_host_alone(self) -> bool:
        """On an xdist worker: whether no other worker can load its server (throughput
        cases are then measured without pytest-benchmark, which is off under xdist)."""
        return worker_side.holds_host_alone(self.config, self.settings, self.services.target)

    # --- collection -------------------------------------------------------

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        # A bad marker or source marks only its own test invalid (it errors at setup,
        # before any fixture runs); the other tests of the module still run.
        self.collection.generate(metafunc)
        if self.collection.configured:
            self.outputs.ours = True  # an interrupt from here on still writes the report

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.collection.order(items, self.lossless_baseline)
        if self.resume is not None:
            self.resume.deselect(items, self.lossless_baseline)

    @pytest.hookimpl(tryfirst=True)  # before xdist's worker reports the collection
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collection.finish(session.items)
        collected.write(self, session.items)

    # --- running ----------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool | None:
        # A dry run ends after the plan: no test runs, so no server is touched.
        if self.settings.dry_run:
            return True
        self.calibrating.before_run(session.items, self.services.base_url)
        return None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        self.running.await_baseline(item)

    def pytest_collectstart(self) -> None:
        self.outputs.phase = "collection"

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.running.starting(nodeid)

    @pytest.hookimpl(tryfirst=True)
    def pytest_keyboard_interrupt(self) -> None:
        self.term.interrupted = self.term.interrupted or "KeyboardInterrupt"

    # Innermost of the wrappers: pytest's own (logging, capture) have set up when a bad
    # marker fails here, however late the session was registered (inert.py).
    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Iterator[None]:
        yield from self.running.setup(item)

    # --- reporting --------------------------------------------------------

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        # Every report is masked outside this wrapper, by the redact.ReportScrubber
        # plugin.py registers after the session.
        report = yield
        self.running.note_death(item, call, report)
        return report

    @pytest.hookimpl(optionalhook=True)
    def pytest_benchmark_update_json(self, output_json: dict[str, Any]) -> None:
        from pytest_specdecode.report.benchmark_json import jsonable_params

        jsonable_params(output_json)  # SpecConfig(...) as JSON, not UNSERIALIZABLE[...]
        self.redactor.value_in_place(output_json)

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        verbose = config.get_verbosity() > 0
        return self.redactor.lines(
            verbose_header_lines(self.settings, self.services.base_url, verbose)
        )

    def write_header(self) -> None:
        """The header lines of a session started after pytest wrote its header."""
        self.header_due = False
        reporter = terminal(self.config)
        quiet = self.config.get_verbosity() < 0 or self.config.getoption("no_header", False)
        if reporter is None or not self.controller or quiet:
            return
        for line in self.pytest_report_header(self.config):
            reporter.write_line(line)

    def carry_from_workers(self) -> None:
        """On the xdist controller: take in what the workers' resume carried (once)."""
        if self.resume is not None:
            self.resume.carry_from_workers()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.carry_from_workers()
        self.results.add(
            report.nodeid, report.when, report.outcome, report.user_properties, report.duration
        )
        self.results.note_selected(
            report.keywords, report.nodeid, report.when, report.outcome, skip_reason(report)
        )
        if self.controller:
            self.sweep.report(report)
        if report.when == "teardown":
            self.lossless_baseline.done(report.nodeid)
            self.flush_messages()
            if self.controller:
                self.outputs.update()

    def flush_messages(self) -> None:
        """The services' messages, shown with -v."""
        reporter = terminal(self.config)
        for message in self.services.drain_messages():
            if reporter is not None and self.config.get_verbosity() > 0:
                reporter.write_line(self.redactor(f"[dflash] {message}"))

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.pytest_session = session
        finish.session_finish(self, session, exitstatus)

    # A wrapper, innermost: after pytest-benchmark's table (the verdict ends the run) and
    # also when pytest-benchmark's --benchmark-compare-fail raised there, which stops
    # pluggy before any later summary: that failure becomes a gate of the run.
    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_terminal_summary(
        self, terminalreporter: pytest.TerminalReporter
    ) -> Generator[None, None, None]:
        try:
            yield
        except Exception as exc:
            outcome = gates.benchmark_regression(exc)
            if outcome is None:
                raise
            finish.benchmark_failed(self, outcome)
        finish.summary(self, terminalreporter)

    def pytest_unconfigure(self) -> None:
        try:
            self.services.shutdown()
            self.progress.close()
        finally:
            self.term.restore()
