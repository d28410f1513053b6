"""The break-even load: where each config's speedup crosses 1.0 as the load grows.

Speculative decoding pays at low load and can lose at high load, where
verifying drafts costs more than it saves; a team sets its server's batch
limits from the load where a config stops paying. With a NONE baseline and at
least two loads of one kind (concurrency ``cN`` or request rate ``rN``), each
config and domain gets one record:

- the speedup at each load: baseline TPOT / config TPOT (docs/metrics.md),
  the geometric mean over the load's contexts, as the verdict ranks; its 95%
  interval is the geometric mean of the contexts' interval bounds (exact when
  the contexts' errors move together, wider than needed otherwise);
- the crossing, interpolated linearly between the bracketing measured loads on
  log(load) against log(speedup); its interval is where the curves of the
  interval's low and high ends cross 1.0 (open-ended when one of them does not
  cross within the measured loads: "below c=1", "above c=32");
- with no crossing: "above 1.0 up to c=N" (the highest load measured) or
  "below 1.0 from c=N" (the lowest).

A curve may cross more than once (noise near 1.0, or a config that loses at
low load and wins at high load). The record reports the first crossing from
above 1.0 to below, scanning up in load (where the config stops paying); with
no such crossing, the first upward one; ``crossings`` counts them all.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence

import msgspec

from pytest_specdecode.report.model import BreakEven, ConfigResults, Report
from pytest_specdecode.report.verdict import case_shape

METHOD = (
    "speedup = baseline TPOT / config TPOT, geometric mean over contexts (interval: geometric "
    "mean of the contexts' 95% bounds); break-even interpolated linearly on log(load) against "
    "log(speedup) between the bracketing loads; its interval where the low and high bounds "
    "cross 1.0; with several crossings the first downward one (scanning up in load) is given"
)
KINDS = {"c": "concurrency", "r": "rate"}

Point = tuple[float, float, float | None, float | None]
"""(load, speedup, low, high) at one measured load."""


def parse_load(load: str) -> tuple[str, float] | None:
    """``c8`` -> ("c", 8.0); ``r4`` and ``r4-m8`` -> ("r", 4.0); None otherwise."""
    head = load.split("-", 1)[0]
    if head[:1] not in KINDS:
        return None
    try:
        value = float(head[1:])
    except ValueError:
        return None
    return (head[0], value) if value > 0 and math.isfinite(value) else None


def crossings(xs: Sequence[float], ys: Sequence[float]) -> list[tuple[float, str]]:
    """Where the piecewise-linear curve through (log x, log y) crosses y = 1.

    Returns (load, "down" | "up") in load order. A speedup of exactly 1.0 does
    not pay: it counts as below, so a curve touching 1.0 from above crosses there.
    """
    out: list[tuple[float, str]] = []
    points = [(x, math.log(x), math.log(y)) for x, y in zip(xs, ys, strict=True)]
    for (a, x0, y0), (b, x1, y1) in itertools.pairwise(points):
        if (y0 > 0) == (y1 > 0):
            continue
        at = math.exp(x0 + y0 / (y0 - y1) * (x1 - x0))
        # exp(log(x)) can land a rounding step outside [a, b] (8 -> 7.999...): clamp.
        out.append((min(max(at, min(a, b)), max(a, b)), "down" if y0 > 0 else "up"))
    return out


def _bound(xs: Sequence[float], ys: Sequence[float | None], direction: str, after: float | None,
           before: float | None) -> float | None:  # fmt: skip
    """The first crossing of ``direction`` of a bound curve within (after, before)."""
    if any(y is None or y <= 0 for y in ys):
        return None
    found = [x for x, d in crossings(xs, [float(y) for y in ys if y is not None]) if d == direction]
    if after is not None:
        found = [x for x in found if x >= after]
    if before is not None:
        found = [x for x in found if x <= before]
    return found[0] if found else None


def _shown(kind: str, value: float) -> str:
    text = f"{value:.1f}" if value < 10 else f"{value:.0f}"
    return f"{kind}={text.removesuffix('.0')}"


def record(label: str, domain: str, kind: str, points: Sequence[Point]) -> BreakEven:
    """One config's break-even record in one domain, from its points in load order."""
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    found = crossings(xs, ys)
    down = [c for c in found if c[1] == "down"]
    chosen = down[0] if down else (found[0] if found else None)
    base = BreakEven(
        config=label,
        domain=domain,
        load_kind=KINDS[kind],
        loads=xs,
        speedups=ys,
        lows=[p[2] for p in points],
        highs=[p[3] for p in points],
        crossings=len(found),
    )
    head = f"{label} {domain}:"
    if chosen is None:
        if all(y > 1.0 for y in ys):
            status, text = "above", f"above 1.0 up to {_shown(kind, xs[-1])}"
        else:
            status, text = "below", f"below 1.0 from {_shown(kind, xs[0])}"
        return msgspec.structs.replace(base, status=status, line=f"{head} speedup {text}")
    at, direction = chosen
    low, high, where = _interval(kind, xs, base.lows, base.highs, chosen)
    verb = "falls below" if direction == "down" else "rises above"
    text = f"speedup {verb} 1.0 at {_shown(kind, at)} (95% interval {where})"
    if len(found) > 1:
        first = "the first downward one" if down else "the first"
        text += f"; it crosses 1.0 {len(found)} times, {first} shown"
    return msgspec.structs.replace(
        base,
        status="crosses",
        break_even=at,
        low=low,
        high=high,
        direction=direction,
        line=f"{head} {text}",
    )


def _interval(
    kind: str,
    xs: Sequence[float],
    lows: Sequence[float | None],
    highs: Sequence[float | None],
    chosen: tuple[float, str],
) -> tuple[float | None, float | None, str]:
    """Where the interval's ends cross around the crossing ``chosen``, and its text."""
    at, direction = chosen
    # The speedup's low end crosses first when it falls, its high end first when it rises.
    early, late = (lows, highs) if direction == "down" else (highs, lows)
    low = _bound(xs, early, direction, None, at)
    high = _bound(xs, late, direction, at, None)
    start = _shown(kind, low) if low is not None else "below " + _shown(kind, xs[0])
    end = _shown(kind, high) if high is not None else "above " + _shown(kind, xs[-1])
    return low, high, f"{start} to {end}"


def records(report: Report) -> list[BreakEven]:
    """Every config's and domain's break-even record (empty without a speedup or with one load)."""
    out: list[BreakEven] = []
    for config in report.configs:
        if config.config.algorithm == "NONE":
            continue
        for (kind, domain), by_load in _series(config).items():
            if len(by_load) >= 2:
                points = [_point(at, by_load[at]) for at in sorted(by_load)]
                out.append(record(config.label, domain, kind, points))
    return out


Speedups = list[tuple[float, float | None, float | None]]
"""The TPOT speedups (value, low, high) of one config's cases at one load."""


def _series(config: ConfigResults) -> dict[tuple[str, str], dict[float, Speedups]]:
    """A config's TPOT speedups per (load kind, domain), by load."""
    series: dict[tuple[str, str], dict[float, Speedups]] = {}
    for case in config.throughput:
        found = case.speedup.tpot if case.speedup is not None else None
        value = found.value if found is not None else None
        _, load, domain = case_shape(case.case, case.metrics)
        parsed = parse_load(load)
        if parsed is None or found is None or value is None or value <= 0:
            continue
        kind, at = parsed
        series.setdefault((kind, domain), {}).setdefault(at, []).append(
            (value, found.low, found.high)
        )
    return series


def _point(at: float, got: Speedups) -> Point:
    """The geometric mean over a load's contexts; a bound only when every context has one."""
    lows = [g[1] for g in got if g[1] is not None and g[1] > 0]
    highs = [g[2] for g in got if g[2] is not None and g[2] > 0]
    return (
        at,
        statistics.geometric_mean([g[0] for g in got]),
        statistics.geometric_mean(lows) if len(lows) == len(got) else None,
        statistics.geometric_mean(highs) if len(highs) == len(got) else None,
    )
