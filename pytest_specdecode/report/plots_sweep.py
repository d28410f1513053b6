"""The sweep's decision plots: speedup, the Pareto front, the acceptance histogram.

- ``speedup.png``: baseline TPOT / config TPOT against concurrency, a line per
  config and a panel per context and domain, the 95% interval as a band.
- ``pareto.png``: per context and domain, every (config, load) point as
  per-request tok/s against aggregate tok/s; the front (points no other
  beats on both) joined by a line.
- ``accept_histogram.png``: per domain, the share of verify steps by number
  of correct drafts (SGLang's ``spec_correct_drafts_histogram``) and the
  acceptance rate per draft position, per config.

Built from the typed report like the other plots (see :mod:`.plots`); absent
data means an absent plot.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pytest_specdecode.report import plots, tables, verdict
from pytest_specdecode.report.model import Pareto, ParetoPoint, Report

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def build(report: Report, colors: dict[str, str], simulated: bool) -> dict[str, Figure]:
    """The decision figures by file stem; those without data are left out."""
    out: dict[str, Figure] = {}
    speedups = _speedup_points(report)
    if speedups:
        out["speedup"] = _speedup_figure(speedups, colors, simulated)
    groups = report.verdict.pareto if report.verdict else []
    fronts = [g for g in groups if g.context is not None and _dots(g)]
    if fronts:
        out["pareto"] = _pareto_figure(fronts, colors, simulated)
    histograms = tables.accept_histograms(report)
    if histograms:
        out["accept_histogram"] = _histogram_figure(histograms, colors, simulated)
    return out


# --- speedup --------------------------------------------------------------------


def _speedup_points(report: Report) -> list[plots.Level]:
    points = []
    for config in report.configs:
        for case in config.throughput:
            found = case.speedup.tpot if case.speedup else None
            context, load, domain = verdict.case_shape(case.case, case.metrics)
            value = found.value if found else None
            if found is None or value is None or context is None or load.startswith("r"):
                continue
            concurrency = int(load.split("-")[0][1:])
            points.append(
                plots.Level(config.label, (context, domain), concurrency, value, found.low,
                            found.high)
            )  # fmt: skip
    return points


def _speedup_figure(points: list[plots.Level], colors: dict[str, str], simulated: bool) -> Figure:
    keys = sorted({p.panel for p in points}, key=lambda k: (k[0], verdict.domain_rank(k[1])))
    title = (
        "Speedup over the non-speculative baseline (higher is better)\n"
        "band: 95% interval over rounds; dotted: no speedup"
    )
    ylabel = "speedup (baseline TPOT / config TPOT)"
    return plots.concurrency_figure(points, keys, colors, ylabel, title, simulated, unity=True)


# --- Pareto front -------------------------------------------------------------------


Dot = tuple[ParetoPoint, float, float]
"""A Pareto point that has both figures: the point, its per-request and aggregate tok/s."""


def _dots(group: Pareto) -> list[Dot]:
    return [
        (p, p.req_tok_s, p.tok_s)
        for p in group.points
        if p.req_tok_s is not None and p.tok_s is not None
    ]


def _pareto_figure(groups: list[Pareto], colors: dict[str, str], simulated: bool) -> Figure:
    keys = [(g.context or 0, g.domain) for g in groups]
    figure = plots._new_figure(max(7.0, 5.0 * len(groups)), 5.6)
    axes: Sequence[Axes] = figure.subplots(1, len(groups), squeeze=False)[0]
    handles: dict[str, Any] = {}
    for ax, group, key in zip(axes, groups, keys, strict=True):
        dots = _dots(group)
        for label in colors:
            mine = [d for d in dots if d[0].config == label]
            if mine:
                handles.setdefault(label, _config_points(ax, mine, colors[label]))
        front = sorted((d for d in dots if d[0].front), key=lambda d: d[1])
        if front:
            (line,) = ax.plot(
                [x for _, x, _ in front],
                [y for _, _, y in front],
                color="black",
                linewidth=1.2,
                zorder=2,
                label="Pareto front",
            )
            handles.setdefault("Pareto front", line)
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.set_title(plots.panel_title(key, keys))
        ax.set_xlabel("per-request tok/s (interactivity)")
        ax.set_ylabel("aggregate output tok/s")
        ax.grid(True, alpha=0.3)
    plots.handles_legend(figure, handles, "config (x: failed a gate)")
    plots._title(
        figure,
        "Pareto front: per-request against aggregate tok/s (up and right is better)\n"
        "point labels: load (c: concurrency, r: request rate)",
        simulated,
    )
    return figure


def _config_points(ax: Axes, mine: list[Dot], color: str) -> Any:
    """One config's (load) points of a Pareto panel, each labelled with its load;
    crosses when one of them failed a gate."""
    marker = "o" if all(p.eligible for p, _, _ in mine) else "x"
    handle = ax.scatter(
        [x for _, x, _ in mine],
        [y for _, _, y in mine],
        color=color,
        marker=marker,
        label=mine[0][0].config,
        zorder=3,
    )
    for p, x, y in mine:
        ax.annotate(p.load, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    return handle


# --- acceptance histogram ---------------------------------------------------------


def _histogram_figure(
    histograms: dict[str, dict[str, list[int]]], colors: dict[str, str], simulated: bool
) -> Figure:
    domains = list(histograms)
    figure = plots._new_figure(max(6.0, 5.2 * len(domains)), 8.0)
    grid = figure.subplots(2, len(domains), squeeze=False)
    handles: dict[str, Any] = {}
    for column, domain in enumerate(domains):
        top: Axes = grid[0][column]
        bottom: Axes = grid[1][column]
        configs = [label for label in colors if label in histograms[domain]]
        width = 0.8 / max(1, len(configs))
        for i, label in enumerate(configs):
            hist = histograms[domain][label]
            steps = sum(hist) or 1
            xs = [j + (i - (len(configs) - 1) / 2) * width for j in range(len(hist))]
            bars = top.bar(
                xs, [n / steps for n in hist], width * 0.95, color=colors[label], label=label
            )
            handles.setdefault(label, bars)
            rates = [sum(hist[k:]) / steps for k in range(1, len(hist))]
            if rates:
                bottom.plot(range(1, len(rates) + 1), rates, marker="o", color=colors[label])
        depth = max(len(h) for h in histograms[domain].values())
        top.set_xticks(range(depth), [str(j) for j in range(depth)])
        top.set_title(f"{domain}: verify steps by correct drafts", fontsize=10)
        top.set_xlabel("correct drafts in the verify step")
        top.set_ylabel("share of verify steps")
        top.grid(True, axis="y", alpha=0.3)
        bottom.set_xticks(range(1, max(depth, 2)), [str(j) for j in range(1, max(depth, 2))])
        bottom.set_ylim(0, 1.05)
        bottom.set_title(f"{domain}: acceptance rate per draft position", fontsize=10)
        bottom.set_xlabel("draft position")
        bottom.set_ylabel("steps accepting >= position / steps")
        bottom.grid(True, alpha=0.3)
    plots.handles_legend(figure, handles, "config")
    plots._title(
        figure, "Acceptance per draft (from the server's spec_correct_drafts_histogram)", simulated
    )
    return figure
