"""The config x load matrix: per domain, one row per config, one column per load.

A load is a (context, load point) pair (``ctx1024 c8``), in the throughput
table's order. Each load has two columns: the case's speedup over NONE (the
TPOT ratio, as the verdict ranks) with its output tok/s, and beside it what a
single request sees at the tail (p99 TTFT / p99 ITL). The figures are the
ones the throughput and latency tables show; a case the run did not measure
is ``-``, a client-limited one says so (the verdict left it out).
"""

from __future__ import annotations

from pytest_specdecode.output import figures
from pytest_specdecode.report import tables
from pytest_specdecode.report.model import ConfigResults, Report, ThroughputRecord
from pytest_specdecode.report.verdict import case_shape, domain_rank
from pytest_specdecode.throughput.metrics import TOK_S

Load = tuple[int | None, str]
"""(context, load point) of a column."""


def speed_cell(config: ConfigResults, case: ThroughputRecord) -> str:
    """``2.41x · 3,930 tok/s``: the speedup over NONE and the output tok/s of one case."""
    metrics = case.metrics
    baseline = config.config.algorithm == "NONE"
    # The interval is the throughput table's: here the figures side by side.
    speedup = case.speedup.tpot if case.speedup else None
    ratio = "1.00x" if baseline else tables.ratio_cell(speedup, interval=False)
    cell = f"{ratio} · {figures.tok_s(tables.mean_figure(metrics, TOK_S))}"
    if metrics.errors:
        cell += f" ({metrics.errors} errors)"
    if case.client_limited:
        cell += " (client-limited)"
    return cell


def tail_cell(case: ThroughputRecord) -> str:
    """``120.4 / 8.12``: p99 TTFT and p99 ITL in ms."""
    metrics = case.metrics
    ttft = figures.number(metrics.ttft_ms_p99, 1)
    return f"{ttft} / {figures.number(metrics.itl_ms_p99, 2)}"


def load_name(load: Load) -> str:
    context, point = load
    return point if context is None else f"ctx{context} {point}"


def matrix(report: Report) -> list[tuple[str, tables.Table]]:
    """Per domain (the shipped domains first), the matrix's header and rows."""
    short = tables.short_labels(report.configs)
    loads: dict[str, dict[Load, None]] = {}  # domain -> its loads in table order
    rows: dict[str, dict[str, dict[Load, ThroughputRecord]]] = {}  # domain -> config -> cases
    configs: dict[str, ConfigResults] = {}
    for _, _, config, case in tables.ordered_cases(report):
        context, point, domain = case_shape(case.case, case.metrics)
        label = config.label
        loads.setdefault(domain, {})[(context, point)] = None
        rows.setdefault(domain, {}).setdefault(label, {})[(context, point)] = case
        configs[label] = config
    out = []
    for domain in sorted(loads, key=lambda d: (domain_rank(d), d)):
        columns = list(loads[domain])
        header = ["config"]
        for load in columns:
            header += [f"{load_name(load)}: speedup · tok/s", "p99 TTFT / ITL ms"]
        body = []
        for label, cases in rows[domain].items():
            row = [short.get(label, label)]
            for load in columns:
                at = cases.get(load)
                row += [speed_cell(configs[label], at), tail_cell(at)] if at else ["-", "-"]
            body.append(row)
        out.append((domain, (header, body)))
    return out
