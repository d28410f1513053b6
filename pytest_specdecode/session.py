"""The plugin's session object: collection-time config logic, results, gates.

Registered by :func:`pytest_specdecode.plugin.pytest_configure`, like
pytest-xdist's ``DSession``: hook methods stay short and call plain code.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_specdecode import records, redact
from pytest_specdecode.config.collection import ConfigResolver
from pytest_specdecode.config.settings import Settings
from pytest_specdecode.config.spec import ConfigError, SpecConfig, config_to_dict
from pytest_specdecode.distributed import run, shared_files, worker_side
from pytest_specdecode.distributed.controller import start_controller
from pytest_specdecode.errors import SweepOverrideWarning
from pytest_specdecode.progress import Progress
from pytest_specdecode.report import gates, results
from pytest_specdecode.report.outputs import RunOutputs
from pytest_specdecode.report.sweep_progress import SweepProgress, describe, duration
from pytest_specdecode.report.sweep_progress import notes as sweep_notes
from pytest_specdecode.service.checks import live_config
from pytest_specdecode.service.manager import ServiceHandle, ServiceManager
from pytest_specdecode.service.signals import TermAsInterrupt
from pytest_specdecode.throughput import calibration
from pytest_specdecode.throughput.runner import LosslessBaseline
from pytest_specdecode.throughput.workload import marker_cases

if TYPE_CHECKING:
    # Imported when used: a run without coding tests or --dflash-resume never loads them.
    from pytest_specdecode.coding.problem import Problem
    from pytest_specdecode.report.resume import Resume

PARAM = "dflash_config"
OK, TESTS_FAILED, INTERRUPTED = 0, 1, 2


class SpecDecodeSession:
    """Per-run state: resolved settings, services, collected results."""

    def __init__(self, config: pytest.Config, settings: Settings, *, late: bool = False) -> None:
        self.config = config
        self.settings = settings
        # Started at the first test that needs a config (inert.py), after pytest wrote
        # its header: its header lines follow the collection (write_header).
        self.header_due = late
        # One redactor for every sink: what one part learns (a key on a launch
        # line), all of them mask.
        self.redactor = redact.for_settings(settings)
        # Everything that can reject the options comes first, before resources.
        self.resolver = ConfigResolver(settings, live=self._live_reader(settings))
        self.results = results.RunResults()
        self._session: pytest.Session | None = None  # set at pytest_sessionfinish
        self.outputs = RunOutputs(settings, self.results, config.rootpath, redactor=self.redactor)
        self.outputs.problem_set = self.problem_set
        info = getattr(config, "workerinput", None) or {}
        # Under xdist the baseline goes to the directory the controller shares.
        shared = info.get(shared_files.LEASE_DIR)
        self.lossless_baseline = LosslessBaseline(Path(shared) if shared else None)
        # The load client's null-server figures, once calibrated: a throughput round run
        # on a loaded machine is measured again against them.
        self.calibration: calibration.Calibration | None = None
        self._problems: list[Problem] | None = None
        # Tests whose marker or source is bad, by definition node id: their error line.
        self.invalid: dict[str, str] = {}
        self.controller = not hasattr(config, "workerinput")
        self._sandbox_warned = False
        if settings.sandbox == "require":
            from pytest_specdecode.coding.sandbox import require_bwrap

            require_bwrap()  # a SettingsError: a usage error when bubblewrap cannot run
        # A dry run plans here, in this process: no workers, no servers.
        # A search chooses each config from the last one's figures: with fewer than two
        # hosts for the workers it runs here too, serially (search/loop.py says so).
        parallel = run.parallel_hosts(config, settings) > 1
        serial = settings.dry_run or (bool(settings.search) and not parallel)
        self.dry_workers = run.serial_for_dry_run(config) if serial else 0
        run.check_options(config, settings)
        self.resume = self._load_resume(shared) if settings.resume else None
        self._carried: dict[SpecConfig, tuple[int, int]] = {}  # config -> (carried, tests)
        self._planned: dict[str, int] = {}  # config key -> tests to run (serially)
        self._sweep_planned = False
        self._items: dict[str, pytest.Item] = {}
        # -qq: no progress lines at all (errors still say what happened).
        shown = self.controller and config.get_verbosity() > -2
        self.progress = Progress.for_stderr(enabled=shown, redact=self.redactor)
        self.sweep = SweepProgress(parallel=run.parallel_hosts(config, settings))
        bound = worker_side.worker_lease(config, settings)
        # A session started late in the xdist controller: the workers already have the
        # lease directory and port of the controller plugin made at configure (inert.py).
        shared_with = run.controller_of(config)
        self.services = ServiceManager(
            settings,
            progress=self.progress,
            dialect=self.resolver.dialect,
            root=config.rootpath,
            target=bound.host if bound else None,
            port=bound.port if bound else shared_with.port if shared_with else None,
            lease=bound.lease if bound else None,
            placement=bound.placement if bound else None,
            lease_for=bound.lease_for if bound else None,
            redactor=self.redactor,
        )
        controller = start_controller(config, settings, self.services.port)
        if controller is not None and self.resume is not None:
            # The workers read this copy, whatever happens next.
            shared_files.share_resume(controller.lease_dir, self.resume.path)
        # A cancelled CI job (SIGTERM) stops what was started, as Ctrl-C does.
        self.term = TermAsInterrupt()
        self.term.install()

    def _live_reader(self, settings: Settings) -> Callable[[], SpecConfig | None] | None:
        """External mode (a dry run contacts nothing): what the live server runs."""
        if settings.control != "external" or settings.dry_run:
            return None
        return lambda: live_config(settings, self.resolver.dialect)

    def _load_resume(self, shared: str | None) -> Resume:
        from pytest_specdecode.report.resume import Resume

        # Workers read the copy the controller made before any test rewrote the report.
        copy = shared_files.shared_resume(Path(shared)) if shared else None
        path = copy or self.settings.resume or ""
        return Resume.load(path, self.settings, self.config.rootpath, self.problem_set)

    def holds_host_alone(self) -> bool:
        """On an xdist worker: whether no other worker can load its server (throughput
        cases are then measured without pytest-benchmark, which is off under xdist)."""
        return worker_side.holds_host_alone(self.config, self.settings, self.services.target)

    def problem_set(self) -> dict[str, str] | None:
        """The run's problems by name and definition digest (for --dflash-resume); None
        when they do not load (their collection error says why)."""
        from pytest_specdecode.report.json_report import problem_set

        try:
            return problem_set(self.problems())
        except ConfigError:
            return None

    # --- collection -------------------------------------------------------

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        # A bad marker or source marks only its own test invalid (it errors at setup,
        # before any fixture runs); the other tests of the module still run.
        try:
            if PARAM in metafunc.fixturenames:
                self._parametrize_config(metafunc)
            elif metafunc.definition.get_closest_marker("dflash") is not None:
                raise ConfigError(
                    "has @pytest.mark.dflash but uses no dflash fixture; request "
                    "dflash_service (or dflash_client) so the server runs that config"
                )
            if "dflash_problem" in metafunc.fixturenames:
                problems = self.problems()
                ids = [p.name for p in problems]
                metafunc.parametrize("dflash_problem", problems, ids=ids, indirect=True)
            if "dflash_case" in metafunc.fixturenames:
                marker = metafunc.definition.get_closest_marker("throughput")
                cases = marker_cases(dict(marker.kwargs) if marker else {}, self.settings)
                ids = [c.id for c in cases]
                metafunc.parametrize("dflash_case", cases, ids=ids, indirect=True)
        except ConfigError as exc:
            self.invalid[metafunc.definition.nodeid] = f"{metafunc.definition.nodeid}: {exc}"

    def _parametrize_config(self, metafunc: pytest.Metafunc) -> None:
        marker = metafunc.definition.get_closest_marker("dflash")
        if marker is not None and marker.args:
            raise ConfigError("@pytest.mark.dflash takes keyword arguments only")
        try:
            found, in_id = self.resolver.configs(dict(marker.kwargs) if marker else None)
        except ConfigError as exc:
            raise ConfigError(f"bad dflash config: {exc}") from None
        ids = [c.test_id() if in_id else pytest.HIDDEN_PARAM for c in found]
        metafunc.parametrize(PARAM, found, indirect=True, ids=ids, scope="session")
        self.outputs.ours = True  # an interrupt from here on still writes the report
        # Once per test (metafunc is per definition).
        warning = self.resolver.sweep_overrides(dict(marker.kwargs) if marker else None)
        if warning:
            node = metafunc.definition
            node.warn(SweepOverrideWarning(f"{node.nodeid}: {warning}"))

    def problems(self) -> list[Problem]:
        """The run's coding problems, loaded once; a bad source is a :class:`ConfigError`."""
        if self._problems is None:
            from pytest_specdecode.coding.runner import load_problems

            try:
                self._problems = load_problems(self.settings, self.config)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
        return self._problems

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        # pytest groups session-scoped params by index, not value (9.0/9.1), and
        # only best-effort: sort ourselves so each config is applied once.
        order: dict[SpecConfig, int] = {}
        keyed: list[tuple[int, int, pytest.Item]] = []
        for position, item in enumerate(items):
            config = item_config(item)
            if config is None:
                keyed.append((-1, position, item))
                continue
            # The non-speculative baseline runs first: the lossless check needs it.
            rank = order.setdefault(config, len(order)) + (
                0 if config.algorithm == "NONE" else 1 << 20
            )
            keyed.append((rank, position, item))
            if config.algorithm == "NONE" and item_kind(item) == "lossless":
                self.lossless_baseline.expected.add(item.nodeid)
            item.user_properties.extend(
                [
                    (records.CONFIG, config.label()),
                    (records.CONFIG_KEY, config.key()),
                    (records.CONFIG_DATA, config_to_dict(config)),
                    (records.KIND, item_kind(item)),
                ]
            )
        keyed.sort(key=lambda entry: (entry[0], entry[1]))
        items[:] = [item for _, _, item in keyed]
        self._items = {item.nodeid: item for item in items}
        self.lossless_baseline.speedup_cases = speedup_cases(items)
        if self.resume is not None:
            self._resume_from(items)

    def _resume_from(self, items: list[pytest.Item]) -> None:
        """Deselect the tests the resumed report has results for; carry those results."""
        assert self.resume is not None
        listed = []
        for item in items:
            config = item_config(item)
            listed.append(
                (item.nodeid, item_kind(item), bool(config and config.algorithm == "NONE"))
            )
        carried = self.resume.plan(listed)
        for item in items:
            if (config := item_config(item)) is not None:
                done, total = self._carried.get(config, (0, 0))
                self._carried[config] = (done + (item.nodeid in carried), total + 1)
        gone = [item for item in items if item.nodeid in carried]
        if gone:
            self.config.hook.pytest_deselected(items=gone)
            items[:] = [item for item in items if item.nodeid not in carried]
        self.lossless_baseline.expected -= carried
        if self.controller:
            left = {c.key() for item in items if (c := item_config(item)) is not None}
            self.resume.carry_into(self.results, left)
        else:
            shared_files.write_carried(self.config, sorted(carried))

    @pytest.hookimpl(tryfirst=True)  # before xdist's worker reports the collection
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # For the xdist controller's scheduler: one config at a time per host.
        groups = {i.nodeid: run.config_key(c) for i in session.items if (c := item_config(i))}
        shared_files.write_groups(self.config, groups)
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None and self.controller:
            # Shown at collection too, so --collect-only tells about them.
            for message in self.invalid.values():
                reporter.write_line(f"dflash: collection error: {message}", red=True)
            if self.resolver.live is not None:
                reporter.write_line(
                    f"dflash: the live server runs {self.resolver.live.label()}: tests without "
                    "a config of their own run under it (--dflash-restart=never)"
                )
        if any(item_kind(item) == "coding" for item in session.items) and self.controller:
            self._warn_sandbox()
        self._planned = {}
        for item in session.items:
            if (config := item_config(item)) is not None:
                self._planned[config.key()] = self._planned.get(config.key(), 0) + 1
        if self.resume is not None and reporter is not None and self.controller:
            whole = sum(done == total for done, total in self._carried.values())
            for line in self.resume.refusal_lines():
                reporter.write_line(line, yellow=True)
            reporter.write_line(self.resume.note(whole, len(session.items)))
        if self.settings.dry_run and reporter is not None:
            reporter.section("dflash dry run")
            for line in self._dry_run(session.items):
                reporter.write_line(line)

    def _dry_run(self, items: list[pytest.Item]) -> list[str]:
        from pytest_specdecode.service.dryrun import Planned, plan_lines

        counts: dict[SpecConfig, int] = {}
        for item in items:
            if (config := item_config(item)) is not None:
                counts[config] = counts.get(config, 0) + 1
        planned = [Planned(config, n) for config, n in counts.items()]
        whole = [Planned(c, n, carried=True) for c, (done, n) in self._carried.items() if done == n]
        planned = whole + planned
        lines = plan_lines(
            self.settings,
            self.resolver.dialect,
            planned,
            workers=self.dry_workers,
            port=self.services.port,
            invalid=self.invalid,
            redactor=self.redactor,
        )
        return self.redactor.lines(lines)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool | None:
        # A dry run ends after the plan: no test runs, so no server is touched.
        if self.settings.dry_run:
            return True
        self._calibrate(session.items)
        return None

    def _calibrate(self, items: list[pytest.Item]) -> None:
        """The load client's null-server ceiling, before the first throughput case (only
        in a run that has one: under xdist the controller collects nothing, so no)."""
        if self.settings.client_calibration == "off" or not _runs_tests(self.config):
            return
        cases = [
            i.callspec.params["dflash_case"]  # type: ignore[attr-defined]
            for i in items
            if item_kind(i) == "throughput"
        ]
        concurrencies = calibration.case_concurrencies(cases)
        if not concurrencies:
            return
        found = calibration.calibrate(concurrencies, max(c.max_tokens for c in cases))
        self.outputs.calibration = found.to_json()
        self.calibration = found
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(calibration.summary_line(found))

    def _warn_sandbox(self) -> None:
        """Say once per run what the fallback sandbox cannot protect (if it is used)."""
        from pytest_specdecode.coding import sandbox_warning

        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        warning = sandbox_warning(self.settings.sandbox)
        if warning and reporter is not None and not self._sandbox_warned:
            reporter.write_line(f"dflash: WARNING: {warning}", yellow=True)
        self._sandbox_warned = True

    def _warn_untracked(self, reporter: pytest.TerminalReporter) -> None:
        """Say once where a launch's process that left its group may outlive the run."""
        from pytest_specdecode.lineage import untracked

        why = untracked()
        if why is not None:
            reporter.write_line(
                f"dflash: WARNING: {why}: a process of the launch that leaves its process "
                "group and clears its environment can outlive the run",
                yellow=True,
            )

    # --- running ----------------------------------------------------------

    def _await_baseline(self, item: pytest.Item) -> None:
        """A lossless check under xdist whose baseline another worker has not recorded
        yet waits for it, holding nothing, so that worker can bring the server to the
        baseline config meanwhile (serially the baseline tests run first)."""
        config = item_config(item)
        baseline = self.lossless_baseline
        if not (config and config.algorithm != "NONE" and item_kind(item) == "lossless"):
            return
        if baseline.directory is not None and baseline.expected and not baseline.load():
            baseline.wait(self.settings.ready_timeout + 300)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        self._await_baseline(item)

    def pytest_collectstart(self) -> None:
        self.outputs.phase = "collection"

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        config = item_config(self._items.get(nodeid))
        # Setup is where a config's server starts and its readiness is awaited.
        where = f" (its setup brings up {config.label()})" if config is not None else ""
        self.outputs.phase = f"test {nodeid}{where}"

    @pytest.hookimpl(tryfirst=True)
    def pytest_keyboard_interrupt(self) -> None:
        self.term.interrupted = self.term.interrupted or "KeyboardInterrupt"

    # Innermost of the wrappers: pytest's own (logging, capture) have set up when a bad
    # marker fails here, however late the session was registered (inert.py).
    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Iterator[None]:
        message = self.invalid.get(definition_id(item))
        if message is not None:
            # Before any fixture: the test's bad marker or source is its error.
            pytest.fail(f"collection error: {message}", pytrace=False)
        try:
            yield
        except BaseException:
            # A config that did not come up: where it was tried and how, for the report.
            config = item_config(item)
            log = self.services.start_log(config) if config is not None else None
            if log is not None:
                item.user_properties.append((records.SERVICE, log))
            raise
        handle = _service_of(item)
        if handle is None:
            return
        # The verified server's facts travel with the report (to the xdist controller too).
        item.user_properties.append((records.SERVICE, handle.summary()))
        # The counters the runners compare with before filing figures; a server already
        # seen replaced fails the config's remaining tests at once.
        handle.note_identity()
        if (changed := handle.known_change()) is not None:
            pytest.fail(changed, pytrace=False)
        gone = handle.gone()
        if gone is not None:
            # Asking a dead server would count as a wrong answer: error at once instead.
            item.user_properties.append((records.DIED, gone.summary))
            pytest.fail(str(gone), pytrace=False)

    # --- reporting --------------------------------------------------------

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        handle = _service_of(item)
        if call.when == "call" and report.failed and handle is not None:
            gone = handle.gone(settle=2.0)
            if gone is not None:  # it died during this test
                report.user_properties.append((records.DIED, gone.summary))
        # Masked where the report is made, as the outermost wrapper (after every
        # other plugin changed it): the terminal, JUnit XML, xdist and every
        # other plugin only ever see the masked report.
        redact.scrub_report(report, self.redactor)
        return report

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_make_collect_report(
        self,
    ) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
        report = yield
        redact.scrub_report(report, self.redactor)
        return report

    @pytest.hookimpl(optionalhook=True)
    def pytest_benchmark_update_json(self, output_json: dict[str, Any]) -> None:
        from pytest_specdecode.report.benchmark_json import jsonable_params

        jsonable_params(output_json)  # SpecConfig(...) as JSON, not UNSERIALIZABLE[...]
        self.redactor.value_in_place(output_json)

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        lines = header_lines(self.settings, self.services.base_url)
        s = self.settings
        if config.get_verbosity() > 0 and s.control != "external":
            script = s.control == "script"
            command = s.restart_cmd if script else s.launch
            lines.append(f"dflash: {'restart command' if script else 'launch'} {command}")
        return self.redactor.lines(lines)

    def write_header(self) -> None:
        """The header lines of a session started after pytest wrote its header."""
        self.header_due = False
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        quiet = self.config.get_verbosity() < 0 or self.config.getoption("no_header", False)
        if reporter is None or not self.controller or quiet:
            return
        for line in self.pytest_report_header(self.config):
            reporter.write_line(line)

    def carry_from_workers(self) -> None:
        """On the xdist controller: take in what the workers' resume carried (once)."""
        self._carry_from_workers()

    def _carry_from_workers(self) -> None:
        """Under xdist the controller collects nothing: it carries what the workers deselected."""
        if self.resume is not None and self.controller and self.results.resumed_from is None:
            carried = shared_files.read_carried(self.config)
            if carried is not None:
                left = shared_files.planned_tests(self.config) or {}
                self.resume.carry_into(self.results, left, carried)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._carry_from_workers()
        self.results.add(
            report.nodeid, report.when, report.outcome, report.user_properties, report.duration
        )
        self.results.note_selected(
            report.keywords, report.nodeid, report.when, report.outcome, _skip_reason(report)
        )
        if self.controller:
            self._sweep_progress(report)
        if report.when == "teardown":
            self.lossless_baseline.done(report.nodeid)
            self._flush_messages()
            if self.controller:
                self.outputs.update()

    def _plan_sweep(self) -> None:
        if not self._sweep_planned:
            # Once: serially from the collection, under xdist from what the workers collected.
            self._sweep_planned = True
            tests = shared_files.planned_tests(self.config) or self._planned
            whole = {k for k, r in self.results.configs.items() if r.carried and r.carried["whole"]}
            self.sweep.plan(tests, dict.fromkeys(whole, 0))

    def _sweep_progress(self, report: pytest.TestReport) -> None:
        self._plan_sweep()
        props: dict[str, Any] = dict(report.user_properties)
        finished = self.sweep.report(
            report.nodeid,
            report.when,
            props.get(records.CONFIG_KEY),
            props.get(records.KIND),
            report.duration,
            props.get(records.SERVICE),
        )
        status = self.results.sweep = self.sweep.status()
        if finished:
            left = status["left_seconds"]
            self.progress.context = (
                f"{status['configs_done']}/{status['configs_total']} configs"
                + (f" | about {duration(left)} left" if left is not None else "")
            )
            self.progress.done(describe(status))

    def _flush_messages(self) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        for message in self.services.drain_messages():
            if reporter is not None and self.config.get_verbosity() > 0:
                reporter.write_line(self.redactor(f"[dflash] {message}"))

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self._session = session
        if self.outputs.phase is not None and not self.outputs.phase.startswith("cleanup"):
            self.outputs.phase = f"cleanup after {self.outputs.phase}"
        try:
            self.services.shutdown()
        except KeyboardInterrupt:
            # Ctrl-C again while stopping: the report is still written (unconfigure stops
            # what is left), and the run says it was interrupted.
            self.term.interrupted = self.term.interrupted or "KeyboardInterrupt"
        self._flush_messages()
        status = int(exitstatus)
        if self.term.interrupted and status in (OK, TESTS_FAILED):
            # A second interrupt can cut pytest short before it notes the first: never 0.
            status = INTERRUPTED
        if self.settings.dry_run:
            # Nothing was measured: no report, no gates; a bad config fails the plan.
            session.exitstatus = 1 if self.invalid and status == 0 else status
        elif self.controller and _runs_tests(session.config):
            if self.resume is not None:
                from pytest_specdecode.report.resume import exit_status

                self._carry_from_workers()
                status = exit_status(status, self.results)
            self._plan_sweep()
            if self.sweep.planned:
                self.results.sweep = self.sweep.status()
            try:
                session.exitstatus = self.outputs.finish(status)
            except KeyboardInterrupt:
                self.term.interrupted = self.term.interrupted or "KeyboardInterrupt"
                self.outputs.final.update(exitstatus=INTERRUPTED, interrupted=True)
                self.outputs.update()  # the report says so, whatever finish had done
                session.exitstatus = INTERRUPTED
        elif status != int(exitstatus):
            session.exitstatus = status

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
            self._benchmark_failed(outcome)
        self._summary(terminalreporter)

    def _benchmark_failed(self, outcome: gates.Outcome) -> None:
        if self.controller and self._session is not None and self.outputs.final:
            self._session.exitstatus = self.outputs.fail_after(outcome)
        elif self._session is not None and self._session.exitstatus == OK:
            self._session.exitstatus = TESTS_FAILED

    def _summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        from pytest_specdecode.report import summary

        lines = self.redactor.lines(summary.render(self.outputs.data(), self.outputs.gate_lines))
        if lines:
            terminalreporter.section("dflash summary")
            for line in lines:
                terminalreporter.write_line(line)
        if self.controller and any(r.coding for r in self.results.ordered()):
            self._warn_sandbox()  # under xdist the controller collects nothing: say it here
        if self.controller and self.settings.control == "local" and self.results.ordered():
            self._warn_untracked(terminalreporter)
        path, copy = self.outputs.report_path, self.outputs.report_copy
        if self.controller and _runs_tests(terminalreporter.config):
            for line in self.redactor.lines(sweep_notes(self.outputs.data())):
                terminalreporter.write_line(f"dflash {line}")
        if path is not None and self.controller:
            kept = f" (this run's copy: {copy})" if copy is not None else ""
            terminalreporter.write_line(self.redactor(f"dflash report: {path}{kept}"))
        for note in self.redactor.lines(self.outputs.notes):
            terminalreporter.write_line(note)

    def pytest_unconfigure(self) -> None:
        try:
            self.services.shutdown()
            self.progress.close()
        finally:
            self.term.restore()


def _skip_reason(report: pytest.TestReport) -> str:
    """A skipped report's reason (pytest keeps it as (path, line, "Skipped: why"))."""
    longrepr = report.longrepr
    if report.outcome != "skipped" or not isinstance(longrepr, tuple) or len(longrepr) != 3:
        return ""
    return str(longrepr[2]).removeprefix("Skipped: ")


def _runs_tests(config: pytest.Config) -> bool:
    """False for --collect-only, --fixtures and --fixtures-per-test: nothing was asked to run,
    so no gate judges it and no sweep progress is shown."""
    return not any(
        config.getoption(name, False)
        for name in ("collectonly", "showfixtures", "show_fixtures_per_test")
    )


def header_lines(settings: Settings, base_url: str) -> list[str]:
    """The run header: where the server is, how it is controlled, and the simulator note."""
    target = ", ".join(str(h) for h in settings.hosts) or "localhost"
    lines = [
        f"dflash: target {target} ({base_url}), control {settings.control}, "
        f"dialect {settings.dialect}, restart {settings.restart}"
    ]
    if settings.uses_simulator:
        lines.append(
            "dflash: using the bundled SGLang simulator: figures are simulated, not GPU results"
        )
        lines += [f"dflash: simulator default: {text}" for text in settings.sim_defaults]
    if settings.control == "systemd":
        lines.append(
            f"dflash: the systemd drop-in of {settings.unit} is removed at the end "
            "(--dflash-restore)"
            if settings.restore
            else f"dflash: the systemd drop-in of {settings.unit} (the last config) stays on "
            "the host after the run; --dflash-restore (ini dflash_restore = true) removes it"
        )
    return lines


def _service_of(item: pytest.Item) -> ServiceHandle | None:
    handle = getattr(item, "funcargs", {}).get("dflash_service")
    return handle if isinstance(handle, ServiceHandle) else None


def item_config(item: pytest.Item | None) -> SpecConfig | None:
    """The config a collected item runs under, if it uses the service."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    value = callspec.params.get(PARAM)
    return value if isinstance(value, SpecConfig) else None


def speedup_cases(items: list[pytest.Item]) -> list[Any]:
    """The throughput cases the lossless check's baseline measures for the speedup: all
    the run's, when it has a lossless baseline test and no throughput test under NONE."""
    configs = [(item_config(i), i) for i in items]
    if not any(c and c.algorithm == "NONE" and item_kind(i) == "lossless" for c, i in configs):
        return []
    cases: dict[str, Any] = {}
    for config, item in configs:
        if config is not None and item_kind(item) == "throughput":
            if config.algorithm == "NONE":
                return []  # the sweep measures its own baseline
            case = item.callspec.params["dflash_case"]  # type: ignore[attr-defined]
            cases.setdefault(case.id, case)
    return list(cases.values())


def item_kind(item: pytest.Item) -> str:
    callspec = getattr(item, "callspec", None)
    params = callspec.params if callspec is not None else {}
    if "dflash_problem" in params:
        return "coding"
    if "dflash_case" in params:
        return "throughput"
    if item.get_closest_marker("lossless") is not None:
        return "lossless"
    if "dflash_lossless" in getattr(item, "fixturenames", ()):
        return "lossless"  # the fixture makes it a lossless check, marker or not
    return "dflash"


def definition_id(item: pytest.Item) -> str:
    """The node id of the function an item was generated from (without its params)."""
    name = getattr(item, "originalname", None) or item.name
    return f"{item.parent.nodeid}::{name}" if item.parent is not None else item.nodeid
