"""The sweep's tables as cells: throughput with intervals and speedup, acceptance, verdict, Pareto.

Each builder returns a header and rows of strings from the typed report; the
terminal summary lays them out in fixed width and the Markdown summary as
GFM, so both show the same figures the same way.

Intervals read ``30,572 ±2.1%``: the mean over the case's rounds and the half
width of its 95% interval (Student t over rounds) relative to it; accept
length ``3.21 ±0.04`` in tokens. Speedup reads ``2.41x (2.30-2.52)``: baseline
TPOT / config TPOT with its 95% interval.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_specdecode.output import figures
from pytest_specdecode.report.model import (
    CodingRecord,
    Config,
    ConfigResults,
    LosslessRecord,
    Metrics,
    PassRate,
    Ratio,
    Report,
    ThroughputRecord,
    Verdict,
    VerdictGroup,
    VerdictMember,
)
from pytest_specdecode.report.verdict import case_shape, domain_rank, load_order, mean

Table = tuple[list[str], list[list[str]]]
MAX_POSITIONS = 8
"""Draft positions shown in the acceptance table (the JSON report keeps all)."""


SHORT_KEYS = ("algorithm", "budget", "topk", "window", "draft_model")  # what a short label names


def _short_values(config: Config) -> dict[str, Any]:
    """The values a short label names, by :data:`SHORT_KEYS`."""
    return {key: getattr(config, key) for key in SHORT_KEYS}


def short_labels(configs: Sequence[ConfigResults]) -> dict[str, str]:
    """Config labels reduced to the keys that differ between the measured speculative configs.

    A budget sweep's rows read ``budget=4``, ``budget=8``... instead of the
    whole label repeated; the baseline keeps its label (``NONE``); a single
    speculative config keeps its full label.
    """
    measured = [c for c in configs if c.throughput]
    spec = [_short_values(c.config) for c in measured if not _baseline(c)]
    varying = [k for k in SHORT_KEYS if len({str(values[k]) for values in spec}) > 1]
    extras = {str(c.config.extra) for c in measured}
    shorten = len(spec) > 1 and len(extras) < 2
    return {
        c.label: " ".join(f"{k}={_short_values(c.config)[k]}" for k in varying)
        if shorten and varying and not _baseline(c)
        else c.label
        for c in configs
    }


def simulated(report: Report) -> bool:
    """Whether any figure of the report came from the simulator."""
    return report.simulated or any(c.service.get("simulated") for c in report.configs)


def text_table(text: str) -> Table | None:
    """A fixed-width text table (header, dash row, rows) split into cells by its dash row;
    None when ``text`` is not one. The comparison is stored as rendered text like this."""
    lines = text.splitlines()
    if len(lines) < 2 or not re.fullmatch(r"-+( +-+)*", lines[1].strip()):
        return None
    spans = [(m.start(), m.end()) for m in re.finditer(r"-+", lines[1])]

    def split(line: str) -> list[str]:
        # Every cell is padded to its column's width, so the dash row's spans cut exactly.
        return [line[start:end].strip() for start, end in spans]

    return split(lines[0]), [split(line) for line in lines[2:]]


def _baseline(entry: ConfigResults) -> bool:
    return entry.config.algorithm == "NONE"


def _label(short: Mapping[str, str], entry: ConfigResults) -> str:
    return short.get(entry.label, entry.label)


Case = tuple[ConfigResults, ThroughputRecord, Metrics, str]


def _cases(configs: Iterable[ConfigResults]) -> Iterator[Case]:
    """(config, case, the case's metrics, its domain) per throughput case, config by config."""
    for config in configs:
        for case in config.throughput:
            yield config, case, case.metrics, case_shape(case.case, case.metrics)[2]


def mean_figure(metrics: Metrics, name: str) -> Any:
    """A case's figure ``name`` as the tables show it: the mean over its rounds, else the
    case's own figure."""
    found = metrics.interval(name)
    value = found.mean if found else None
    if value is None:
        value = mean(metrics, name) if found else metrics.figure(name)
    return value


def with_interval(metrics: Metrics, name: str, digits: int, *, relative: bool) -> str:
    """``30,572 ±2.1%`` (relative) or ``3.21 ±0.04``; the plain figure with one round."""
    found = metrics.interval(name)
    value = mean_figure(metrics, name)
    shown = figures.rate(value) if name == "tok_s" else figures.number(value, digits)
    if shown == figures.MISSING or not found or found.low is None or found.high is None:
        return shown
    half = (found.high - found.low) / 2
    if relative:
        return f"{shown} ±{half / value * 100:.1f}%" if value else shown
    return f"{shown} ±{half:.{digits}f}"


def ratio_cell(found: Ratio | None, *, interval: bool = True) -> str:
    """``2.41x (2.30-2.52)``; ``2.41x`` without an interval; ``-`` without a value."""
    if found is None or found.value is None:
        return figures.MISSING
    text = f"{found.value:.2f}x"
    if interval and found.low is not None and found.high is not None:
        text += f" ({found.low:.2f}-{found.high:.2f})"
    return text


def ordered_cases(
    report: Report,
) -> list[tuple[tuple[Any, ...], int, ConfigResults, ThroughputRecord]]:
    """(case order, config position, config, case) for every throughput case, in table
    order: context, load, domain, then the configs as they ran."""
    out = []
    for position, config in enumerate(report.configs):
        for case in config.throughput:
            context, load, domain = case_shape(case.case, case.metrics)
            known = context if context is not None else 1 << 30
            order = (known, load_order(load), domain_rank(domain), domain)
            out.append((order, position, config, case))
    out.sort(key=lambda entry: (entry[0], entry[1]))
    return out


def throughput(report: Report, short: Mapping[str, str] | None = None) -> Table:
    """One row per case and config: tok/s, TPOT, accept length, speedup, tok/s ratio."""
    short = short_labels(report.configs) if short is None else short
    slo = any(metrics.slo for _, _, metrics, _ in _cases(report.configs))
    header = ["case", "config", "tok/s", "TPOT ms", "accept", "speedup", "tok/s ratio"]
    header += ["goodput req/s", "SLO met"] if slo else []
    rows = [_throughput_row(short, c, case, slo) for _, _, c, case in ordered_cases(report)]
    return header, rows


def _throughput_row(
    short: Mapping[str, str], config: ConfigResults, case: ThroughputRecord, slo: bool
) -> list[str]:
    metrics = case.metrics
    baseline = _baseline(config)
    speedup = case.speedup
    errors = f" ({metrics.errors} errors)" if metrics.errors else ""
    row = [
        case.case,
        _label(short, config),
        with_interval(metrics, "tok_s", 0, relative=True) + errors,
        with_interval(metrics, "tpot_ms", 2, relative=True),
        with_interval(metrics, "accept_length", 2, relative=False),
        "1.00x (baseline)" if baseline else ratio_cell(speedup.tpot if speedup else None),
        "1.00x" if baseline else ratio_cell(speedup.tok_s if speedup else None, interval=False),
    ]
    if slo:
        attained = metrics.slo_attainment
        row += [
            figures.number(metrics.goodput, 2),
            f"{attained:.0%}" if attained is not None else figures.MISSING,
        ]
    return row


def latency(report: Report, short: Mapping[str, str] | None = None) -> Table:
    """One row per case and config: what a single request sees (TPOT and tok/s are the
    throughput table's), case by case as the throughput table is."""
    short = short_labels(report.configs) if short is None else short
    header = ["case", "config", "req tok/s p50", "TTFT p50/p99 ms", "ITL p50 ms", "tok/chunk",
              "errors"]  # fmt: skip
    rows = []
    for _, _, config, case in ordered_cases(report):
        m = case.metrics
        rows.append(
            [
                case.case,
                _label(short, config),
                figures.rate(m.req_tok_s_p50),
                "/".join(figures.number(v, 1) for v in (m.ttft_ms_p50, m.ttft_ms_p99)),
                figures.number(m.itl_ms_p50, 2),
                figures.number(m.tokens_per_chunk_mean, 2),
                str(m.errors if m.errors is not None else 0),
            ]
        )
    return header, rows


def acceptance(report: Report) -> Table:
    """Per speculative config and domain: accept length and acceptance rate per draft position."""
    short = short_labels(report.configs)
    sums: dict[tuple[str, str], list[int]] = {}
    tokens: dict[tuple[str, str], list[float]] = {}
    for config, _, metrics, domain in _cases(c for c in report.configs if not _baseline(c)):
        key = (_label(short, config), domain)
        if metrics.accept_histogram is not None:
            _add_counts(sums.setdefault(key, []), metrics.accept_histogram)
        _add_tokens(tokens.setdefault(key, [0.0, 0.0]), metrics)
    positions = min(MAX_POSITIONS, max((len(h) - 1 for h in sums.values()), default=0))
    header = ["config", "domain", "accept length", "verify steps"]
    header += [f"pos {i}" for i in range(1, positions + 1)]
    keys = sorted(tokens, key=lambda k: _row_order(short, k))  # every case adds to tokens
    rows = [_acceptance_row(k, sums.get(k, []), tokens[k], positions) for k in keys]
    return header, [row for row in rows if row]


def _add_counts(total: list[int], hist: Sequence[int]) -> None:
    """Add a histogram into a running one."""
    total += [0] * (len(hist) - len(total))
    for i, n in enumerate(hist):
        total[i] += n


def _add_tokens(total: list[float], metrics: Metrics) -> None:
    done, steps = metrics.completion_tokens, metrics.spec_verify_ct
    if done is not None and steps:
        total[0] += done
        total[1] += steps


def _acceptance_row(
    key: tuple[str, str], hist: list[int], counts: list[float], positions: int
) -> list[str]:
    """The row of one config and domain; none when the server reported no speculation counts."""
    done, steps = counts
    drafts = sum(hist)
    if not steps and not drafts:
        return []
    rates = [sum(hist[i:]) / drafts for i in range(1, len(hist))] if drafts else []
    accept = done / steps if steps else None
    row = [*key, figures.number(accept, 2), figures.number(steps or None, 0)]
    return row + [f"{rates[i]:.2f}" if i < len(rates) else "-" for i in range(positions)]


def _order(short: Mapping[str, str], label: str) -> int:
    values = list(short.values())
    return values.index(label) if label in values else len(values)


def _row_order(short: Mapping[str, str], key: tuple[str, str]) -> tuple[int, int, str]:
    return (_order(short, key[0]), domain_rank(key[1]), key[1])


def ranks_several(report: Report) -> bool:
    """Whether the verdict chose among configs: several of this run's, or a compared
    run's beside them (one config alone has nothing to be ranked against)."""
    if report.verdict is None:
        return False
    measured = sum(1 for c in report.configs if c.throughput)
    return measured > 1 or any(len(g.members) > 1 for g in report.verdict.groups)


def ranked_by(report: Report) -> str:
    """What the verdict ranked the configs by, in words."""
    found = report.verdict
    by_speedup = found is not None and found.ranked_by == "speedup"
    return "speedup" if by_speedup else "output tok/s (no baseline)"


def verdict(report: Report) -> Table:
    """One row per load point and domain: the verdict's set (``clear: budget=8``,
    ``tie within noise: budget=8, budget=16``), each member's correctness coverage, and
    the configs whose figures could not be ranked."""
    found = report.verdict or Verdict()
    short = short_labels(report.configs)
    by_speedup = found.ranked_by == "speedup"
    score = "speedup" if by_speedup else "tok/s"
    header = ["load", "domain", "best config", score, "over contexts", "runner-up", "correctness"]
    unranked = any(g.unranked for g in found.groups)
    if unranked:
        header.append("not ranked")
    crossing = _break_even_cells(report)
    if crossing:
        header.append("best's break-even")
    rows = []
    for group in found.groups:
        row = _verdict_row(group, short, by_speedup, unranked)
        if crossing:
            row.append(crossing.get((str(group.best), group.domain), "-"))
        rows.append(row)
    return header, rows


def _verdict_row(
    group: VerdictGroup, short: Mapping[str, str], by_speedup: bool, unranked: bool
) -> list[str]:
    best, runner = group.best, group.runner_up
    members = {m.config: m for m in group.members}
    chosen = list(group.best_set or ([best] if best else []))

    def name(label: str) -> str:
        return _short(short, label, members.get(label))

    margin = group.margin or "only candidate"
    named = ", ".join(name(b) + _unchecked(members.get(b)) for b in chosen)
    second = _score(group.runner_up_score, by_speedup)
    coverage = [
        (f"{name(b)}: " if len(chosen) > 1 else "") + coverage_text(members.get(b)) for b in chosen
    ]
    row = [
        group.load,
        group.domain,
        f"{margin}: {named}" if chosen else "none passed every gate",
        _score(group.score, by_speedup),
        _contexts_cell(group, by_speedup),
        f"{name(runner)} ({second})" if runner else "-",
        "; ".join(coverage) or "-",
    ]
    return row + ([_unranked_cell(group, name)] if unranked else [])


def _contexts_cell(group: VerdictGroup, by_speedup: bool) -> str:
    contexts = ", ".join(str(c) for c in group.contexts)
    spread = group.range or []
    if len(spread) == 2 and spread[0] != spread[1]:
        contexts += f" ({_score(spread[0], by_speedup)} to {_score(spread[1], by_speedup)})"
    return contexts or "-"


def _unranked_cell(group: VerdictGroup, name: Callable[[str], str]) -> str:
    left = [
        f"{name(u.config)}: {u.reason}" + (f" ({u.detail})" if u.detail else "")
        for u in group.unranked
    ]
    return "; ".join(left) or "-"


def _short(short: Mapping[str, str], label: str, member: VerdictMember | None) -> str:
    """A verdict member's short label; a saved run's config keeps its ``(saved run N)``."""
    saved = member.saved if member is not None else None
    tail = f" (saved run {saved})"
    if saved and label.endswith(tail):
        base = label.removesuffix(tail)
        return short.get(base, base) + tail
    return short.get(label, label)


def checked(member: VerdictMember | None) -> bool | None:
    """Whether coding or lossless checked a verdict member (None: no member)."""
    return None if member is None else member.coverage.checked


def _unchecked(member: VerdictMember | None) -> str:
    return " (correctness not checked)" if checked(member) is False else ""


def coverage_text(member: VerdictMember | None) -> str:
    """A member's correctness coverage in a few words: pass rate, lossless, accept floor."""
    if member is None:
        return "-"
    found = member.coverage
    if not found.checked:
        return "not checked (no coding or lossless result)"
    rate = f"pass rate {found.passed}/{found.total}" if found.total else "pass rate not checked"
    return f"{rate}, lossless {found.lossless}, accept floor {found.accept_floor}"


def _break_even_cells(report: Report) -> dict[tuple[str, str], str]:
    """Per (config label, domain), its break-even load in a few words (``report.break_even``)."""
    out: dict[tuple[str, str], str] = {}
    for r in report.break_even:
        kind = "c" if r.load_kind == "concurrency" else "r"
        at = r.break_even
        if r.status == "crosses" and at is not None:
            cell = f"{kind}~{figures.number(at, 1 if at < 10 else 0)}"
        elif r.status == "above" and r.loads:
            cell = f"> {kind}={figures.plain(max(r.loads))}"
        elif r.status == "below" and r.loads:
            cell = f"< {kind}={figures.plain(min(r.loads))}"
        else:
            continue
        out[(r.config, r.domain)] = cell
    return out


def _score(value: float | None, by_speedup: bool) -> str:
    if value is None:
        return figures.MISSING
    return f"{value:.2f}x" if by_speedup else figures.rate(value)


def pareto(report: Report) -> Table:
    """The Pareto front per context and domain: points no other beats on both axes."""
    short = short_labels(report.configs)
    header = ["context", "domain", "config", "load", "per-request tok/s", "aggregate tok/s"]
    rows = []
    for group in report.verdict.pareto if report.verdict else []:
        for point in group.points:
            if point.front:
                rows.append(
                    [
                        str(group.context),
                        group.domain,
                        short.get(point.config, point.config),
                        point.load,
                        figures.rate(point.req_tok_s),
                        figures.rate(point.tok_s),
                    ]
                )
    return header, rows


def excluded(report: Report) -> dict[str, list[str]]:
    """The configs kept out of the verdict by label, with the gates each failed."""
    found = report.verdict.excluded if report.verdict else []
    return {e.config: list(e.reasons) for e in found}


@dataclass(frozen=True)
class Standing:
    """Each config's place in the verdict, indexed once: a page of many configs looks every
    config up here instead of scanning every group's members for each one."""

    excluded: Mapping[str, list[str]]
    """The gates each config kept out of the verdict failed, by label."""
    members: Mapping[str, list[VerdictMember]]
    """Each config's verdict members (one per group it was ranked in), by label."""


def standing(report: Report) -> Standing:
    """The verdict's exclusions and members by config label, in one pass over them."""
    members: dict[str, list[VerdictMember]] = {}
    for group in report.verdict.groups if report.verdict else []:
        for member in group.members:
            members.setdefault(member.config, []).append(member)
    return Standing(excluded(report), members)


def excluded_lines(report: Report) -> list[str]:
    """One line per config kept out of the verdict, with the gates it failed."""
    return [f"{label}: {', '.join(reasons)}" for label, reasons in excluded(report).items()]


def rounds_note(report: Report) -> str:
    """How the figures were measured, for the line above the throughput table."""
    found = (m.rounds for _, _, m, _ in _cases(report.configs))
    counts = sorted({n for n in found if n is not None})
    rounds = f"{'/'.join(str(n) for n in counts)} rounds" if counts else "rounds"
    return (
        f"mean over {rounds}; ± is the 95% interval (Student t over rounds); "
        "speedup = baseline TPOT / config TPOT (95% interval), tok/s ratio = config / baseline"
    )


def repetition(report: Report) -> Table:
    """Per config and domain: the output's repetition (its most repetitive case), the
    baseline's beside it, and whether it is degenerate (see ``report/degenerate.py``)."""
    short = short_labels(report.configs)
    worst: dict[tuple[str, str], tuple[float, float | None, bool]] = {}
    baseline_rows: set[tuple[str, str]] = set()
    for config, case, metrics, domain in _cases(report.configs):
        value = metrics.repetition
        if value is None:
            continue
        key = (_label(short, config), domain)
        found = case.repetition
        flagged = bool(found and found.degenerate)
        before = worst.get(key)
        if _baseline(config):
            baseline_rows.add(key)
        # A degenerate case first, then the most repetitive: the row shows the worst.
        if before is None or (flagged, value) > (before[2], before[0]):
            worst[key] = (float(value), found.baseline if found else None, flagged)
    header = ["config", "domain", "repetition", "baseline", "output"]
    rows = []
    for key in sorted(worst, key=lambda k: _row_order(short, k)):
        value, base, flagged = worst[key]
        shown = "baseline" if key in baseline_rows else "DEGENERATE" if flagged else "ok"
        rows.append([key[0], key[1], f"{value:.2f}", figures.number(base, 2), shown])
    return header, rows


def accept_histograms(report: Report) -> dict[str, dict[str, list[int]]]:
    """Per domain (in :func:`domain_rank` order), then per config label: the summed
    histogram of correct drafts per verify step over the config's throughput cases.

    The baseline (NONE) drafts nothing and is left out; a domain with no verify step
    at all is left out.
    """
    out: dict[str, dict[str, list[int]]] = {}
    speculative = (c for c in report.configs if not _baseline(c))
    for config, _, metrics, domain in _cases(speculative):
        if metrics.accept_histogram:
            total = out.setdefault(domain, {}).setdefault(config.label, [])
            _add_counts(total, metrics.accept_histogram)
    return {
        d: h for d, h in sorted(out.items(), key=lambda kv: domain_rank(kv[0])) if any(h.values())
    }


def configs(found: Sequence[ConfigResults]) -> Table:
    """The per-config table: readiness, pass rate, pass@k (one column per k the report has),
    accept length, whether the server restarted, and the lossless checks when any ran.
    The terminal summary and the Markdown summary lay out this one table."""
    ks = sorted({p.k for c in found for p in c.pass_at_k})
    lossless = any(c.lossless for c in found)
    header = ["config", "ready", "pass rate", *(f"pass@{k}" for k in ks), "accept length"]
    header += ["restarted", *(["lossless"] if lossless else [])]
    return header, [_config_row(c, ks, lossless) for c in found]


def _config_row(c: ConfigResults, ks: list[int], lossless: bool) -> list[str]:
    service = c.service
    passk = {p.k: p.value for p in c.pass_at_k}
    row = [
        c.label,
        "error" if c.errors else _seconds(service.get("ready_seconds"), 1),
        pass_rate(c.pass_rate, c.coding),
        *(figures.number(passk.get(k), 2) for k in ks),
        figures.number(c.accept_length, 2),
        restarted(service.get("restarted"), service.get("restart_proven")),
    ]
    return row + ([lossless_cell(c.lossless)] if lossless else [])


def _seconds(value: Any, digits: int) -> str:
    shown = figures.number(value, digits)
    return shown if shown == figures.MISSING else f"{shown} s"


# The start-phase columns: (field of a config's start_phases, header).
START_COLUMNS = (
    ("total_seconds", "start"),
    ("load_seconds", "load"),
    ("kv_cache_seconds", "KV cache"),
    ("graph_capture_seconds", "CUDA graphs"),
    ("warmup_seconds", "warm-up"),
    ("other_seconds", "other"),
    ("first_generate_seconds", "first generate"),
)


def start_phases(found: Sequence[ConfigResults]) -> Table:
    """Per config that was started: where its start's seconds went (server log and plugin
    clock) and whether it loaded through the weight cache; no rows when none was started."""
    header = ["config", *(h for _, h in START_COLUMNS), "weight cache"]
    rows: list[list[str]] = []
    for c in found:
        if c.start_phases is None:
            continue
        seconds = (_seconds(getattr(c.start_phases, field), 2) for field, _ in START_COLUMNS)
        rows.append([c.label, *seconds, c.start_phases.weight_cache or "off"])
    return header, rows


def pass_rate(rate: PassRate | None, coding: Sequence[CodingRecord]) -> str:
    """The pass-rate cell. The rate is the mean pass@1; with several samples per problem
    the count that equals it is of samples, not of problems right in every sample."""
    if rate is None:
        return figures.MISSING
    samples = {r.samples for r in coding}
    if samples <= {1}:
        return f"{rate.passed}/{rate.total} ({rate.rate:.0%})"
    if len(samples) == 1:
        right = sum(r.correct for r in coding)
        return f"{right}/{samples.pop() * len(coding)} samples ({rate.rate:.0%})"
    return f"{rate.rate:.0%} (mean pass@1)"


def restarted(value: Any, proven: Any = True) -> str:
    """``yes``, ``no (live)`` (the live server already ran the config) or ``not proven``."""
    if value is None:
        return figures.MISSING
    if value and proven is False:
        return "not proven"
    return "yes" if value else "no (live)"


def lossless_cell(results: Sequence[LosslessRecord]) -> str:
    """``pass``, or ``FAILED (n/m)`` with how many lossless checks failed."""
    if not results:
        return figures.MISSING
    failed = sum(1 for r in results if not r.passed)
    return f"FAILED ({failed}/{len(results)})" if failed else "pass"
