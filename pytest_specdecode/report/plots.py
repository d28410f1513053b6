"""PNG plots of a run report: throughput, accept length, pass rate, sweep heatmaps,
and (:mod:`~pytest_specdecode.report.plots_sweep`) speedup, Pareto front and the
acceptance histogram.

matplotlib is the optional ``plot`` extra, imported only when plotting. The
figures are built with matplotlib's object API on the Agg canvas, never
through pyplot, so plotting needs no display and leaves no global state
behind in the process that called it (a pytest session, say).
"""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from pytest_specdecode.errors import SpecDecodeError
from pytest_specdecode.output import figures
from pytest_specdecode.report import tables, verdict
from pytest_specdecode.report.model import Config, Metrics, PassRate, Report
from pytest_specdecode.throughput.metrics import TOK_S

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

SIM_NOTE = "simulated (not GPU)"

_CASE_RE = re.compile(r"ctx(?P<context>\d+)-c(?P<concurrency>\d+)")
_DPI = 110


class PlotsUnavailable(SpecDecodeError, RuntimeError):
    """matplotlib is not installed; the message says how to get it."""


@dataclass(frozen=True)
class Point:
    """One throughput case of one config, reduced to what the plots show."""

    config: str
    context: int
    concurrency: int
    tok_s: float | None
    accept_length: float | None
    completion_tokens: float | None
    spec_verify_ct: float | None
    domain: str = "-"
    load: str = ""
    low: float | None = None
    high: float | None = None
    """The 95% interval of tok/s over rounds, where there is one."""

    @property
    def closed_loop(self) -> bool:
        """Whether the case ran at a concurrency (not a request rate)."""
        return not self.load.startswith("r")

    @property
    def panel(self) -> tuple[int, str]:
        """(context, domain): what a panel of a per-context plot shows."""
        return (self.context, self.domain)


def throughput_points(report: Report) -> list[Point]:
    """Every throughput case with a known context and concurrency, in report order."""
    points: list[Point] = []
    for config in report.configs:
        for case in config.throughput:
            metrics = case.metrics
            context, concurrency = _case_shape(case.case, metrics)
            if context is None or concurrency is None:
                continue
            _, load, domain = verdict.case_shape(case.case, metrics)
            spread = metrics.interval(TOK_S)
            points.append(
                Point(
                    config=config.label,
                    context=context,
                    concurrency=concurrency,
                    tok_s=verdict.finite(verdict.mean(metrics, TOK_S)),
                    accept_length=verdict.finite(metrics.accept_length),
                    completion_tokens=verdict.finite(metrics.completion_tokens),
                    spec_verify_ct=verdict.finite(metrics.spec_verify_ct),
                    domain=domain,
                    load=load,
                    low=verdict.finite(spread.low if spread else None),
                    high=verdict.finite(spread.high if spread else None),
                )
            )
    return points


def build_figures(report: Report) -> dict[str, Figure]:
    """The report's figures by file stem; a plot whose data is absent is left out."""
    require_matplotlib()
    simulated = tables.simulated(report)
    configs = [c.label for c in report.configs]
    colors = {label: f"C{i % 10}" for i, label in enumerate(configs)}
    points = throughput_points(report)
    figures: dict[str, Figure] = {}
    if any(p.tok_s is not None for p in points):
        figures["throughput_vs_concurrency"] = _throughput_figure(points, colors, simulated)
    accept = _accept_by_context(points)
    if accept:
        figures["accept_length"] = _accept_figure(accept, colors, simulated)
    rates = [(c.label, c.pass_rate) for c in report.configs if c.pass_rate and c.pass_rate.total]
    if rates:
        figures["pass_rate"] = _pass_rate_figure(rates, colors, simulated)
    for sweep in sweeps(report):
        figures[f"heatmap_tok_s_{_slug(sweep.algorithm)}"] = _heatmap_figure(
            sweep, points, simulated
        )
    from pytest_specdecode.report import plots_break_even, plots_search, plots_sweep

    figures.update(plots_sweep.build(report, colors, simulated))
    figures.update(plots_break_even.build(report, colors, simulated))
    figures.update(plots_search.build(report, simulated))
    return figures


def write_plots(report: Report, out_dir: Path) -> list[Path]:
    """Write the report's plots as PNG files into ``out_dir``; return their paths.

    Raises :class:`PlotsUnavailable` when matplotlib is not installed.
    """
    figures = build_figures(report)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for stem, figure in figures.items():
        path = out_dir / f"{stem}.png"
        figure.savefig(path, dpi=_DPI)
        written.append(path)
    return written


# --- sweeps -------------------------------------------------------------


@dataclass(frozen=True)
class Sweep:
    """Configs of one algorithm that differ in exactly two keys."""

    algorithm: str
    row_key: str
    col_key: str
    cells: dict[str, tuple[Any, Any]]
    """config label -> (row value, column value)"""


def sweeps(report: Report) -> list[Sweep]:
    """Two-key sweeps among the configs that measured throughput, one per algorithm.

    A non-speculative baseline beside a sweep is a different algorithm, so it
    does not count as a third varying key.
    """
    groups: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for config in report.configs:
        if not config.throughput:
            continue
        flat = _flat_config(config.config)
        algorithm = str(flat.pop("algorithm"))
        groups.setdefault(algorithm, []).append((config.label, flat))
    found: list[Sweep] = []
    for algorithm, members in groups.items():
        if len(members) < 2:
            continue
        keys = list(dict.fromkeys(k for _, flat in members for k in flat))
        varying = [k for k in keys if len({_hashable(f.get(k)) for _, f in members}) > 1]
        if len(varying) != 2:
            continue
        row_key, col_key = varying
        cells = {label: (flat.get(row_key), flat.get(col_key)) for label, flat in members}
        found.append(Sweep(algorithm, row_key, col_key, cells))
    return found


def _flat_config(config: Config) -> dict[str, Any]:
    """The config's values by key, each ``extra`` flag a key of its own."""
    flat = {k: v for k, v in msgspec.structs.asdict(config).items() if k != "extra"}
    for pair in config.extra:
        if isinstance(pair, (list, tuple)) and len(pair) == 2:
            flat[str(pair[0])] = pair[1]
    return flat


def _hashable(value: Any) -> Any:
    return repr(value) if isinstance(value, (list, dict)) else value


def _order(value: Any) -> tuple[int, float, str]:
    if value is None:
        return (0, 0.0, "")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (1, float(value), "")
    return (2, 0.0, str(value))


# --- figures --------------------------------------------------------------


def _new_figure(width: float, height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def handles_legend(figure: Figure, handles: dict[str, Any], title: str) -> None:
    """One legend below the panels for the handles of every panel (label -> handle)."""
    figure.legend(
        list(handles.values()),
        list(handles),
        loc="outside lower center",
        ncols=min(len(handles), 3),
        title=title,
    )


def _title(figure: Figure, text: str, simulated: bool) -> None:
    if simulated:
        figure.suptitle(
            f"{text}\n{SIM_NOTE}: figures from the bundled simulator",
            color="firebrick",
            fontweight="bold",
        )
    else:
        figure.suptitle(text, fontweight="bold")


def panel_title(panel: tuple[int, str], panels: Sequence[tuple[int, str]]) -> str:
    """``context 1024 tokens``, with the domain when the run measured several."""
    context, domain = panel
    several = len({d for _, d in panels}) > 1
    return f"context {context} tokens" + (f", {domain}" if several else "")


def panels_of(points: Sequence[Point]) -> list[tuple[int, str]]:
    """The (context, domain) panels of the points, by context then domain order."""
    return sorted({p.panel for p in points}, key=_panel_order)


def _panel_order(panel: tuple[int, str]) -> tuple[int, int, str]:
    context, domain = panel
    return (context, verdict.domain_rank(domain), domain)


def _throughput_figure(points: list[Point], colors: dict[str, str], simulated: bool) -> Figure:
    shown = [p for p in points if p.closed_loop and p.tok_s is not None]
    levels = [Level(p.config, p.panel, p.concurrency, p.tok_s or 0.0, p.low, p.high) for p in shown]
    title = "Output throughput vs concurrency (higher is better)\nband: 95% interval over rounds"
    return concurrency_figure(
        levels, panels_of(shown), colors, "output tok/s (aggregate)", title, simulated
    )


@dataclass(frozen=True)
class Level:
    """One config's figure at one concurrency of a panel, with its 95% interval."""

    config: str
    panel: tuple[int, str]
    concurrency: int
    value: float
    low: float | None
    high: float | None


def concurrency_figure(levels: Sequence[Level], keys: Sequence[tuple[int, str]],
                       colors: dict[str, str], ylabel: str, title: str, simulated: bool, *,
                       unity: bool = False) -> Figure:  # fmt: skip
    """A panel per key, a line per config against concurrency with its interval as a
    band (``unity``: and a dotted line at 1.0)."""
    figure = _new_figure(max(5.5, 4.6 * len(keys)), 4.8)
    axes: Sequence[Axes] = figure.subplots(1, len(keys), squeeze=False)[0]
    handles: dict[str, Any] = {}
    for ax, key in zip(axes, keys, strict=True):
        here = [p for p in levels if p.panel == key]
        for label in colors:
            mine = sorted((p for p in here if p.config == label), key=lambda p: p.concurrency)
            if mine:
                handles.setdefault(label, _level_line(ax, mine, colors[label]))
        if unity:
            ax.axhline(1.0, color="grey", linestyle=":", linewidth=1)
        steps = sorted({p.concurrency for p in here})
        if len(steps) > 1 and steps[-1] / steps[0] >= 4:
            ax.set_xscale("log", base=2)
        ax.set_xticks(steps, [str(c) for c in steps])
        ax.minorticks_off()
        ax.set_ylim(bottom=0)
        ax.set_title(panel_title(key, keys))
        ax.set_xlabel("concurrent requests")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
    handles_legend(figure, handles, "config")
    _title(figure, title, simulated)
    return figure


def _level_line(ax: Axes, mine: Sequence[Level], color: str) -> Any:
    """One config's line through its levels, the 95% interval over rounds as a band."""
    xs = [p.concurrency for p in mine]
    (line,) = ax.plot(xs, [p.value for p in mine], marker="o", color=color, label=mine[0].config)
    bands = [
        (p.concurrency, p.low, p.high) for p in mine if p.low is not None and p.high is not None
    ]
    if bands:
        band_xs, lows, highs = zip(*bands, strict=True)
        ax.fill_between(band_xs, lows, highs, color=color, alpha=0.18, linewidth=0)
    return line


def _accept_by_context(points: list[Point]) -> dict[str, dict[tuple[int, str], float]]:
    """Per config and (context, domain): sum(tokens) / sum(verify steps) over its cases."""
    sums: dict[str, dict[tuple[int, str], list[float]]] = {}
    for p in points:
        entry = sums.setdefault(p.config, {}).setdefault(p.panel, [0.0, 0.0, 0.0, 0.0])
        if p.completion_tokens and p.spec_verify_ct:
            entry[0] += p.completion_tokens
            entry[1] += p.spec_verify_ct
        elif p.accept_length is not None:
            entry[2] += p.accept_length
            entry[3] += 1
    out: dict[str, dict[tuple[int, str], float]] = {}
    for label, by_context in sums.items():
        for context, (tokens, steps, total, count) in by_context.items():
            if steps:
                out.setdefault(label, {})[context] = tokens / steps
            elif count:
                out.setdefault(label, {})[context] = total / count
    return out


def _accept_figure(
    accept: dict[str, dict[tuple[int, str], float]], colors: dict[str, str], simulated: bool
) -> Figure:
    labels = [label for label in colors if label in accept]
    contexts = sorted({c for values in accept.values() for c in values}, key=_panel_order)
    several = len({d for _, d in contexts}) > 1
    figure = _new_figure(min(16.0, max(7.0, 0.5 * len(contexts) * len(labels) + 2)), 5.4)
    ax: Axes = figure.add_subplot()
    width = 0.8 / len(labels)
    for i, label in enumerate(labels):
        xs = [j + (i - (len(labels) - 1) / 2) * width for j, c in enumerate(contexts)]
        heights = [accept[label].get(c, math.nan) for c in contexts]
        bars = ax.bar(xs, heights, width * 0.95, color=colors[label], label=label)
        ax.bar_label(bars, labels=[figures.number(h, 2) for h in heights], padding=2, fontsize=8)
    ax.axhline(1.0, color="grey", linestyle=":", label="no speculation (1 token/step)")
    ax.set_xticks(range(len(contexts)), [f"{c}\n{d}" if several else f"{c}" for c, d in contexts])
    ax.set_xlabel("context (prompt tokens)" + (" and domain" if several else ""))
    ax.set_ylabel("accept length (tokens per verify step)")
    ax.set_ylim(0, max(1.0, *(v for d in accept.values() for v in d.values())) * 1.18)
    ax.grid(True, axis="y", alpha=0.3)
    # Below the axes, like the throughput plot: beside them it runs into the title.
    figure.legend(
        loc="outside lower center", ncols=min(len(labels) + 1, 2), fontsize=8, title="config"
    )
    _title(figure, "Accept length per config and context (higher is better)", simulated)
    return figure


def _pass_rate_figure(
    rates: list[tuple[str, PassRate]], colors: dict[str, str], simulated: bool
) -> Figure:
    figure = _new_figure(max(5.5, 1.5 * len(rates) + 2), 4.8)
    ax: Axes = figure.add_subplot()
    heights = [rate.rate * 100 for _, rate in rates]
    bars = ax.bar(range(len(rates)), heights, 0.6, color=[colors[label] for label, _ in rates])
    ax.bar_label(
        bars,
        labels=[
            f"{r.passed}/{r.total} ({h:.0f}%)" for (_, r), h in zip(rates, heights, strict=True)
        ],
        padding=2,
    )
    ax.set_xticks(range(len(rates)), [_wrap(label) for label, _ in rates], fontsize=8)
    ax.set_ylim(0, 112)
    ax.set_xlabel("config")
    ax.set_ylabel("pass rate (% of problems, pass@1)")
    ax.grid(True, axis="y", alpha=0.3)
    _title(figure, "Coding pass rate per config (labels: passed/problems)", simulated)
    return figure


def _heatmap_figure(sweep: Sweep, points: list[Point], simulated: bool) -> Figure:
    rows = sorted({r for r, _ in sweep.cells.values()}, key=_order)
    cols = sorted({c for _, c in sweep.cells.values()}, key=_order)
    mine = [p for p in points if p.config in sweep.cells and p.tok_s is not None and p.closed_loop]
    contexts = panels_of(mine)
    figure = _new_figure(
        max(5.5, (1.1 * len(cols) + 2.2) * len(contexts)), 1.0 + 0.8 * len(rows) + 1.8
    )
    axes: Sequence[Axes] = figure.subplots(1, len(contexts), squeeze=False)[0]
    for ax, key in zip(axes, contexts, strict=True):
        here = [p for p in mine if p.panel == key]
        top = max(p.concurrency for p in here)
        grid = _heatmap_grid(sweep, [p for p in here if p.concurrency == top], rows, cols)
        image = ax.imshow(grid, cmap="viridis", aspect="auto")
        _cell_texts(ax, grid)
        ax.set_xticks(range(len(cols)), [_value_text(c) for c in cols])
        ax.set_yticks(range(len(rows)), [_value_text(r) for r in rows])
        ax.set_xlabel(sweep.col_key)
        ax.set_ylabel(sweep.row_key)
        ax.set_title(f"{panel_title(key, contexts)}, concurrency {top}", fontsize=10)
        figure.colorbar(image, ax=ax, label="output tok/s")
    _title(
        figure,
        f"{sweep.algorithm} sweep: output tok/s by {sweep.row_key} x {sweep.col_key}\n"
        "(at the highest concurrency measured per context; blank = not measured)",
        simulated,
    )
    return figure


def _heatmap_grid(
    sweep: Sweep, points: Sequence[Point], rows: list[Any], cols: list[Any]
) -> list[list[float]]:
    """tok/s by (row value, column value) of the sweep; NaN where not measured."""
    grid = [[math.nan] * len(cols) for _ in rows]
    for p in points:
        if p.tok_s is not None:
            r, c = sweep.cells[p.config]
            grid[rows.index(r)][cols.index(c)] = p.tok_s
    return grid


def _cell_texts(ax: Axes, grid: list[list[float]]) -> None:
    """Each heatmap cell's value written on it, white on the darker half of the scale."""
    finite = [v for line in grid for v in line if not math.isnan(v)]
    low, high = (min(finite), max(finite)) if finite else (0.0, 1.0)
    for i, line in enumerate(grid):
        for j, value in enumerate(line):
            dark = not math.isnan(value) and (value - low) < 0.5 * (high - low or 1)
            color = "white" if dark else "black"
            ax.text(
                j, i, figures.number(value, 0), ha="center", va="center", color=color, fontsize=9
            )


# --- helpers ---------------------------------------------------------------


def require_matplotlib() -> None:
    """Raise :class:`PlotsUnavailable` unless matplotlib imports; lets callers check early."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise PlotsUnavailable(
            "plotting needs matplotlib, which is not installed: "
            "pip install 'pytest-specdecode[plot]'"
        ) from None


def _case_shape(case: str, metrics: Metrics) -> tuple[int | None, int | None]:
    """(context, concurrency) of a case: from its metrics, else from its id."""
    context, concurrency = metrics.context, metrics.concurrency
    match = _CASE_RE.search(case)
    if context is None and match:
        context = int(match["context"])
    if concurrency is None and match:
        concurrency = int(match["concurrency"])
    return context, concurrency


def _wrap(label: str) -> str:
    return "\n".join(textwrap.wrap(label, 16)) or label


def _value_text(value: Any) -> str:
    return "unset" if value is None else str(value)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "config"
