"""``break_even.png``: speedup against load per config, the break-even load marked.

A panel per domain and load kind (concurrency, request rate); a line per
config through its speedups (geometric mean over contexts, the 95% interval
as a band), log scale on both axes like the interpolation, the 1.0 line, and
at each crossing a marker on that line with its interval as a horizontal
bar. Built from the report's ``break_even`` records (see
:mod:`~pytest_specdecode.report.break_even`); without records, no plot.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pytest_specdecode.report import plots
from pytest_specdecode.report.model import BreakEven, Report
from pytest_specdecode.report.verdict import domain_rank

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

YTICKS = (0.1, 0.2, 0.3, 0.5, 0.7, 0.85, 1.0, 1.25, 1.5, 2.0, 3.0, 5.0, 7.0, 10.0)
XLABEL = {"concurrency": "concurrent requests", "rate": "request rate (req/s)"}


def build(report: Report, colors: dict[str, str], simulated: bool) -> dict[str, Figure]:
    """``{"break_even": figure}`` when the report has break-even records, else empty."""
    found = [r for r in report.break_even if r.loads]
    if not found:
        return {}
    return {"break_even": _figure(found, colors, simulated)}


def _panels(found: Sequence[BreakEven]) -> list[tuple[str, str]]:
    keys = {(r.domain, r.load_kind) for r in found}
    return sorted(keys, key=lambda k: (domain_rank(k[0]), k))


def _figure(found: Sequence[BreakEven], colors: dict[str, str], simulated: bool) -> Figure:
    keys = _panels(found)
    figure = plots._new_figure(max(8.0, 4.8 * len(keys)), 5.2)
    axes: Sequence[Axes] = figure.subplots(1, len(keys), squeeze=False)[0]
    handles: dict[str, Any] = {}
    for ax, (domain, kind) in zip(axes, keys, strict=True):
        loads: set[float] = set()
        for r in found:
            if (r.domain, r.load_kind) == (domain, kind):
                label = r.config
                line, xs = _curve(ax, r, colors.get(label, "C0"))
                loads.update(xs)
                handles.setdefault(label, line)
        ax.axhline(1.0, color="black", linewidth=1, linestyle="--")
        levels = sorted(loads)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(levels, [f"{x:g}" for x in levels])
        ticks = _yticks(found)
        ax.set_yticks(ticks, [f"{t:g}x" for t in ticks])
        ax.minorticks_off()
        ax.set_title(f"{domain}" if len(keys) > 1 else f"{domain} ({kind})")
        ax.set_xlabel(XLABEL.get(kind, kind))
        ax.set_ylabel("speedup (baseline TPOT / config TPOT)")
        ax.grid(True, alpha=0.3)
    plots.handles_legend(figure, handles, "config")
    plots._title(
        figure,
        "Speedup vs load: X where it crosses 1.0 (bar: 95% interval)\n"
        "geometric mean over contexts; band: 95% interval",
        simulated,
    )
    return figure


def _curve(ax: Axes, r: BreakEven, color: str) -> tuple[Any, list[float]]:
    """One record's speedups against load, its band, its crossing; the line and loads."""
    xs = list(r.loads)
    (line,) = ax.plot(xs, r.speedups, marker="o", color=color, label=r.config)
    lows = [y for y in r.lows if y is not None]
    highs = [y for y in r.highs if y is not None]
    if len(lows) == len(xs) == len(highs) == len(r.lows) == len(r.highs):  # none missing
        ax.fill_between(xs, lows, highs, color=color, alpha=0.15, linewidth=0)
    at = r.break_even
    if at is not None:
        left = at - (r.low if r.low is not None else min(xs))
        right = (r.high if r.high is not None else max(xs)) - at
        ax.errorbar(
            [at], [1.0], xerr=[[left], [right]], fmt="X", color=color, markersize=11,
            capsize=4, zorder=5,
        )  # fmt: skip
        ax.annotate(
            f"{at:.3g}", (at, 1.0), textcoords="offset points", xytext=(4, 8),
            color=color, fontsize=8,
        )  # fmt: skip
    return line, xs


def _yticks(found: Sequence[BreakEven]) -> list[float]:
    """The ticks of :data:`YTICKS` that every record's speedups and bounds span."""
    ys = [y for r in found for y in (*r.speedups, *r.lows, *r.highs) if y is not None and y > 0]
    return [t for t in YTICKS if min(ys, default=1.0) / 1.2 <= t <= max(ys, default=1.0) * 1.2]
