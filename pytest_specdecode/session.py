"""The plugin's session object: collection-time config logic, results, gates.

Registered by :func:`pytest_specdecode.plugin.pytest_configure`, like
pytest-xdist's ``DSession``: hook methods stay short and call plain code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NoReturn

import pytest

from pytest_specdecode import gates, report, results
from pytest_specdecode.bench import LosslessBaseline
from pytest_specdecode.collection import ConfigResolver
from pytest_specdecode.config import ConfigError, SpecConfig, config_to_dict
from pytest_specdecode.lifecycle import ServiceHandle, ServiceManager
from pytest_specdecode.progress import Progress
from pytest_specdecode.settings import Settings

PARAM = "dflash_config"


class SpecDecodeSession:
    """Per-run state: resolved settings, services, collected results."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        # Everything that can reject the options comes first, before resources.
        self.resolver = ConfigResolver(settings)
        self._baseline_rows = _load_baseline(settings)
        self._fail_specs = _fail_specs(settings)
        self._meta = report.metadata(settings, cwd=config.rootpath)
        self.results = results.RunResults()
        self.lossless_baseline = LosslessBaseline()
        self.gate_lines: list[str] = []
        self.compare: dict[str, Any] | None = None
        self._problems: list[Any] | None = None
        self.progress = Progress.for_stderr(enabled=_is_controller(config))
        self.services = ServiceManager(
            settings, progress=self.progress, dialect=self.resolver.dialect
        )

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
                cases = self.resolver.cases(metafunc.definition.get_closest_marker("throughput"))
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
            from pytest_specdecode.ask import load_problems

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
                    (results.CONFIG, config.label()),
                    (results.CONFIG_DATA, config_to_dict(config)),
                    (results.KIND, item_kind(item)),
                ]
            )
        keyed.sort(key=lambda entry: (entry[0], entry[1]))
        items[:] = [item for _, _, item in keyed]

    # --- reporting --------------------------------------------------------

    def record_service(self, handle: ServiceHandle) -> None:
        """Keep the verified server's facts for the summary and report."""
        config = handle.config
        results_ = self.results.for_config(config.label(), config_to_dict(config))
        results_.service = handle.summary()

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        return self.services.header_lines()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.results.add(report.nodeid, report.when, report.outcome, report.user_properties)
        if report.when == "teardown":
            self._flush_messages()
            self.write_report()

    def report_data(self) -> dict[str, Any]:
        """The JSON report: metadata, per-config results, comparison, gates."""
        data = {**self._meta, **self.results.to_json()}
        data["compare"] = self.compare
        data["gates"] = {"failed": self.gate_lines}
        return data

    def write_report(self) -> None:
        path = self._report_path()
        if path is not None:
            report.write_atomic(path, self.report_data())

    def _flush_messages(self) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        for message in self.services.drain_messages():
            if reporter is not None and self.config.get_verbosity() > 0:
                reporter.write_line(f"[dflash] {message}")

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.services.shutdown()
        self._flush_messages()
        regressions = self._compare()
        self.gate_lines = gates.evaluate(self.settings, self.results, regressions)
        session.exitstatus = gates.exit_status(
            int(exitstatus), self.settings, self.results, self.gate_lines
        )
        self.write_report()

    def _compare(self) -> list[str]:
        if self._baseline_rows is None:
            return []
        from pytest_specdecode.throughput import compare

        current = [
            compare.CaseRow(
                key=t.key or t.case,
                fullname=t.key,
                case=t.case,
                config=r.label,
                tok_s=t.metrics.get("tok_s"),
                accept_length=t.metrics.get("accept_length"),
                extra_info=t.metrics,
            )
            for r in self.results.configs.values()
            for t in r.throughput.values()
        ]
        if not current:
            return []
        deltas = compare.pair(self._baseline_rows, current)
        self.compare = {
            "baseline": self.settings.compare,
            "table": compare.render_compare(deltas, "saved", "now"),
        }
        return compare.regressions(deltas, self._fail_specs)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        from pytest_specdecode import summary

        lines = summary.render(self.report_data(), self.gate_lines)
        if lines:
            terminalreporter.section("dflash summary")
            for line in lines:
                terminalreporter.write_line(line)
        path = self._report_path()
        if path is not None:
            terminalreporter.write_line(f"dflash report: {path}")

    def _report_path(self) -> Path | None:
        """Where the report goes; None when this run measured nothing of ours."""
        if not (self.settings.report and self.results.configs and _is_controller(self.config)):
            return None
        return self.config.rootpath / self.settings.report

    def pytest_unconfigure(self) -> None:
        self.services.shutdown()
        self.progress.close()


def item_config(item: pytest.Item) -> SpecConfig | None:
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


def _load_baseline(settings: Settings) -> list[Any] | None:
    """The saved pytest-benchmark run to compare with; a bad one is a usage error."""
    if not settings.compare:
        if settings.compare_fail:
            raise ConfigError("--dflash-compare-fail needs --dflash-compare PATH|NNNN")
        return None
    from pytest_specdecode.throughput import compare

    try:
        return compare.load_run(compare.find_saved_run(settings.compare))
    except compare.CompareError as exc:
        raise ConfigError(f"--dflash-compare: {exc}") from None


def _fail_specs(settings: Settings) -> list[Any]:
    import argparse

    from pytest_specdecode.throughput import compare

    try:
        return [compare.parse_fail_spec(text) for text in settings.compare_fail]
    except argparse.ArgumentTypeError as exc:
        raise ConfigError(f"--dflash-compare-fail: {exc}") from None


def _is_controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput")
