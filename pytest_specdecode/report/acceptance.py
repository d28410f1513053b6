"""Acceptance integrity: a drafter's accept length must not hang on the load or fall off
past its window.

A drafter that runs without its trained window (SGLang's ``draft_window_size=None``)
or a batching bug passes an accept-length floor: the short, lone requests keep it
up. What gives it away is the shape: for the same prompts (same context and domain)
acceptance falls as more requests run at once, or for contexts past the configured
window it falls below the within-window figure. Per speculative config this
compares, from the per-round accept lengths of its throughput cases,

- each higher concurrency with the lowest one at the same context, domain and
  output length, and
- each context past the config's window with the longest context within it at the
  same load, domain and output length.

A comparison fails when the whole 95% interval of the ratio (Welch, delta method on
the log, :func:`~pytest_specdecode.throughput.stats.ratio_interval`; the loads send
different prompts, so rounds do not pair) lies below ``1 - tolerance``: a smaller
window than the drafter was trained with loses some acceptance past it by nature
(the simulator's model: up to about a third), a collapse loses most of it. With one
round on both sides there is no interval and the point decides. A run with one
load and no context past the window has nothing to compare: the gate says nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from pytest_specdecode.output import figures
from pytest_specdecode.report.model import Config, Metrics
from pytest_specdecode.report.verdict import case_shape
from pytest_specdecode.throughput import stats
from pytest_specdecode.throughput.metrics import ACCEPT_LENGTH

_CONCURRENCY = re.compile(r"c(\d+)")


@dataclass(frozen=True)
class Point:
    """One throughput case's accept length: where it was measured and its rounds."""

    case: str
    context: int
    load: str
    domain: str
    max_tokens: int | None
    values: tuple[float, ...]
    first_position: float | None = None  # acceptance rate at draft position 1

    @property
    def mean(self) -> float:
        return sum(self.values) / len(self.values)

    @property
    def concurrency(self) -> int | None:
        match = _CONCURRENCY.fullmatch(self.load)
        return int(match[1]) if match else None


@dataclass(frozen=True)
class Comparison:
    """One point against its reference: a higher load or a context past the window."""

    kind: str  # "load" or "context"
    base: Point
    now: Point
    ratio: stats.Interval
    window: int | None

    def failed(self, tolerance: float) -> bool:
        bound = self.ratio.high if self.ratio.known else self.ratio.value
        assert bound is not None
        return bound < 1.0 - tolerance

    def describe(self, tolerance: float) -> str:
        """``accept length 1.21 at ctx4096 (past the window 2048) vs 3.40 at ctx60 within
        it (-64%, 95% interval -70% to -57%; allowed drop 40%)``."""
        now, base = self.now, self.base
        if self.kind == "load":
            where = f"at {now.load} ({now.case}) vs {figures.number(base.mean, 2)} at {base.load}"
        else:
            where = (
                f"at ctx{now.context} ({now.case}, past the window {self.window}) vs "
                f"{figures.number(base.mean, 2)} at ctx{base.context} within it"
            )
        change = _percent(self.ratio.value)
        if self.ratio.known:
            noise = f"95% interval {_percent(self.ratio.low)} to {_percent(self.ratio.high)}"
        else:
            noise = "one round each: no interval"
        text = (
            f"accept length {figures.number(now.mean, 2)} {where} ({change}, {noise}; "
            f"allowed drop {tolerance:.0%})"
        )
        if now.first_position is not None and base.first_position is not None:
            text += (
                f"; draft position 1 accepted {now.first_position:.0%} vs {base.first_position:.0%}"
            )
        return text


def _percent(ratio: float | None) -> str:
    return "-" if ratio is None else f"{(ratio - 1.0) * 100:+.0f}%"


def point(case: str, metrics: Metrics) -> Point | None:
    """The case's accept length per round (or its one figure); None without any."""
    context, load, domain = case_shape(case, metrics)
    found = metrics.interval(ACCEPT_LENGTH)
    values = [v for v in stats.clean(found.values if found else []) if v > 0]
    if not values:
        values = [v for v in stats.clean([metrics.accept_length]) if v > 0]
    if not values or context is None:
        return None
    first = stats.clean((metrics.accept_rate_by_position or [])[:1])
    return Point(
        case, context, load, domain, metrics.max_tokens, tuple(values), first[0] if first else None
    )


def comparisons(points: Iterable[Point], window: int | None) -> list[Comparison]:
    """Every load and context comparison the points allow (see the module docstring)."""
    out: list[Comparison] = []
    by_prompt: dict[tuple[int, str, str], list[Point]] = {}
    by_load: dict[tuple[str, str, str], list[Point]] = {}
    for p in points:
        if p.concurrency is not None:
            by_prompt.setdefault((p.context, p.domain, repr(p.max_tokens)), []).append(p)
        by_load.setdefault((p.load, p.domain, repr(p.max_tokens)), []).append(p)
    for group in by_prompt.values():
        group.sort(key=lambda p: p.concurrency or 0)
        base = group[0]
        out += [_compare("load", base, p, window) for p in group[1:] if p.load != base.load]
    if window is not None:
        for group in by_load.values():
            within = [p for p in group if p.context <= window]
            if not within:
                continue
            base = max(within, key=lambda p: p.context)
            out += [_compare("context", base, p, window) for p in group if p.context > window]
    return out


def _compare(kind: str, base: Point, now: Point, window: int | None) -> Comparison:
    found = stats.ratio_interval(now.values, base.values)
    assert found is not None  # both sides hold positive values
    return Comparison(kind, base, now, found, window)


def judge(
    label: str, points: Iterable[Point], window: int | None, tolerance: float
) -> tuple[bool, str] | None:
    """(passed, detail) for one config; None when there is nothing to compare."""
    found = comparisons(points, window)
    if not found:
        return None
    failed = sorted((c for c in found if c.failed(tolerance)), key=lambda c: c.ratio.value)
    if failed:
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        return False, f"{label}: {failed[0].describe(tolerance)}{more}"
    worst = min(found, key=lambda c: c.ratio.value)
    kinds = sorted({"loads" if c.kind == "load" else "contexts past the window" for c in found})
    return True, (
        f"{label}: {len(found)} comparison(s) across {' and '.join(kinds)} within the allowed "
        f"drop {tolerance:.0%} (largest change {_percent(worst.ratio.value)}, {worst.now.case})"
    )


def window_of(config: Config) -> int | None:
    """The drafter window the config asks for (None: none set)."""
    return config.window if config.window is not None and config.window > 0 else None
