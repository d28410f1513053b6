"""What every part of the session reads off a collected item or a report: the config it
runs under, its kind, the definition it was generated from, its service."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_specdecode.config.spec import SpecConfig
from pytest_specdecode.service.manager import ServiceHandle

PARAM = "dflash_config"


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
    if "dflash_lossless" in getattr(item, "fixturenames", ()):
        return "lossless"  # the fixture makes it a lossless check, marker or not
    return "dflash"


def definition_id(item: pytest.Item) -> str:
    """The node id of the function an item was generated from (without its params)."""
    name = getattr(item, "originalname", None) or item.name
    return f"{item.parent.nodeid}::{name}" if item.parent is not None else item.nodeid


def case_of(item: pytest.Item) -> Any:
    """A throughput item's case (its ``dflash_case`` param)."""
    return item.callspec.params["dflash_case"]  # type: ignore[attr-defined]


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
            case = case_of(item)
            cases.setdefault(case.id, case)
    return list(cases.values())


def service_of(item: pytest.Item) -> ServiceHandle | None:
    handle = getattr(item, "funcargs", {}).get("dflash_service")
    return handle if isinstance(handle, ServiceHandle) else None


def skip_reason(report: pytest.TestReport) -> str:
    """A skipped report's reason (pytest keeps it as (path, line, "Skipped: why"))."""
    longrepr = report.longrepr
    if report.outcome != "skipped" or not isinstance(longrepr, tuple) or len(longrepr) != 3:
        return ""
    return str(longrepr[2]).removeprefix("Skipped: ")


def runs_tests(config: pytest.Config) -> bool:
    """False for --collect-only, --fixtures and --fixtures-per-test: nothing was asked to run,
    so no gate judges it and no sweep progress is shown."""
    return not any(
        config.getoption(name, False)
        for name in ("collectonly", "showfixtures", "show_fixtures_per_test")
    )


def terminal(config: pytest.Config) -> pytest.TerminalReporter | None:
    """pytest's terminal reporter, when the run has one."""
    reporter: pytest.TerminalReporter | None = config.pluginmanager.get_plugin("terminalreporter")
    return reporter
