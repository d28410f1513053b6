"""The HTML report's charts as Plotly figure specs (``data`` and ``layout``), from the report.

Each builder reads the same report the tables read (speedups and intervals as
:mod:`~pytest_specdecode.report.verdict` put them, the acceptance histogram as
the server sent it) and returns plain JSON-able dicts; the page hands them to
Plotly's JavaScript. No figure is computed here that the report does not hold,
apart from shares and rates of the histogram, as the tables do.

Text that Plotly draws (trace names, hover text, ticks) goes through
:func:`label`: Plotly reads a small HTML subset in its strings, so a config
label is escaped like any other text on the page.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_specdecode.report import tables
from pytest_specdecode.report.model import (
    BreakEven,
    ConfigResults,
    Metrics,
    Pareto,
    ParetoPoint,
    Ratio,
    Report,
    RoundSummary,
    ThroughputRecord,
)
from pytest_specdecode.report.verdict import case_shape, domain_rank, load_order, mean
from pytest_specdecode.throughput.metrics import TOK_S

Chart = dict[str, Any]
"""``{"id", "title", "note", "data", "layout"}``: one Plotly figure and its caption."""

MAX_PARETO_PANELS = 12

_PALETTE = (
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip


def label(text: object) -> str:
    """Text as Plotly may draw it: its HTML subset escaped, on one line."""
    return html.escape(" ".join(str(text).split()))


def number(value: Any) -> float | None:
    """A finite float, else None (JSON has no NaN; Plotly leaves a gap)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    found = float(value)
    return found if math.isfinite(found) else None


def charts(report: Report) -> list[Chart]:
    """Every chart the report has data for, in the page's order."""
    colors = {c.label: _PALETTE[i % len(_PALETTE)] for i, c in enumerate(report.configs)}
    found = [
        readiness(report),
        tok_s(report, colors),
        speedup(report, colors),
        break_even(report, colors),
        *pareto(report, colors),
        acceptance(report, colors),
        histogram(report, colors),
        pass_rate(report, colors),
    ]
    out = [c for c in found if c is not None]
    for chart in out:
        chart["title"] += " (simulated)" if report.simulated else ""
        chart["layout"] = {**_LAYOUT, **chart["layout"], "title": {"text": label(chart["title"])}}
    return out


_LAYOUT: dict[str, Any] = {
    "height": 380,
    "margin": {"l": 64, "r": 16, "t": 48, "b": 64},
    "legend": {"orientation": "h", "y": -0.22},
    "hovermode": "closest",
    "font": {"family": "system-ui, sans-serif", "size": 12},
}


_UNITY = {"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": 1, "y1": 1,
          "line": {"dash": "dot", "color": "grey", "width": 1}}  # fmt: skip
"""The dotted line of no speedup (1.0) across a chart."""


def _name(short: Mapping[str, str], config: ConfigResults) -> str:
    # ``short`` is worked out once per chart: it reads every config, so once per trace
    # made the page quadratic in the configs.
    return label(short.get(config.label, config.label))


def _case_order(case: ThroughputRecord) -> tuple[Any, ...]:
    context, load, domain = case_shape(case.case, case.metrics)
    known = context if context is not None else 1 << 30
    return (known, load_order(load), domain_rank(domain), load)


def _cases(report: Report) -> list[str]:
    """Every case id measured, in table order (context, load, domain)."""
    found: dict[str, tuple[Any, ...]] = {}
    for config in report.configs:
        for case in config.throughput:
            found.setdefault(case.case, _case_order(case))
    return sorted(found, key=lambda c: found[c])


def _errors(values: Sequence[float | None], lows: Sequence[Any], highs: Sequence[Any]) -> Any:
    """Plotly's asymmetric error bars from 95% interval bounds (None where unknown)."""
    plus, minus = [], []
    for value, low, high in zip(values, lows, highs, strict=True):
        lo, hi = number(low), number(high)
        plus.append(None if value is None or hi is None else max(0.0, hi - value))
        minus.append(None if value is None or lo is None else max(0.0, value - lo))
    if all(p is None for p in plus):
        return None
    return {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus}


def readiness(report: Report) -> Chart | None:
    """Seconds in each readiness phase per config (stacked), from the gate's phase log."""
    phases: dict[str, dict[str, float]] = {}
    order: list[str] = []
    for config in report.configs:
        spans = _phase_spans(config.service)
        if spans is None:
            continue
        name = label(config.label)
        order.append(name)
        for phase, seconds in spans:
            phases.setdefault(phase, {})[name] = seconds
    if not order:
        return None
    data = [
        {
            "type": "bar",
            "orientation": "h",
            "name": label(phase),
            "y": order,
            "x": [phases[phase].get(name) for name in order],
            "hovertemplate": "%{y}: " + label(phase) + " %{x:.2f} s<extra></extra>",
        }
        for phase in phases
    ]
    return {
        "id": "chart-readiness",
        "title": "Readiness: seconds in each phase of the gate",
        "note": "From the restart to the verified config: loading (connection refused), "
        "warming up (503), then /server_info checked.",
        "data": data,
        "layout": {"barmode": "stack", "xaxis": {"title": {"text": "seconds"}},
                   "yaxis": {"automargin": True, "autorange": "reversed"},
                   "legend": {**_LAYOUT["legend"], "traceorder": "normal"},
                   "height": max(220, 90 + 36 * len(order))},
    }  # fmt: skip


def _phase_spans(service: Mapping[str, Any]) -> list[tuple[str, float]] | None:
    """Seconds from each phase's start to the next one's (the last: to ready); None
    when the service logged no phase or no ready time."""
    seen = [
        (str(p[0]), number(p[1]))
        for p in service.get("phases") or []
        if isinstance(p, Sequence) and len(p) == 2
    ]
    ready = number(service.get("ready_seconds"))
    if not seen or ready is None:
        return None
    return [
        (phase, max(0.0, end - start))
        for (phase, start), (_, end) in zip(seen, [*seen[1:], ("", ready)], strict=True)
        if start is not None and end is not None
    ]


def _case_bars(config: ConfigResults, cases: Sequence[str], found: Mapping[str, Ratio | None],
               name: str, colors: Mapping[str, str], hover: str) -> dict[str, Any]:  # fmt: skip
    """One config's bar per case: ``found`` holds each case's value and 95% bounds."""
    shown = [found.get(c) or Ratio() for c in cases]
    values = [number(r.value) for r in shown]
    return {
        "type": "bar",
        "name": name,
        "x": [label(c) for c in cases],
        "y": values,
        "error_y": _errors(values, [r.low for r in shown], [r.high for r in shown]),
        "marker": {"color": colors.get(config.label)},
        "hovertemplate": hover,
    }


def tok_s(report: Report, colors: Mapping[str, str]) -> Chart | None:
    """Output tok/s per case and config, with the 95% interval over rounds as error bars."""
    short = tables.short_labels(report.configs)
    cases = _cases(report)
    data = []
    for config in report.configs:
        by_case = {c.case: c.metrics for c in config.throughput}
        if not by_case:
            continue
        found = {case: _tok_s(by_case[case]) for case in cases if case in by_case}
        hover = "%{x}<br>%{y:,.0f} tok/s<extra>%{fullData.name}</extra>"
        data.append(_case_bars(config, cases, found, _name(short, config), colors, hover))
    if not data:
        return None
    return {
        "id": "chart-tok-s",
        "title": "Output tok/s per case (higher is better)",
        "note": "Mean over rounds; error bars: 95% interval (Student t over rounds).",
        "data": data,
        "layout": {"barmode": "group", "yaxis": {"title": {"text": "output tok/s"}}},
    }


def _tok_s(metrics: Metrics) -> Ratio:
    """A case's tok/s: the mean over rounds and its 95% interval."""
    found = metrics.interval(TOK_S) or RoundSummary()
    value = number(found.mean) or number(mean(metrics, TOK_S))
    return Ratio(value=value, low=found.low, high=found.high)


def speedup(report: Report, colors: Mapping[str, str]) -> Chart | None:
    """Speedup (baseline TPOT / config TPOT) per case, with its 95% interval."""
    short = tables.short_labels(report.configs)
    cases = _cases(report)
    data = []
    for config in report.configs:
        by_case = {c.case: c.speedup.tpot if c.speedup else None for c in config.throughput}
        if not any(f is not None and number(f.value) is not None for f in by_case.values()):
            continue
        hover = "%{x}<br>%{y:.2f}x<extra>%{fullData.name}</extra>"
        data.append(_case_bars(config, cases, by_case, _name(short, config), colors, hover))
    if not data:
        return None
    return {
        "id": "chart-speedup",
        "title": "Speedup over the non-speculative baseline (higher is better)",
        "note": "Baseline TPOT / config TPOT for the same case; error bars: 95% interval; "
        "dotted line: no speedup.",
        "data": data,
        "layout": {
            "barmode": "group",
            "yaxis": {"title": {"text": "speedup (x)"}, "rangemode": "tozero"},
            "shapes": [_UNITY],
        },
    }  # fmt: skip


def _crossing(record: BreakEven, name: str, color: str | None) -> Chart | None:
    """The X where a break-even curve crosses 1.0, its 95% interval as a bar."""
    at = number(record.break_even)
    if at is None:
        return None
    low, high = number(record.low), number(record.high)
    return {
        "type": "scatter",
        "mode": "markers",
        "name": name,
        "showlegend": False,
        "x": [at],
        "y": [1.0],
        "marker": {"symbol": "x", "size": 12, "color": color},
        "error_x": {"type": "data", "symmetric": False,
                    "array": [None if high is None else max(0.0, high - at)],
                    "arrayminus": [None if low is None else max(0.0, at - low)]},
        "hovertemplate": "break-even %{x:.3g}<extra>%{fullData.name}</extra>",
    }  # fmt: skip


def _curve(record: BreakEven, name: str, color: str | None) -> Chart:
    """One config and domain's speedup against load, its 95% interval as error bars."""
    values = [number(y) for y in record.speedups]
    lows, highs = record.lows, record.highs
    if not len(lows) == len(highs) == len(values):
        lows = highs = [None] * len(values)  # bounds that do not match the loads: none
    return {
        "type": "scatter",
        "mode": "lines+markers",
        "name": name,
        "x": [number(x) for x in record.loads],
        "y": values,
        "error_y": _errors(values, lows, highs),
        "line": {"color": color, "dash": _dash(record.domain)},
        "hovertemplate": "load %{x}: %{y:.2f}x<extra>%{fullData.name}</extra>",
    }


def break_even(report: Report, colors: Mapping[str, str]) -> Chart | None:
    """Speedup against load per config and domain, an X where it crosses 1.0
    (the report's ``break_even`` records, as ``break_even.png`` draws them)."""
    short = tables.short_labels(report.configs)
    data = []
    kinds: set[str] = set()
    levels: set[float] = set()
    for r in report.break_even:
        loads = [number(x) for x in r.loads]
        if not loads or None in loads:
            continue
        kinds.add(r.load_kind)
        levels.update(x for x in loads if x is not None)
        full = r.config
        name = label(f"{short.get(full, full)} · {r.domain}")
        data.append(_curve(r, name, colors.get(full)))
        crossing = _crossing(r, name, colors.get(full))
        if crossing:
            data.append(crossing)
    if not data:
        return None
    axis = "concurrent requests" if kinds == {"concurrency"} else "load"
    return {
        "id": "chart-break-even",
        "title": "Speedup against load: X where it crosses 1.0",
        "note": "Geometric mean over contexts; error bars: 95% interval; X: the break-even "
        "load with its interval; dotted line: no speedup; line style: domain.",
        "data": data,
        "layout": {
            "xaxis": {"title": {"text": axis}, "type": "log", "tickvals": sorted(levels),
                      "ticktext": [f"{x:g}" for x in sorted(levels)]},
            "yaxis": {"title": {"text": "speedup (x)"}, "type": "log"},
            "shapes": [_UNITY],
        },
    }  # fmt: skip


def pareto(report: Report, colors: Mapping[str, str]) -> list[Chart]:
    """Per context and domain: per-request against aggregate tok/s, the front drawn as a line."""
    short = tables.short_labels(report.configs)
    groups = report.verdict.pareto if report.verdict is not None else []
    found = [_pareto_panel(i, g, short, colors) for i, g in enumerate(groups[:MAX_PARETO_PANELS])]
    return [chart for chart in found if chart is not None]


def _pareto_panel(
    index: int, group: Pareto, short: Mapping[str, str], colors: Mapping[str, str]
) -> Chart | None:
    points = group.points
    # One pass groups the points by config (in first-seen order), not a scan per config.
    by_config: dict[str, list[ParetoPoint]] = {}
    for p in points:
        by_config.setdefault(p.config, []).append(p)
    data = [_pareto_points(short.get(full, full), mine, colors.get(full))
            for full, mine in by_config.items()]  # fmt: skip
    front = sorted((p for p in points if p.front), key=lambda p: number(p.req_tok_s) or 0.0)
    if front:
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": "Pareto front",
                "x": [number(p.req_tok_s) for p in front],
                "y": [number(p.tok_s) for p in front],
                "line": {"color": "black", "dash": "dash", "width": 1},
                "hoverinfo": "skip",
            }
        )
    if not data:
        return None
    return {
        "id": f"chart-pareto-{index}",
        "title": f"Pareto front: context {group.context}, {group.domain}",
        "note": "Filled: on the front (no other point beats it on both axes); "
        "open: dominated or not eligible. Text: the load.",
        "data": data,
        "layout": {
            "xaxis": {"title": {"text": "per-request tok/s"}},
            "yaxis": {"title": {"text": "aggregate tok/s"}},
        },
    }


def _pareto_points(name: str, mine: Sequence[ParetoPoint], color: str | None) -> Chart:
    """One config's points of a Pareto panel, filled where on the front."""
    return {
        "type": "scatter",
        "mode": "markers+text",
        "name": label(name),
        "x": [number(p.req_tok_s) for p in mine],
        "y": [number(p.tok_s) for p in mine],
        "text": [label(p.load) for p in mine],
        "textposition": "top center",
        "marker": {
            "size": 10,
            "color": color,
            "symbol": ["circle" if p.front else "circle-open" for p in mine],
        },
        "hovertemplate": "%{text}: %{x:,.0f} per-request, %{y:,.0f} aggregate "
        "tok/s<extra>%{fullData.name}</extra>",
    }


def _histograms(report: Report) -> dict[tuple[str, str], list[int]]:
    """Per (config, domain), config by config: the summed histogram of correct drafts."""
    by_domain = tables.accept_histograms(report)
    labels = [c.label for c in report.configs]
    return {
        (label, domain): hists[label]
        for label in dict.fromkeys(labels)
        for domain, hists in by_domain.items()
        if sum(hists.get(label) or []) > 0
    }


def _dash(domain: str) -> str:
    return ("solid", "dash", "dot", "dashdot")[min(domain_rank(domain), 3)]


def acceptance(report: Report, colors: Mapping[str, str]) -> Chart | None:
    """Acceptance rate per draft position, per config and domain (from the histogram)."""
    short = tables.short_labels(report.configs)
    data = []
    for (full, domain), hist in _histograms(report).items():
        steps = sum(hist)
        rates = [sum(hist[i:]) / steps for i in range(1, len(hist))]
        if not rates:
            continue
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": label(f"{short.get(full, full)} · {domain}"),
                "x": list(range(1, len(rates) + 1)),
                "y": rates,
                "line": {"color": colors.get(full), "dash": _dash(domain)},
                "hovertemplate": "position %{x}: %{y:.2f}<extra>%{fullData.name}</extra>",
            }
        )
    if not data:
        return None
    return {
        "id": "chart-acceptance",
        "title": "Acceptance rate per draft position",
        "note": "Verify steps that accepted at least i drafts / verify steps (from the server's "
        "spec_correct_drafts_histogram); line style: domain.",
        "data": data,
        "layout": {
            "xaxis": {"title": {"text": "draft position"}, "dtick": 1},
            "yaxis": {"title": {"text": "acceptance rate"}, "range": [0, 1.05]},
        },
    }


def histogram(report: Report, colors: Mapping[str, str]) -> Chart | None:
    """Share of verify steps by correct drafts, per config and domain."""
    short = tables.short_labels(report.configs)
    data = []
    for (full, domain), hist in _histograms(report).items():
        steps = sum(hist)
        data.append(
            {
                "type": "bar",
                "name": label(f"{short.get(full, full)} · {domain}"),
                "x": list(range(len(hist))),
                "y": [n / steps for n in hist],
                "customdata": hist,
                "marker": {
                    "color": colors.get(full),
                    "pattern": {"shape": ["", "/", ".", "x"][min(domain_rank(domain), 3)]},
                },
                "hovertemplate": "%{x} correct drafts: %{y:.1%} (%{customdata} steps)"
                "<extra>%{fullData.name}</extra>",
            }
        )
    if not data:
        return None
    return {
        "id": "chart-histogram",
        "title": "Verify steps by correct drafts (acceptance histogram)",
        "note": "Share of each config's verify steps that accepted that many drafts.",
        "data": data,
        "layout": {
            "barmode": "group",
            "xaxis": {"title": {"text": "correct drafts in the verify step"}, "dtick": 1},
            "yaxis": {"title": {"text": "share of verify steps"}, "tickformat": ".0%"},
        },
    }


def pass_rate(report: Report, colors: Mapping[str, str]) -> Chart | None:
    """Coding pass rate (mean pass@1) per config."""
    short = tables.short_labels(report.configs)
    rows = []
    for config in report.configs:
        found = config.pass_rate
        rate = number(found.rate) if found is not None else None
        if found is None or rate is None:
            continue
        rows.append((config, rate, f"{found.passed}/{found.total}"))
    if not rows:
        return None
    return {
        "id": "chart-pass-rate",
        "title": "Coding pass rate per config",
        "note": "Mean pass@1 over the problems.",
        "data": [
            {
                "type": "bar",
                "x": [_name(short, c) for c, _, _ in rows],
                "y": [r for _, r, _ in rows],
                "text": [label(t) for _, _, t in rows],
                "textposition": "auto",
                "marker": {"color": [colors.get(c.label) for c, _, _ in rows]},
                "hovertemplate": "%{x}: %{y:.0%} (%{text})<extra></extra>",
            }
        ],
        "layout": {
            "yaxis": {"title": {"text": "pass rate"}, "range": [0, 1.05], "tickformat": ".0%"},
            "showlegend": False,
        },
    }
