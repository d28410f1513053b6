"""A config's objective, read from the run's report, and whether it is feasible.

The objective is the geometric mean over the config's throughput cases of
the metric: ``speedup`` (baseline TPOT / config TPOT, :mod:`..report.verdict`)
or ``tok_s`` (output tokens per second, the mean over rounds). Its interval
is the geometric mean of the cases' 95% bounds (a bound that is not positive
leaves the interval open on that side). A config is infeasible when it
failed any gate (pass rate, lossless, accept floor: :func:`gates.config_failures`),
its server did not come up or died, a test of it failed, or a case had
request errors: whatever its speed.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pytest_specdecode.report import verdict
from pytest_specdecode.report.model import (
    ConfigResults,
    Ratio,
    Report,
    RoundSummary,
    ThroughputRecord,
)
from pytest_specdecode.search.optimizer import Measured
from pytest_specdecode.throughput.metrics import TOK_S


def _config(report: Report, key: str) -> ConfigResults | None:
    """The config with canonical ``key`` in ``report``, if it has results."""
    return next((c for c in report.configs if c.key == key), None)


def measure(
    report: Report, key: str, metric: str, excluded: Mapping[str, Sequence[str]]
) -> Measured:
    """The objective of the config with canonical ``key`` in ``report``."""
    if metric not in READERS:  # not the user's doing: the option's choices are these
        raise ValueError(f"no search metric {metric!r}: one of {', '.join(READERS)}")
    config = _config(report, key)
    if config is None:
        return Measured(None, feasible=False, reasons=("no results",))
    reasons = list(excluded.get(config.label, ()))
    if config.server_died:
        reasons.append("server died")
    failed = [t.nodeid for t in report.tests if t.config_key == key and t.outcome == "failed"]
    if failed and "server not ready" not in reasons:
        reasons.append(f"{len(failed)} failed test(s)")
    figures = []
    for case in config.throughput:
        if case.metrics.errors:
            reasons.append(f"request errors in {case.case}")
        elif (found := _figure(*READERS[metric](case))) is not None:
            figures.append(found)
    if not figures:
        return Measured(None, feasible=False, reasons=(*reasons, f"no {metric} measured"))
    values, lows, highs = zip(*figures, strict=True)
    return Measured(
        _geo(values), _geo(lows), _geo(highs), feasible=not reasons, reasons=tuple(reasons)
    )


def seconds_of(report: Report, key: str) -> float | None:
    """What the config with canonical ``key`` took: its restart (``ready_seconds`` of a
    start this run made) plus its tests' measurement (their call seconds); None when
    nothing of it ran."""
    config = _config(report, key)
    # The server's facts are service/'s open record.
    service = config.service if config is not None else {}
    start = _number(service.get("ready_seconds")) if service.get("restarted") else None
    calls = [
        d
        for t in report.tests
        if t.config_key == key and t.when == "call" and (d := _number(t.duration)) is not None
    ]
    if start is None and not calls:
        return None
    return max(0.0, start or 0.0) + sum(max(0.0, d) for d in calls)


def cases_of(report: Report, key: str) -> int:
    """How many throughput cases the config with canonical ``key`` has measured so far."""
    config = _config(report, key)
    return len(config.throughput) if config is not None else 0


Reading = tuple[float | None, Ratio | RoundSummary | None]
"""What a case gives for a metric: its value and its interval (both as the report has them)."""


def _speedup(case: ThroughputRecord) -> Reading:
    found = case.speedup.tpot if case.speedup is not None else None
    return (found.value if found is not None else None), found


def _tok_s(case: ThroughputRecord) -> Reading:
    return verdict.mean(case.metrics, TOK_S), case.metrics.interval(TOK_S)


READERS: dict[str, Callable[[ThroughputRecord], Reading]] = {"speedup": _speedup, "tok_s": _tok_s}
"""What each ``--dflash-search-metric`` (the option's names, not the figures') reads of a
throughput case."""


def _figure(
    value: float | None, found: Ratio | RoundSummary | None
) -> tuple[float, float | None, float | None] | None:
    if value is None or not value > 0:
        return None
    if found is None:
        return float(value), None, None
    return float(value), _number(found.low), _number(found.high)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _geo(values: Sequence[float | None]) -> float | None:
    usable = [v for v in values if v is not None and v > 0]
    return statistics.geometric_mean(usable) if usable and len(usable) == len(values) else None
