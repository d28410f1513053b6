"""A config's objective, read from the run's report dict, and whether it is feasible.

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
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pytest_specdecode.report import verdict
from pytest_specdecode.search.optimizer import Measured
from pytest_specdecode.throughput.metrics import TOK_S


def measure(
    report: Mapping[str, Any], key: str, metric: str, excluded: Mapping[str, Sequence[str]]
) -> Measured:
    """The objective of the config with canonical ``key`` in ``report``."""
    if metric not in READERS:  # not the user's doing: the option's choices are these
        raise ValueError(f"no search metric {metric!r}: one of {', '.join(READERS)}")
    config = next((c for c in report.get("configs") or [] if c.get("key") == key), None)
    if config is None:
        return Measured(None, feasible=False, reasons=("no results",))
    reasons = list(excluded.get(str(config.get("label")), ()))
    if config.get("server_died"):
        reasons.append("server died")
    failed = [
        t["nodeid"]
        for t in report.get("tests") or []
        if t.get("config_key") == key and t.get("outcome") == "failed"
    ]
    if failed and "server not ready" not in reasons:
        reasons.append(f"{len(failed)} failed test(s)")
    values: list[float] = []
    lows: list[float | None] = []
    highs: list[float | None] = []
    for case in config.get("throughput") or []:
        metrics = case.get("metrics") or {}
        if metrics.get("errors"):
            reasons.append(f"request errors in {case.get('case')}")
            continue
        found = _figure(*READERS[metric](case))
        if found is None:
            continue
        values.append(found[0])
        lows.append(found[1])
        highs.append(found[2])
    if not values:
        return Measured(None, feasible=False, reasons=(*reasons, f"no {metric} measured"))
    return Measured(
        _geo(values), _geo(lows), _geo(highs), feasible=not reasons, reasons=tuple(reasons)
    )


def seconds_of(report: Mapping[str, Any], key: str) -> float | None:
    """What the config with canonical ``key`` took: its restart (``ready_seconds`` of a
    start this run made) plus its tests' measurement (their call seconds); None when
    nothing of it ran."""
    config = next((c for c in report.get("configs") or [] if c.get("key") == key), None)
    service = (config or {}).get("service") or {}
    start = _number(service.get("ready_seconds")) if service.get("restarted") else None
    calls = [
        d
        for t in report.get("tests") or []
        if t.get("config_key") == key
        and t.get("when") == "call"
        and (d := _number(t.get("duration"))) is not None
    ]
    if start is None and not calls:
        return None
    return max(0.0, start or 0.0) + sum(max(0.0, d) for d in calls)


def cases_of(report: Mapping[str, Any], key: str) -> int:
    """How many throughput cases the config with canonical ``key`` has measured so far."""
    config = next((c for c in report.get("configs") or [] if c.get("key") == key), None)
    return len((config or {}).get("throughput") or [])


Reading = tuple[Any, Any]
"""What a case gives for a metric: its value and its interval (both as the report has them)."""


def _speedup(case: Mapping[str, Any]) -> Reading:
    found = (case.get("speedup") or {}).get(verdict.SPEEDUP_TPOT)
    return (found or {}).get("value"), found


def _tok_s(case: Mapping[str, Any]) -> Reading:
    metrics = case.get("metrics") or {}
    return verdict.mean(metrics, TOK_S), (metrics.get("intervals") or {}).get(TOK_S)


READERS: dict[str, Callable[[Mapping[str, Any]], Reading]] = {"speedup": _speedup, "tok_s": _tok_s}
"""What each ``--dflash-search-metric`` (the option's names, not the figures') reads of a
throughput case."""


def _figure(value: Any, found: Any) -> tuple[float, float | None, float | None] | None:
    if not isinstance(value, (int, float)) or not value > 0:
        return None
    found = found if isinstance(found, Mapping) else {}
    return float(value), _number(found.get("low")), _number(found.get("high"))


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _geo(values: Sequence[float | None]) -> float | None:
    if not values or any(v is None or v <= 0 for v in values):
        return None
    return math.exp(sum(math.log(v) for v in values if v is not None) / len(values))
