"""The plugin's session object: collection-time config logic, results, gates.

Registered by :func:`pytest_specdecode.plugin.pytest_configure`, like
pytest-xdist's ``DSession``: hook methods stay short and call plain code.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any, NoReturn

import pytest

from pytest_specdecode import records
from pytest_specdecode.config.collection import ConfigResolver
from pytest_specdecode.config.settings import Settings
from pytest_specdecode.config.spec import ConfigError, SpecConfig, config_to_dict
from pytest_specdecode.progress import Progress
from pytest_specdecode.report import results
from pytest_specdecode.report.outputs import RunOutputs
from pytest_specdecode.service import xdist as distributed
from pytest_specdecode.service.manager import ServiceHandle, ServiceManager
from pytest_specdecode.service.signals import TermAsInterrupt
from pytest_specdecode.throughput.runner import LosslessBaseline
from pytest_specdecode.throughput.workload import marker_cases

PARAM = "dflash_config"


class SpecDecodeSession:
    """Per-run state: resolved settings, services, collected results."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        # Everything that can reject the options comes first, before resources.
        self.resolver = ConfigResolver(settings)
        self.results = results.RunResults()
        self.outputs = RunOutputs(settings, self.results, config.rootpath)
        self.lossless_baseline = LosslessBaseline()
        self._problems: list[Any] | None = None
        self.controller = not hasattr(config, "workerinput")
        distributed.check_options(config, settings)
        self.progress = Progress.for_stderr(enabled=self.controller)
        lease, target, port = distributed.worker_lease(config, settings) or (None, None, None)
        self.services = ServiceManager(
            settings,
            progress=self.progress,
            dialect=self.resolver.dialect,
            root=config.rootpath,
            target=target,
            port=port,
            lease=lease,
        )
        if distributed.is_xdist_controller(config):
            controller = distributed.XdistController(settings, self.services.port)
            config.pluginmanager.register(controller, "specdecode-xdist")
        # A cancelled CI job (SIGTERM) stops what was started, as Ctrl-C does.
        self.term = TermAsInterrupt()
        self.term.install()

    # --- collection -------------------------------------------------------

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if PARAM in metafunc.fixturenames:
            self._parametrize_config(metafunc)
        elif metafunc.definition.get_closest_marker("dflash") is not None:
            _collection_error(
                metafunc,
                "has @pytest.mark.dflash but uses no dflash fixture; request "
                "dflash_service (or dflash_client) so the server runs that config",
            )
        if "dflash_problem" in metafunc.fixturenames:
            problems = self.problems(metafunc)
            metafunc.parametrize(
                "dflash_problem", problems, ids=[p.name for p in problems], scope="function"
            )
        if "dflash_case" in metafunc.fixturenames:
            try:
                marker = metafunc.definition.get_closest_marker("throughput")
                cases = marker_cases(dict(marker.kwargs) if marker else {}, self.settings)
            except ConfigError as exc:
                _collection_error(metafunc, str(exc))
            metafunc.parametrize("dflash_case", cases, ids=[c.id for c in cases])

    def _parametrize_config(self, metafunc: pytest.Metafunc) -> None:
        marker = metafunc.definition.get_closest_marker("dflash")
        if marker is not None and marker.args:
            _collection_error(metafunc, "@pytest.mark.dflash takes keyword arguments only")
        try:
            found, in_id = self.resolver.configs(dict(marker.kwargs) if marker else None)
        except ConfigError as exc:
            _collection_error(metafunc, f"bad dflash config: {exc}")
        ids = [c.test_id() if in_id else pytest.HIDDEN_PARAM for c in found]
        metafunc.parametrize(PARAM, found, indirect=True, ids=ids, scope="session")

    def problems(self, metafunc: pytest.Metafunc) -> list[Any]:
        if self._problems is None:
            from pytest_specdecode.coding.runner import load_problems

            try:
                self._problems = load_problems(self.settings, self.config)
            except ValueError as exc:
                _collection_error(metafunc, str(exc))
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
            item.user_properties.extend(
                [
                    (records.CONFIG, config.label()),
                    (records.CONFIG_DATA, config_to_dict(config)),
                    (records.KIND, item_kind(item)),
                ]
            )
        keyed.sort(key=lambda entry: (entry[0], entry[1]))
        items[:] = [item for _, _, item in keyed]

    @pytest.hookimpl(tryfirst=True)  # before xdist's worker reports the collection
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # For the xdist controller's scheduler: one config at a time per host.
        groups = {
            i.nodeid: distributed.config_key(c) for i in session.items if (c := item_config(i))
        }
        distributed.write_groups(self.config, groups)
        if any(item_kind(item) == "coding" for item in session.items) and self.controller:
            from pytest_specdecode.coding import sandbox_warning

            warning = sandbox_warning()
            reporter = self.config.pluginmanager.get_plugin("terminalreporter")
            if warning and reporter is not None:
                reporter.write_line(f"dflash: WARNING: {warning}", yellow=True)

    # --- running ----------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Iterator[None]:
        yield
        handle = _service_of(item)
        if handle is None:
            return
        # The verified server's facts travel with the report (to the xdist controller too).
        item.user_properties.append((records.SERVICE, handle.summary()))
        gone = handle.gone()
        if gone is not None:
            # Asking a dead server would count as a wrong answer: error at once instead.
            item.user_properties.append((records.DIED, gone.summary))
            pytest.fail(str(gone), pytrace=False)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        handle = _service_of(item)
        if call.when == "call" and report.failed and handle is not None:
            gone = handle.gone(settle=2.0)
            if gone is not None:  # it died during this test
                report.user_properties.append((records.DIED, gone.summary))
        return report

    # --- reporting --------------------------------------------------------

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        return header_lines(self.settings, self.services.base_url)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.results.add(
            report.nodeid, report.when, report.outcome, report.user_properties, report.duration
        )
        if report.when == "teardown":
            self._flush_messages()
            if self.controller:
                self.outputs.update()

    def _flush_messages(self) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        for message in self.services.drain_messages():
            if reporter is not None and self.config.get_verbosity() > 0:
                reporter.write_line(f"[dflash] {message}")

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.services.shutdown()
        self._flush_messages()
        if self.controller:
            session.exitstatus = self.outputs.finish(int(exitstatus))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        from pytest_specdecode.report import summary

        lines = summary.render(self.outputs.data(), self.outputs.gate_lines)
        if lines:
            terminalreporter.section("dflash summary")
            for line in lines:
                terminalreporter.write_line(line)
        path = self.outputs.report_path
        if path is not None and self.controller:
            terminalreporter.write_line(f"dflash report: {path}")
        for note in self.outputs.notes:
            terminalreporter.write_line(note)

    def pytest_unconfigure(self) -> None:
        try:
            self.services.shutdown()
            self.progress.close()
        finally:
            self.term.restore()


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


def item_kind(item: pytest.Item) -> str:
    callspec = getattr(item, "callspec", None)
    params = callspec.params if callspec is not None else {}
    if "dflash_problem" in params:
        return "coding"
    if "dflash_case" in params:
        return "throughput"
    if item.get_closest_marker("lossless") is not None:
        return "lossless"
    return "dflash"


def _collection_error(metafunc: pytest.Metafunc, message: str) -> NoReturn:
    pytest.fail(f"{metafunc.definition.nodeid}: {message}", pytrace=False)
