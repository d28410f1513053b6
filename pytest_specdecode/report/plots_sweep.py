"""The sweep's decision plots: speedup, the Pareto front, the acceptance histogram.

- ``speedup.png``: baseline TPOT / config TPOT against concurrency, a line per
  config and a panel per context and domain, the 95% interval as a band.
- ``pareto.png``: per context and domain, every (config, load) point as
  per-request tok/s against aggregate tok/s; the front (points no other
  beats on both) joined by a line.
- ``accept_histogram.png``: per domain, the share of verify steps by number
  of correct drafts (SGLang's ``spec_correct_drafts_histogram``) and the
  acceptance rate per draft position, per config.

Built from the report dict like the other plots (see :mod:`.plots`); absent
data means an absent plot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_specdecode.report import plots, tables, verdict

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def build(report: Mapping[str, Any], colors: dict[str, str], simulated: bool) -> dict[str, Figure]:
    """The decision figures by file stem; those without data are left out."""
    out: dict[str, Figure] = {}
    speedups = _speedup_points(report)
    if speedups:
        out["speedup"] = _speedup_figure(speedups, colors, simulated)
    fronts = [g for g in (report.get("verdict") or {}).get("pareto") or [] if g.get("points")]
    if fronts:
        out["pareto"] = _pareto_figure(fronts, colors, simulated)
    histograms = tables.accept_histograms(report)
    if histograms:
        out["accept_histogram"] = _histogram_figure(histograms, colors, simulated)
    return out


# --- speedup --------------------------------------------------------------------


def _speedup_points(report: Mapping[str, Any]) -> list[plots.Level]:
    points = []
    for config in report.get("configs") or []:
        for case in config.get("throughput") or []:
            found = (case.get("speedup") or {}).get("tpot") or {}
            metrics = case.get("metrics") or {}
            context, load, domain = verdict.case_shape(str(case.get("case")), metrics)
            value = found.get("value")
            if not isinstance(value, (int, float)) or context is None or load.startswith("r"):
                continue
            concurrency = int(load.split("-")[0][1:])
            points.append(
                plots.Level(str(config.get("label")), (context, domain), concurrency,
                            float(value), found.get("low"), found.get("high"))
            )  # fmt: skip
    return points


def _speedup_figure(points: list[plots.Level], colors: dict[str, str], simulated: bool) -> Figure:
    keys = sorted({p.panel for p in points}, key=lambda k: (k[0], tables.domain_rank(k[1])))
    title = (
        "Speedup over the non-speculative baseline (higher is better)\n"
        "band: 95% interval over rounds; dotted: no speedup"
    )
    ylabel = "speedup (baseline TPOT / config TPOT)"
    return plots.concurrency_figure(points, keys, colors, ylabel, title, simulated, unity=True)


# --- Pareto front -------------------------------------------------------------------


def _pareto_figure(groups: list[dict[str, Any]], colors: dict[str, str], simulated: bool) -> Figure:
    keys = [(int(g["context"]), str(g["domain"])) for g in groups]
    figure = plots._new_figure(max(7.0, 5.0 * len(groups)), 5.6)
    axes: Sequence[Axes] = figure.subplots(1, len(groups), squeeze=False)[0]
    handles: dict[str, Any] = {}
    for ax, group, key in zip(axes, groups, keys, strict=True):
        points = group["points"]
        for label in colors:
            mine = [p for p in points if p["config"] == label]
            if mine:
                handles.setdefault(label, _config_points(ax, mine, colors[label]))
        front = sorted((p for p in points if p.get("front")), key=lambda p: p["req_tok_s"])
        if front:
            (line,) = ax.plot(
                [p["req_tok_s"] for p in front],
                [p["tok_s"] for p in front],
                color="black",
                linewidth=1.2,
                zorder=2,
            )
            line.set_label("Pareto front")
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


def _config_points(ax: Axes, mine: list[dict[str, Any]], color: str) -> Any:
    """One config's (load) points of a Pareto panel, each labelled with its load;
    crosses when one of them failed a gate."""
    marker = "o" if all(p.get("eligible", True) for p in mine) else "x"
    handle = ax.scatter(
        [p["req_tok_s"] for p in mine],
        [p["tok_s"] for p in mine],
        color=color,
        marker=marker,
        label=mine[0]["config"],
        zorder=3,
    )
    for p in mine:
        ax.annotate(
            str(p["load"]),
            (p["req_tok_s"], p["tok_s"]),
            textcoords="offset points",
            xytext=(4, 4),
            fontsize=7,
        )
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
