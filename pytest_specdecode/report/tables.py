"""The sweep's tables as cells: throughput with intervals and speedup, acceptance, verdict, Pareto.

Each builder returns a header and rows of strings from the report dict; the
terminal summary lays them out in fixed width and the Markdown summary as
GFM, so both show the same figures the same way.

Intervals read ``30,572 ±2.1%``: the mean over the case's rounds and the half
width of its 95% interval (Student t over rounds) relative to it; accept
length ``3.21 ±0.04`` in tokens. Speedup reads ``2.41x (2.30-2.52)``: baseline
TPOT / config TPOT with its 95% interval.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_specdecode.config.load_options import DOMAINS
from pytest_specdecode.output import figures
from pytest_specdecode.report.verdict import case_shape, mean

Table = tuple[list[str], list[list[str]]]
MAX_POSITIONS = 8
"""Draft positions shown in the acceptance table (the JSON report keeps all)."""


SHORT_KEYS = ("algorithm", "budget", "topk", "window", "draft_model")  # what a short label names


def short_labels(configs: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Config labels reduced to the keys that differ between the measured speculative configs.

    A budget sweep's rows read ``budget=4``, ``budget=8``... instead of the
    whole label repeated; the baseline keeps its label (``NONE``); a single
    speculative config keeps its full label.
    """
    measured = [c for c in configs if c.get("throughput")]
    spec = [c for c in measured if not _baseline(c)]
    varying = [k for k in SHORT_KEYS if len({str(_config(c).get(k)) for c in spec}) > 1]
    extras = {str(_config(c).get("extra")) for c in measured}
    shorten = len(spec) > 1 and len(extras) < 2
    return {
        str(c.get("label")): " ".join(f"{k}={_config(c).get(k)}" for k in varying)
        if shorten and varying and not _baseline(c)
        else str(c.get("label"))
        for c in configs
    }


def _config(entry: Mapping[str, Any]) -> Mapping[str, Any]:
    return entry.get("config") or {}


def _baseline(entry: Mapping[str, Any]) -> bool:
    return _config(entry).get("algorithm") == "NONE"


def _label(short: Mapping[str, str], entry: Mapping[str, Any]) -> str:
    label = str(entry.get("label"))
    return short.get(label, label)


Case = tuple[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any], str]


def _cases(configs: Iterable[Mapping[str, Any]]) -> Iterator[Case]:
    """(config, case, the case's metrics, its domain) per throughput case, config by config."""
    for config in configs:
        for case in config.get("throughput") or []:
            metrics = case.get("metrics") or {}
            yield config, case, metrics, case_shape(str(case.get("case")), metrics)[2]


def _interval(metrics: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    found = (metrics.get("intervals") or {}).get(name)
    return found if isinstance(found, Mapping) else None


def with_interval(metrics: Mapping[str, Any], name: str, digits: int, *, relative: bool) -> str:
    """``30,572 ±2.1%`` (relative) or ``3.21 ±0.04``; the plain figure with one round."""
    found = _interval(metrics, name)
    value = found.get("mean") if found else None
    if not isinstance(value, (int, float)):
        value = mean(metrics, name) if found else metrics.get(name)
    shown = figures.rate(value) if name == "tok_s" else figures.number(value, digits)
    if shown == figures.MISSING or not found:
        return shown
    low, high = found.get("low"), found.get("high")
    if not isinstance(low, (int, float)) or not isinstance(high, (int, float)):
        return shown
    half = (high - low) / 2
    if relative:
        return f"{shown} ±{half / value * 100:.1f}%" if value else shown
    return f"{shown} ±{half:.{digits}f}"


def ratio_cell(found: Mapping[str, Any] | None, *, interval: bool = True) -> str:
    """``2.41x (2.30-2.52)``; ``2.41x`` without an interval; ``-`` without a value."""
    if not found or not isinstance(found.get("value"), (int, float)):
        return figures.MISSING
    text = f"{found['value']:.2f}x"
    low, high = found.get("low"), found.get("high")
    if interval and isinstance(low, (int, float)) and isinstance(high, (int, float)):
        text += f" ({low:.2f}-{high:.2f})"
    return text


def ordered_cases(
    report: Mapping[str, Any],
) -> list[tuple[tuple[Any, ...], int, Mapping[str, Any], Any]]:
    """(case order, config position, config, case) for every throughput case, in table
    order: context, load, domain, then the configs as they ran."""
    out = []
    for position, config in enumerate(report.get("configs") or []):
        for case in config.get("throughput") or []:
            metrics = case.get("metrics") or {}
            context, load, domain = case_shape(str(case.get("case")), metrics)
            head = load.split("-")[0]
            try:
                load_key: tuple[int, float] = (0 if head.startswith("c") else 1, float(head[1:]))
            except ValueError:
                load_key = (2, 0.0)
            order = (
                context if context is not None else 1 << 30,
                load_key,
                domain_rank(domain),
                domain,
            )
            out.append((order, position, config, case))
    out.sort(key=lambda entry: (entry[0], entry[1]))
    return out


def throughput(report: Mapping[str, Any], short: Mapping[str, str] | None = None) -> Table:
    """One row per case and config: tok/s, TPOT, accept length, speedup, tok/s ratio."""
    configs = list(report.get("configs") or [])
    short = short_labels(configs) if short is None else short
    slo = any(metrics.get("slo") for _, _, metrics, _ in _cases(configs))
    header = ["case", "config", "tok/s", "TPOT ms", "accept", "speedup", "tok/s ratio"]
    header += ["goodput req/s", "SLO met"] if slo else []
    rows = [_throughput_row(short, c, case, slo) for _, _, c, case in ordered_cases(report)]
    return header, rows


def _throughput_row(
    short: Mapping[str, str], config: Mapping[str, Any], case: Mapping[str, Any], slo: bool
) -> list[str]:
    metrics = case.get("metrics") or {}
    baseline = _baseline(config)
    speedup = case.get("speedup") or {}
    errors = f" ({metrics['errors']} errors)" if metrics.get("errors") else ""
    row = [
        str(case.get("case")),
        _label(short, config),
        with_interval(metrics, "tok_s", 0, relative=True) + errors,
        with_interval(metrics, "tpot_ms", 2, relative=True),
        with_interval(metrics, "accept_length", 2, relative=False),
        "1.00x (baseline)" if baseline else ratio_cell(speedup.get("tpot")),
        "1.00x" if baseline else ratio_cell(speedup.get("tok_s"), interval=False),
    ]
    if slo:
        attained = metrics.get("slo_attainment")
        row += [
            figures.number(metrics.get("goodput"), 2),
            f"{attained:.0%}" if isinstance(attained, (int, float)) else figures.MISSING,
        ]
    return row


def latency(report: Mapping[str, Any], short: Mapping[str, str] | None = None) -> Table:
    """One row per case and config: what a single request sees (TPOT and tok/s are the
    throughput table's), case by case as the throughput table is."""
    short = short_labels(list(report.get("configs") or [])) if short is None else short
    header = ["case", "config", "req tok/s p50", "TTFT p50/p99 ms", "ITL p50 ms", "tok/chunk",
              "errors"]  # fmt: skip
    rows = []
    for _, _, config, case in ordered_cases(report):
        m = case.get("metrics") or {}
        rows.append(
            [
                str(case.get("case")),
                _label(short, config),
                figures.rate(m.get("req_tok_s_p50")),
                "/".join(figures.number(m.get(f"ttft_ms_{p}"), 1) for p in ("p50", "p99")),
                figures.number(m.get("itl_ms_p50"), 2),
                figures.number(m.get("tokens_per_chunk_mean"), 2),
                str(m.get("errors", 0)),
            ]
        )
    return header, rows


def acceptance(report: Mapping[str, Any]) -> Table:
    """Per speculative config and domain: accept length and acceptance rate per draft position."""
    configs = list(report.get("configs") or [])
    short = short_labels(configs)
    sums: dict[tuple[str, str], list[int]] = {}
    tokens: dict[tuple[str, str], list[float]] = {}
    for config, _, metrics, domain in _cases(c for c in configs if not _baseline(c)):
        key = (_label(short, config), domain)
        hist = metrics.get("accept_histogram")
        if isinstance(hist, list):
            _add_counts(sums.setdefault(key, []), hist)
        _add_tokens(tokens.setdefault(key, [0.0, 0.0]), metrics)
    positions = min(MAX_POSITIONS, max((len(h) - 1 for h in sums.values()), default=0))
    header = ["config", "domain", "accept length", "verify steps"]
    header += [f"pos {i}" for i in range(1, positions + 1)]
    keys = sorted(tokens, key=lambda k: _row_order(short, k))  # every case adds to tokens
    rows = [_acceptance_row(k, sums.get(k, []), tokens[k], positions) for k in keys]
    return header, [row for row in rows if row]


def _add_counts(total: list[int], hist: list[Any]) -> None:
    """Add a histogram into a running one; a count that is not an int (a bool included) is 0."""
    total += [0] * (len(hist) - len(total))
    for i, n in enumerate(hist):
        total[i] += n if isinstance(n, int) and not isinstance(n, bool) else 0


def _add_tokens(total: list[float], metrics: Mapping[str, Any]) -> None:
    done, steps = metrics.get("completion_tokens"), metrics.get("spec_verify_ct")
    if isinstance(done, (int, float)) and isinstance(steps, (int, float)) and steps:
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


def ranks_several(report: Mapping[str, Any]) -> bool:
    """Whether the verdict chose among configs: several of this run's, or a compared
    run's beside them (one config alone has nothing to be ranked against)."""
    found = report.get("verdict")
    if not isinstance(found, Mapping):
        return False
    measured = sum(1 for c in report.get("configs") or [] if c.get("throughput"))
    groups = [g for g in found.get("groups") or [] if isinstance(g, Mapping)]
    return measured > 1 or any(len(g.get("members") or []) > 1 for g in groups)


def verdict(report: Mapping[str, Any]) -> Table:
    """One row per load point and domain: the verdict's set (``clear: budget=8``,
    ``tie within noise: budget=8, budget=16``), each member's correctness coverage, and
    the configs whose figures could not be ranked."""
    found = report.get("verdict") or {}
    short = short_labels(list(report.get("configs") or []))
    by_speedup = found.get("ranked_by") == "speedup"
    score = "speedup" if by_speedup else "tok/s"
    header = ["load", "domain", "best config", score, "over contexts", "runner-up"]
    header.append("correctness")
    groups = [g for g in found.get("groups") or [] if isinstance(g, Mapping)]
    unranked = any(g.get("unranked") for g in groups)
    if unranked:
        header.append("not ranked")
    crossing = _break_even_cells(report)
    if crossing:
        header.append("best's break-even")
    rows = []
    for group in groups:
        row = _verdict_row(group, short, by_speedup, unranked)
        if crossing:
            row.append(crossing.get((str(group.get("best")), str(group.get("domain"))), "-"))
        rows.append(row)
    return header, rows


def _verdict_row(
    group: Mapping[str, Any], short: Mapping[str, str], by_speedup: bool, unranked: bool
) -> list[str]:
    best, runner = group.get("best"), group.get("runner_up")
    members = {
        str(m.get("config")): m for m in group.get("members") or [] if isinstance(m, Mapping)
    }
    chosen = [str(b) for b in group.get("best_set") or ([best] if best else [])]

    def name(label: str) -> str:
        return _short(short, label, members.get(label) or {})

    margin = str(group.get("margin") or "only candidate")
    named = ", ".join(name(b) + _unchecked(members.get(b)) for b in chosen)
    second = _score(group.get("runner_up_score"), by_speedup)
    coverage = [
        (f"{name(b)}: " if len(chosen) > 1 else "") + coverage_text(members.get(b)) for b in chosen
    ]
    row = [
        str(group.get("load")),
        str(group.get("domain")),
        f"{margin}: {named}" if chosen else "none passed every gate",
        _score(group.get("score"), by_speedup),
        _contexts_cell(group, by_speedup),
        f"{name(str(runner))} ({second})" if runner else "-",
        "; ".join(coverage) or "-",
    ]
    return row + ([_unranked_cell(group, name)] if unranked else [])


def _contexts_cell(group: Mapping[str, Any], by_speedup: bool) -> str:
    contexts = ", ".join(str(c) for c in group.get("contexts") or [])
    spread = group.get("range") or []
    if len(spread) == 2 and spread[0] != spread[1]:
        contexts += f" ({_score(spread[0], by_speedup)} to {_score(spread[1], by_speedup)})"
    return contexts or "-"


def _unranked_cell(group: Mapping[str, Any], name: Callable[[str], str]) -> str:
    left = [
        f"{name(str(u.get('config')))}: {u.get('reason')}"
        + (f" ({u.get('detail')})" if u.get("detail") else "")
        for u in group.get("unranked") or []
        if isinstance(u, Mapping)
    ]
    return "; ".join(left) or "-"


def _short(short: Mapping[str, str], label: str, member: Mapping[str, Any]) -> str:
    """A verdict member's short label; a saved run's config keeps its ``(saved run N)``."""
    saved = member.get("saved")
    tail = f" (saved run {saved})"
    if saved and label.endswith(tail):
        base = label.removesuffix(tail)
        return short.get(base, base) + tail
    return short.get(label, label)


def checked(member: Mapping[str, Any] | None) -> bool | None:
    """Whether coding or lossless checked a verdict member (None: the report does not say)."""
    found = (member or {}).get("coverage")
    return bool(found.get("checked")) if isinstance(found, Mapping) else None


def _unchecked(member: Mapping[str, Any] | None) -> str:
    return " (correctness not checked)" if checked(member) is False else ""


def coverage_text(member: Mapping[str, Any] | None) -> str:
    """A member's correctness coverage in a few words: pass rate, lossless, accept floor."""
    found = (member or {}).get("coverage")
    if not isinstance(found, Mapping):
        return "-"  # a report from before coverage was recorded
    if not found.get("checked"):
        return "not checked (no coding or lossless result)"
    passed, total = found.get("passed"), found.get("total")
    rate = f"pass rate {passed}/{total}" if total else "pass rate not checked"
    return f"{rate}, lossless {found.get('lossless')}, accept floor {found.get('accept_floor')}"


def _break_even_cells(report: Mapping[str, Any]) -> dict[tuple[str, str], str]:
    """Per (config label, domain), its break-even load in a few words (``report.break_even``)."""
    out: dict[tuple[str, str], str] = {}
    for r in report.get("break_even") or []:
        if not isinstance(r, Mapping):
            continue
        kind = "c" if r.get("load_kind") == "concurrency" else "r"
        loads = [x for x in r.get("loads") or [] if isinstance(x, (int, float))]
        at = r.get("break_even")
        if r.get("status") == "crosses" and isinstance(at, (int, float)):
            cell = f"{kind}~{figures.number(at, 1 if at < 10 else 0)}"
        elif r.get("status") == "above" and loads:
            cell = f"> {kind}={figures.plain(max(loads))}"
        elif r.get("status") == "below" and loads:
            cell = f"< {kind}={figures.plain(min(loads))}"
        else:
            continue
        out[(str(r.get("config")), str(r.get("domain")))] = cell
    return out


def _score(value: Any, by_speedup: bool) -> str:
    if not isinstance(value, (int, float)):
        return figures.MISSING
    return f"{value:.2f}x" if by_speedup else figures.rate(value)


def pareto(report: Mapping[str, Any]) -> Table:
    """The Pareto front per context and domain: points no other beats on both axes."""
    short = short_labels(list(report.get("configs") or []))
    header = ["context", "domain", "config", "load", "per-request tok/s", "aggregate tok/s"]
    rows = []
    for group in (report.get("verdict") or {}).get("pareto") or []:
        for point in group.get("points") or []:
            if point.get("front"):
                rows.append(
                    [
                        str(group.get("context")),
                        str(group.get("domain")),
                        short.get(str(point.get("config")), str(point.get("config"))),
                        str(point.get("load")),
                        figures.rate(point.get("req_tok_s")),
                        figures.rate(point.get("tok_s")),
                    ]
                )
    return header, rows


def excluded(report: Mapping[str, Any]) -> dict[str, list[str]]:
    """The configs kept out of the verdict by label, with the gates each failed."""
    found = (report.get("verdict") or {}).get("excluded") or []
    return {str(e.get("config")): [str(r) for r in e.get("reasons") or []] for e in found}


@dataclass(frozen=True)
class Standing:
    """Each config's place in the verdict, indexed once: a page of many configs looks every
    config up here instead of scanning every group's members for each one."""

    excluded: Mapping[str, list[str]]
    """The gates each config kept out of the verdict failed, by label."""
    members: Mapping[str, list[Mapping[str, Any]]]
    """Each config's verdict members (one per group it was ranked in), by label."""


def standing(report: Mapping[str, Any]) -> Standing:
    """The verdict's exclusions and members by config label, in one pass over them."""
    members: dict[str, list[Mapping[str, Any]]] = {}
    for group in (report.get("verdict") or {}).get("groups") or []:
        if not isinstance(group, Mapping):
            continue
        for member in group.get("members") or []:
            if isinstance(member, Mapping) and isinstance(member.get("config"), str):
                members.setdefault(member["config"], []).append(member)
    return Standing(excluded(report), members)


def excluded_lines(report: Mapping[str, Any]) -> list[str]:
    """One line per config kept out of the verdict, with the gates it failed."""
    return [f"{label}: {', '.join(reasons)}" for label, reasons in excluded(report).items()]


def rounds_note(report: Mapping[str, Any]) -> str:
    """How the figures were measured, for the line above the throughput table."""
    found = (m.get("rounds") for _, _, m, _ in _cases(report.get("configs") or []))
    counts = sorted({int(n) for n in found if isinstance(n, int)})
    rounds = f"{'/'.join(str(n) for n in counts)} rounds" if counts else "rounds"
    return (
        f"mean over {rounds}; ± is the 95% interval (Student t over rounds); "
        "speedup = baseline TPOT / config TPOT (95% interval), tok/s ratio = config / baseline"
    )


def repetition(report: Mapping[str, Any]) -> Table:
    """Per config and domain: the output's repetition (its most repetitive case), the
    baseline's beside it, and whether it is degenerate (see ``report/degenerate.py``)."""
    configs = list(report.get("configs") or [])
    short = short_labels(configs)
    worst: dict[tuple[str, str], tuple[float, Any, bool]] = {}
    baseline_rows: set[tuple[str, str]] = set()
    for config, case, metrics, domain in _cases(configs):
        value = metrics.get("repetition")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        key = (_label(short, config), domain)
        found = case.get("repetition") or {}
        flagged = bool(found.get("degenerate"))
        before = worst.get(key)
        if _baseline(config):
            baseline_rows.add(key)
        # A degenerate case first, then the most repetitive: the row shows the worst.
        if before is None or (flagged, value) > (before[2], before[0]):
            worst[key] = (float(value), found.get("baseline"), flagged)
    header = ["config", "domain", "repetition", "baseline", "output"]
    rows = []
    for key in sorted(worst, key=lambda k: _row_order(short, k)):
        value, base, flagged = worst[key]
        shown = "baseline" if key in baseline_rows else "DEGENERATE" if flagged else "ok"
        rows.append([key[0], key[1], f"{value:.2f}", figures.number(base, 2), shown])
    return header, rows


def domain_rank(domain: str) -> int:
    """Where a prompt domain sorts: the shipped domains in their order, then the rest."""
    return DOMAINS.index(domain) if domain in DOMAINS else len(DOMAINS)


def accept_histograms(report: Mapping[str, Any]) -> dict[str, dict[str, list[int]]]:
    """Per domain (in :func:`domain_rank` order), then per config label: the summed
    histogram of correct drafts per verify step over the config's throughput cases.

    The baseline (NONE) drafts nothing and is left out; a count that is not an int
    (a bool included) counts 0; a domain with no verify step at all is left out.
    """
    out: dict[str, dict[str, list[int]]] = {}
    speculative = (c for c in report.get("configs") or [] if not _baseline(c))
    for config, _, metrics, domain in _cases(speculative):
        hist = metrics.get("accept_histogram")
        if isinstance(hist, list) and hist:
            _add_counts(out.setdefault(domain, {}).setdefault(str(config.get("label")), []), hist)
    return {
        d: h for d, h in sorted(out.items(), key=lambda kv: domain_rank(kv[0])) if any(h.values())
    }


def configs(found: Sequence[Mapping[str, Any]]) -> Table:
    """The per-config table: readiness, pass rate, pass@k (one column per k the report has),
    accept length, whether the server restarted, and the lossless checks when any ran.
    The terminal summary and the Markdown summary lay out this one table."""
    ks = sorted({p["k"] for c in found for p in c.get("pass_at_k") or []})
    lossless = any(c.get("lossless") for c in found)
    header = ["config", "ready", "pass rate", *(f"pass@{k}" for k in ks), "accept length"]
    header += ["restarted", *(["lossless"] if lossless else [])]
    return header, [_config_row(c, ks, lossless) for c in found]


def _config_row(c: Mapping[str, Any], ks: list[Any], lossless: bool) -> list[str]:
    service = c.get("service") or {}
    passk = {p["k"]: p.get("value") for p in c.get("pass_at_k") or []}
    row = [
        str(c.get("label", "?")),
        "error" if c.get("errors") else _seconds(service.get("ready_seconds"), 1),
        pass_rate(c.get("pass_rate"), c.get("coding") or []),
        *(figures.number(passk.get(k), 2) for k in ks),
        figures.number(c.get("accept_length"), 2),
        restarted(service.get("restarted"), service.get("restart_proven")),
    ]
    return row + ([lossless_cell(c.get("lossless") or [])] if lossless else [])


def _seconds(value: Any, digits: int) -> str:
    shown = figures.number(value, digits)
    return shown if shown == figures.MISSING else f"{shown} s"


# The start-phase columns: (key of a config's start_phases, header).
START_COLUMNS = (
    ("total_seconds", "start"),
    ("load_seconds", "load"),
    ("kv_cache_seconds", "KV cache"),
    ("graph_capture_seconds", "CUDA graphs"),
    ("warmup_seconds", "warm-up"),
    ("other_seconds", "other"),
    ("first_generate_seconds", "first generate"),
)


def start_phases(found: Sequence[Mapping[str, Any]]) -> Table:
    """Per config that was started: where its start's seconds went (server log and plugin
    clock) and whether it loaded through the weight cache; no rows when none was started."""
    header = ["config", *(h for _, h in START_COLUMNS), "weight cache"]
    rows: list[list[str]] = []
    for c in found:
        phases = c.get("start_phases")
        if not isinstance(phases, Mapping):
            continue
        rows.append(
            [
                str(c.get("label", "?")),
                *(_seconds(phases.get(k), 2) for k, _ in START_COLUMNS),
                str(phases.get("weight_cache") or "off"),
            ]
        )
    return header, rows


def pass_rate(rate: Mapping[str, Any] | None, coding: Sequence[Mapping[str, Any]]) -> str:
    """The pass-rate cell. The rate is the mean pass@1; with several samples per problem
    the count that equals it is of samples, not of problems right in every sample."""
    if not rate:
        return figures.MISSING
    samples = {r.get("samples", 1) for r in coding}
    if samples <= {1}:
        return f"{rate['passed']}/{rate['total']} ({rate['rate']:.0%})"
    if len(samples) == 1:
        right = sum(int(r.get("correct", 0)) for r in coding)
        return f"{right}/{samples.pop() * len(coding)} samples ({rate['rate']:.0%})"
    return f"{rate['rate']:.0%} (mean pass@1)"


def restarted(value: Any, proven: Any = True) -> str:
    """``yes``, ``no (live)`` (the live server already ran the config) or ``not proven``."""
    if value is None:
        return figures.MISSING
    if value and proven is False:
        return "not proven"
    return "yes" if value else "no (live)"


def lossless_cell(results: Sequence[Mapping[str, Any]]) -> str:
    """``pass``, or ``FAILED (n/m)`` with how many lossless checks failed."""
    if not results:
        return figures.MISSING
    failed = sum(1 for r in results if not r.get("passed"))
    return f"FAILED ({failed}/{len(results)})" if failed else "pass"
