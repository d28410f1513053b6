"""The config x load matrix: per domain, one row per config, one column per load.

A load is a (context, load point) pair (``ctx1024 c8``), in the throughput
table's order. Each load has two columns: the case's speedup over NONE (the
TPOT ratio, as the verdict ranks) with its output tok/s, and beside it what a
single request sees at the tail (p99 TTFT / p99 ITL). The figures are the
ones the throughput and latency tables show; a case the run did not measure
is ``-``, a client-limited one says so (the verdict left it out).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_specdecode.output import figures
from pytest_specdecode.report import tables
from pytest_specdecode.report.verdict import SPEEDUP_TPOT, case_shape, mean
from pytest_specdecode.throughput.metrics import TOK_S

Load = tuple[int | None, str]
"""(context, load point) of a column."""


def _tok_s(metrics: Mapping[str, Any]) -> str:
    found = (metrics.get("intervals") or {}).get(TOK_S)
    value = found.get("mean") if isinstance(found, Mapping) else None
    if not isinstance(value, (int, float)):
        value = mean(metrics, TOK_S) if isinstance(found, Mapping) else metrics.get(TOK_S)
    return figures.tok_s(value)


def speed_cell(config: Mapping[str, Any], case: Mapping[str, Any]) -> str:
    """``2.41x · 3,930 tok/s``: the speedup over NONE and the output tok/s of one case."""
    metrics = case.get("metrics") or {}
    baseline = (config.get("config") or {}).get("algorithm") == "NONE"
    # The interval is the throughput table's: here the figures side by side.
    speedup = (case.get("speedup") or {}).get(SPEEDUP_TPOT)
    ratio = "1.00x" if baseline else tables.ratio_cell(speedup, interval=False)
    cell = f"{ratio} · {_tok_s(metrics)}"
    if metrics.get("errors"):
        cell += f" ({metrics['errors']} errors)"
    if case.get("client_limited"):
        cell += " (client-limited)"
    return cell


def tail_cell(case: Mapping[str, Any]) -> str:
    """``120.4 / 8.12``: p99 TTFT and p99 ITL in ms."""
    metrics = case.get("metrics") or {}
    ttft = figures.number(metrics.get("ttft_ms_p99"), 1)
    return f"{ttft} / {figures.number(metrics.get('itl_ms_p99'), 2)}"


def load_name(load: Load) -> str:
    context, point = load
    return point if context is None else f"ctx{context} {point}"


def matrix(report: Mapping[str, Any]) -> list[tuple[str, tables.Table]]:
    """Per domain (the shipped domains first), the matrix's header and rows."""
    short = tables.short_labels(list(report.get("configs") or []))
    loads: dict[str, dict[Load, None]] = {}  # domain -> its loads in table order
    rows: dict[str, dict[str, dict[Load, Mapping[str, Any]]]] = {}  # domain -> config -> cases
    configs: dict[str, Mapping[str, Any]] = {}
    for _, _, config, case in tables.ordered_cases(report):
        context, point, domain = case_shape(str(case.get("case")), case.get("metrics") or {})
        label = str(config.get("label"))
        loads.setdefault(domain, {})[(context, point)] = None
        rows.setdefault(domain, {}).setdefault(label, {})[(context, point)] = case
        configs[label] = config
    out = []
    for domain in sorted(loads, key=lambda d: (tables.domain_rank(d), d)):
        columns = list(loads[domain])
        header = ["config"]
        for load in columns:
            header += [f"{load_name(load)}: speedup · tok/s", "p99 TTFT / ITL ms"]
        body = []
        for label, cases in rows[domain].items():
            row = [short.get(label, label)]
            for load in columns:
                case = cases.get(load)
                row += [speed_cell(configs[label], case), tail_cell(case)] if case else ["-", "-"]
            body.append(row)
        out.append((domain, (header, body)))
    return out
