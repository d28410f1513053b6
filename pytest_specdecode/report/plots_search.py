"""The search's plot (``--dflash-search``): the objective by restart, the best so far.

``search.png``: one point per visited config in the order started, with its
95% interval as an error bar; infeasible configs as crosses; the best
feasible objective so far as a step line. Built from the typed report like
the other plots (see :mod:`.plots`); its ``search`` section is the open dict
``search/record.py`` writes. No ``search`` section, no plot.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pytest_specdecode.report import plots
from pytest_specdecode.report.model import Report

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def build(report: Report, simulated: bool) -> dict[str, Figure]:
    """``{"search": figure}`` when the report's search visited a config, else empty."""
    found = report.search or {}
    visits = [v for v in found.get("visited") or [] if isinstance(v, Mapping)]
    if not visits:
        return {}
    return {"search": _figure(visits, str(found.get("metric")), simulated)}


def _figure(visits: list[Mapping[str, Any]], metric: str, simulated: bool) -> Figure:
    figure = plots._new_figure(max(5.5, 0.7 * len(visits) + 3), 4.8)
    ax = figure.subplots()
    shown, best = [], None  # the best feasible objective so far, from the first feasible one
    for n, visit in enumerate(visits, 1):
        value = _visit(ax, n, visit)
        if value is not None and (best is None or value > best):
            best = value
        if best is not None:
            shown.append((n, best))
    if shown:
        ax.step([x for x, _ in shown], [b for _, b in shown], where="post", color="C1",
                label="best so far")  # fmt: skip
        ax.legend(loc="lower right")
    ticks = [f"{n}\n{_short(v.get('label'))}" for n, v in enumerate(visits, 1)]
    ax.set_xticks(range(1, len(visits) + 1), ticks, fontsize=7)
    ax.set_xlabel("restart (config started, in order)")
    ax.set_ylabel(f"objective: geometric mean of {metric}")
    ax.grid(True, alpha=0.3)
    plots._title(figure, "Search: objective by restart (x: infeasible)", simulated)
    return figure


def _visit(ax: Any, n: int, visit: Mapping[str, Any]) -> Any:
    """One visit's objective as a point (a cross when infeasible), its interval as an
    error bar; the objective when it is feasible, else None."""
    value = visit.get("objective")
    interval = visit.get("interval") or {}
    if not isinstance(value, (int, float)):
        return None
    low, high = interval.get("low"), interval.get("high")
    feasible = bool(visit.get("feasible"))
    if feasible and isinstance(low, (int, float)) and isinstance(high, (int, float)):
        ax.errorbar([n], [value], yerr=[[value - low], [high - value]], fmt="o",
                    color="C0", capsize=3)  # fmt: skip
    else:
        ax.plot([n], [value], "o" if feasible else "x", color="C0" if feasible else "C3")
    return value if feasible else None


def _short(label: Any) -> str:
    return " ".join(str(label).split()[1:]).replace(" ", "\n") or str(label)
