"""What a sweep decides: speedup over the baseline, the best config, the Pareto front.

Speedup (docs/metrics.md) is the baseline's TPOT over the config's TPOT
for the same case (context, load and domain), the baseline being algorithm
NONE on the same server build: a config of this run, else the NONE cases of
a saved run (``--dflash-baseline``, then the compared run). The output tok/s
ratio is given beside it. Both come with a 95% interval, round by round
when the rounds pair up (round i sends the same prompts under every config),
see :func:`pytest_specdecode.throughput.stats.paired_ratio_interval`; neither
is ever derived from accept length.

The verdict, per load point (concurrency or rate) and domain, is the config
with the best speedup (the geometric mean over the group's contexts) among
the configs that passed every gate; without a baseline it ranks by output
tok/s and says so. Its margin over the runner-up is ``clear`` when the best
config's 95% interval lies above the runner-up's in every context, else
``within noise`` (measure more rounds before trusting the order). The
Pareto front, per context and domain, holds the (config, load) points that
no other point beats on both per-request tok/s and aggregate tok/s.

Everything works on the typed report (:class:`~pytest_specdecode.report.model.Report`),
so a saved report is judged the same way as a live run. Each judged value is computed
from the report and returned (:func:`speedups`, :func:`speedup_method`, :func:`decide`);
:meth:`RunOutputs.report` sets them on it.
"""

from __future__ import annotations

import argparse
import itertools
import math
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

from pytest_specdecode.config.load_options import DOMAINS
from pytest_specdecode.report.model import (
    Config,
    ConfigResults,
    Coverage,
    Excluded,
    Metrics,
    Pareto,
    ParetoPoint,
    Ratio,
    Report,
    RoundSummary,
    Speedup,
    SpeedupMethod,
    ThroughputRecord,
    Unranked,
    Verdict,
    VerdictGroup,
    VerdictMember,
)
from pytest_specdecode.throughput import stats
from pytest_specdecode.throughput.comparison import CaseRow
from pytest_specdecode.throughput.metrics import REQ_TOK_S, TOK_S, TPOT_MS, single_key
from pytest_specdecode.throughput.workload import parse_case_id

NO_BASELINE = (
    "no speedup: this run has no non-speculative baseline; add algorithm NONE to it "
    "(e.g. --dflash-sweep 'algorithm=NONE,DFLASH;budget=4,8') or pass --dflash-baseline "
    "with a saved run of --dflash-config algorithm=NONE"
)
METHOD = (
    "baseline TPOT / config TPOT, and config tok/s / baseline tok/s, with a 95% "
    "interval: geometric mean of the per-round ratios (round i has the same prompts under "
    "every config), t interval on their logs; unpaired: ratio of means, delta method"
)


def samples(metrics: Metrics, name: str) -> list[float]:
    """Per-round values of ``name`` (``tok_s``, ``tpot_ms``, ...) from a case's metrics.

    Reports written before intervals existed have one value: the case's own.
    """
    found = metrics.interval(name)
    values = stats.clean(found.values) if found is not None else []
    if values:
        return values
    return stats.clean([metrics.figure(single_key(name))])


def mean(metrics: Metrics, name: str) -> float | None:
    """The mean over rounds of ``name``."""
    values = samples(metrics, name)
    return sum(values) / len(values) if values else None


def case_shape(case: str, metrics: Metrics) -> tuple[int | None, str, str]:
    """(context, load, domain) of a case: from its metrics, else from its id."""
    context, load, domain = metrics.context, metrics.load, metrics.domain
    if context is not None and load is not None and domain is not None:
        return context, load, domain
    try:
        parsed = parse_case_id(case)
    except argparse.ArgumentTypeError:  # a report from before domains: ctx1024-c8
        match = re.match(r"ctx(\d+)-c(\d+)", case)
        if match is None:
            return (context, case, "-")
        return int(match[1]), f"c{match[2]}", "-"
    return parsed.context, parsed.load, parsed.domain


def metrics_of(info: Mapping[str, Any]) -> Metrics:
    """A saved run's ``extra_info`` as a case's metrics (a figure of the wrong type left out:
    a saved run's record may hold anything)."""
    try:
        return msgspec.convert(info, Metrics)
    except msgspec.ValidationError:
        usable = {}
        for name, value in info.items():
            try:
                msgspec.convert({name: value}, Metrics)
            except msgspec.ValidationError:
                continue
            usable[name] = value
        return msgspec.convert(usable, Metrics)


def throughput_cases(report: Report) -> list[tuple[ConfigResults, ThroughputRecord]]:
    """Every throughput case of the report with its config, in the report's order: the
    order of the per-case values :func:`speedups` (and the other judges) return."""
    return [(config, case) for config in report.configs for case in config.throughput]


# --- speedup ------------------------------------------------------------------


def _ratio(found: stats.Interval | None) -> Ratio | None:
    if found is None:
        return None
    return Ratio(value=found.value, low=found.low, high=found.high, n=found.n)


def _speedup(base: Metrics, now: Metrics, source: str | None = None) -> Speedup:
    return Speedup(
        tpot=_ratio(stats.paired_ratio_interval(samples(base, TPOT_MS), samples(now, TPOT_MS))),
        tok_s=_ratio(stats.paired_ratio_interval(samples(now, TOK_S), samples(base, TOK_S))),
        baseline=source,
    )


def _session_baselines(configs: Sequence[ConfigResults]) -> list[ConfigResults]:
    return [c for c in configs if c.config.algorithm == "NONE"]


def speedups(
    report: Report, saved: Iterable[CaseRow] = (), saved_label: str | None = None
) -> list[Speedup | None]:
    """Every throughput case's speedup over its baseline, in :func:`throughput_cases`'
    order (None: a NONE config's case, or a case without a baseline)."""
    baselines = _session_baselines(report.configs)
    saved_none = {row.case: row for row in saved if row.algorithm == "NONE"}
    out: list[Speedup | None] = []
    for config, case in throughput_cases(report):
        found = _baseline_of(case.case, config, baselines, saved_none, saved_label)
        out.append(None if found is None else _speedup(found[0], case.metrics, found[1]))
    return out


def speedup_method(report: Report, found: Sequence[Speedup | None]) -> SpeedupMethod:
    """Where the speedups ``found`` (:func:`speedups`) took their baseline from, and how."""
    sources = {s.baseline for s in found if s is not None and s.baseline is not None}
    missing = throughput_cases(report) and not sources and not _session_baselines(report.configs)
    return SpeedupMethod(
        baseline=sorted(sources), missing=NO_BASELINE if missing else None, method=METHOD
    )


def _baseline_of(
    case: str,
    config: ConfigResults,
    baselines: list[ConfigResults],
    saved_none: Mapping[str, CaseRow],
    saved_label: str | None,
) -> tuple[Metrics, str] | None:
    """A case's baseline metrics and where they came from: this run's NONE case, else the
    saved run's (None for a NONE config, or with neither)."""
    if config.config.algorithm == "NONE":
        return None
    # Baselines with the config's own extra server flags first (same build and flags).
    mine = sorted(baselines, key=lambda b: b.config.extra != config.config.extra)
    found = _baseline_case(case, mine)
    if found is not None:
        return found[1], f"{found[0]} (this run)"
    if case in saved_none:
        return metrics_of(saved_none[case].extra_info), f"NONE (saved run {saved_label})"
    return None


def _baseline_case(case: str, baselines: list[ConfigResults]) -> tuple[str, Metrics] | None:
    for config in baselines:
        for found in config.throughput:
            if found.case == case:
                return config.label, found.metrics
    return None


# --- verdict ------------------------------------------------------------------


def _geo_mean(values: Sequence[float]) -> float | None:
    usable = [v for v in values if v > 0]
    return statistics.geometric_mean(usable) if usable else None


Score = tuple[float, float | None, float | None]
"""A config's figure on one case, with its 95% interval: (value, low, high)."""


def finite(value: float | None) -> float | None:
    """A finite float, else None (a NaN or infinite figure is no figure)."""
    return float(value) if value is not None and math.isfinite(value) else None


def _score(case: ThroughputRecord, config: ConfigResults, by_speedup: bool) -> Score | None:
    if case.client_limited is not None:
        return None  # its figures are the client's (report/client_limit.py): not ranked
    if not by_speedup:
        found = case.metrics.interval(TOK_S) or RoundSummary()
        value = mean(case.metrics, TOK_S)
        return None if value is None else (value, finite(found.low), finite(found.high))
    if config.config.algorithm == "NONE":
        return (1.0, 1.0, 1.0)
    ratio = (case.speedup.tpot if case.speedup else None) or Ratio()
    value = finite(ratio.value)
    return None if value is None else (value, finite(ratio.low), finite(ratio.high))


def _direction(found: Ratio | None) -> int:
    """+1 when a ratio's interval lies above 1, -1 when below, 0 when it holds 1 (or is
    unknown); without bounds the value alone says."""
    if found is None:
        return 0
    value, low, high = finite(found.value), finite(found.low), finite(found.high)
    low = value if low is None else low
    high = value if high is None else high
    if low is not None and low > 1:
        return 1
    if high is not None and high < 1:
        return -1
    return 0


def inconsistent(case: ThroughputRecord, config: ConfigResults) -> str | None:
    """Why a case's figures cannot rank its config by speedup (None when they can): its
    TPOT is 0 or missing, or the TPOT speedup and the tok/s ratio point opposite ways
    beyond their intervals (a loaded client, a broken clock: not a speedup to act on)."""
    tpot = mean(case.metrics, TPOT_MS)
    if tpot is None or tpot <= 0:
        return f"{case.case}: TPOT {'missing' if tpot is None else 'is 0'}"
    if config.config.algorithm == "NONE":
        return None
    speedup = case.speedup or Speedup()
    value = finite(speedup.tpot.value) if speedup.tpot else None
    if value is None or value <= 0:
        return f"{case.case}: no TPOT speedup"
    if _direction(speedup.tpot) * _direction(speedup.tok_s) < 0:
        tok = finite(speedup.tok_s.value) if speedup.tok_s else None
        return f"{case.case}: TPOT speedup {value:.2f}x but tok/s ratio {tok or 0:.2f}x"
    return None


def coverage(config: ConfigResults, min_accept_length: float | None) -> Coverage:
    """What checked a config's correctness: its coding pass rate, the lossless check and
    the accept floor; ``checked`` is False when neither coding nor lossless ran for it."""
    rate = config.pass_rate
    coding = bool(config.coding) or bool(rate and rate.total)
    counted = rate if rate and coding else None
    lossless = _lossless(config)
    return Coverage(
        checked=coding or lossless != "not checked",
        passed=counted.passed if counted else None,
        total=counted.total if counted else None,
        lossless=lossless,
        accept_floor=_accept_floor(config, min_accept_length),
    )


def _lossless(config: ConfigResults) -> str:
    if not config.lossless:
        return "not checked"
    return "fail" if any(not v.passed for v in config.lossless) else "pass"


def _accept_floor(config: ConfigResults, min_accept_length: float | None) -> str:
    accept = config.accept_length
    if config.config.algorithm == "NONE":
        return "no drafter"
    if min_accept_length is not None and accept is not None:
        return "held" if accept >= min_accept_length else "FAILED"
    return "not checked"


def saved_configs(report: Report, rows: Iterable[CaseRow], name: str) -> list[ConfigResults]:
    """A compared run's configs as configs of this report, labelled ``(saved run NAME)``,
    their speedups against this run's NONE case (else the saved run's own NONE), so the
    verdict ranks them beside this run's (:func:`decide`'s ``saved``, ``saved_name``)."""
    rows = list(rows)
    baselines = _session_baselines(report.configs)
    saved_none = {row.case: row for row in rows if row.algorithm == "NONE"}
    out: dict[str, ConfigResults] = {}
    for row in rows:
        if row.algorithm == "NONE" and baselines:
            continue  # this run's NONE is the reference; a second 1.0x says nothing
        label = f"{row.config or '?'} (saved run {name})"
        entry = out.setdefault(
            label, ConfigResults(label=label, config=Config(algorithm=row.algorithm))
        )
        case = ThroughputRecord(case=row.case, metrics=metrics_of(row.extra_info))
        if row.algorithm != "NONE":
            found = _baseline_case(row.case, baselines)
            base = found[1] if found else None
            if base is None and row.case in saved_none:
                base = metrics_of(saved_none[row.case].extra_info)
            if base is not None:
                case.speedup = _speedup(base, case.metrics)
        entry.throughput.append(case)
    return list(out.values())


Member = list[tuple[int | None, Score | None, str | None]]
"""A config's cases in one group: (context, score, why it cannot be ranked)."""
Ranked = tuple[float, str, dict[int | None, Score]]
"""A ranked config of a group: (its score, its label, its score per context)."""


def decide(
    report: Report,
    excluded: Mapping[str, Sequence[str]],
    saved: Sequence[ConfigResults] = (),
    saved_name: str | None = None,
) -> Verdict:
    """The verdict per (load, domain) and the Pareto front per (context, domain).

    ``excluded`` maps a config label to the gates it failed; those configs are
    never chosen (nor on a front), and the verdict lists why. ``saved`` are a
    compared run's configs (:func:`saved_configs` of the run ``saved_name``),
    ranked beside this run's.
    """
    configs = [*report.configs, *saved]
    by_speedup = any(case.speedup is not None for c in configs for case in c.throughput)
    floor = report.gates.min_accept_length
    covered = {c.label: coverage(c, floor) for c in configs}
    saved_of = {c.label: saved_name for c in saved}
    return Verdict(
        ranked_by="speedup" if by_speedup else "tok_s",
        groups=[
            _group(key, members, excluded, by_speedup, covered, saved_of)
            for key, members in _members(configs, by_speedup).items()
        ],
        excluded=[
            Excluded(config=label, reasons=list(reasons))
            for label, reasons in excluded.items()
            if reasons
        ],
        pareto=pareto(report, excluded),
    )


def _members(
    configs: Sequence[ConfigResults], by_speedup: bool
) -> dict[tuple[str, str], dict[str, Member]]:
    """Each config's cases per (load, domain), the groups in load then domain order."""
    groups: dict[tuple[str, str], dict[str, Member]] = {}
    for config in configs:
        for case in config.throughput:
            context, load, domain = case_shape(case.case, case.metrics)
            entry = (context, *_judge(case, config, by_speedup))
            groups.setdefault((load, domain), {}).setdefault(config.label, []).append(entry)
    return dict(sorted(groups.items(), key=lambda item: _group_order(*item[0])))


def _judge(
    case: ThroughputRecord, config: ConfigResults, by_speedup: bool
) -> tuple[Score | None, str | None]:
    """A case's score, else why it cannot be ranked (errors, inconsistent figures)."""
    if case.metrics.errors:
        return None, "errored case"
    odd = inconsistent(case, config) if by_speedup else None
    return (None, odd) if odd else (_score(case, config, by_speedup), None)


def _group_order(load: str, domain: str) -> tuple[Any, ...]:
    return (load_order(load), domain_rank(domain), domain)


def domain_rank(domain: str) -> int:
    """Where a prompt domain sorts: the shipped domains in their order, then the rest."""
    return DOMAINS.index(domain) if domain in DOMAINS else len(DOMAINS)


def load_order(load: str) -> tuple[int, float]:
    """Where a load point sorts: concurrencies (``c8``) by number, then request rates
    (``r2.5``), then anything else."""
    head = load.split("-")[0]
    try:
        return (0 if head.startswith("c") else 1, float(head[1:]))
    except ValueError:
        return (2, 0.0)


def _margin(best: dict[int | None, Score], runner: dict[int | None, Score]) -> str:
    """``clear`` when, in every context, the best's interval lies above the runner-up's;
    ``no interval`` when a bound is unknown, else ``within noise``."""
    lows_highs = [(best[c][1], runner[c][2]) for c in best if c in runner]
    if not lows_highs or any(low is None or high is None for low, high in lows_highs):
        return "no interval"
    clear = all(low > high for low, high in lows_highs if low is not None and high is not None)
    return "clear" if clear else "within noise"


def _group(
    key: tuple[str, str],
    members: dict[str, Member],
    excluded: Mapping[str, Sequence[str]],
    by_speedup: bool,
    covered: Mapping[str, Coverage],
    saved_of: Mapping[str, str | None],
) -> VerdictGroup:
    """The group's answer is a set: the top config and every config whose interval
    overlaps the top's in some context (not clearly below it). Ordered by score, then
    label, never by the order configs ran in, so identical runs give identical sets."""
    load, domain = key
    contexts = sorted({c for values in members.values() for c, _, _ in values if c is not None})
    scored, unranked = _rank(members, excluded, contexts)
    chosen, runner, margin = _choose(scored)
    top = scored[0] if scored else None
    figures = [s[0] for s in top[2].values()] if top else []
    return VerdictGroup(
        load=load,
        domain=domain,
        contexts=list(contexts),
        best=top[1] if top else None,
        best_set=[e[1] for e in chosen],
        score=top[0] if top else None,
        range=[min(figures), max(figures)] if figures else None,
        runner_up=runner[1] if runner else None,
        runner_up_score=runner[0] if runner else None,
        margin=margin,
        candidates=len(scored),
        ranked_by="speedup" if by_speedup else "tok_s",
        members=[_member(e, e in chosen, saved_of.get(e[1]), covered.get(e[1])) for e in scored],
        unranked=unranked,
    )


def _rank(
    members: Mapping[str, Member], excluded: Mapping[str, Sequence[str]], contexts: list[int]
) -> tuple[list[Ranked], list[Unranked]]:
    """The group's configs by score then label, and those it cannot rank, with why."""
    scored: list[Ranked] = []
    unranked: list[Unranked] = []
    for label, values in sorted(members.items()):
        if excluded.get(label):
            continue
        per_context = {c: s for c, s, _ in values if s is not None}
        why = _unranked(values, per_context, contexts)
        if why is not None:
            unranked.append(Unranked(config=label, reason=why[0], detail=why[1]))
            continue
        score = _geo_mean([s[0] for s in per_context.values()])
        if score is not None:
            scored.append((score, label, per_context))
    scored.sort(key=lambda entry: (-entry[0], entry[1]))
    return scored, unranked


def _unranked(
    values: Member, per_context: Mapping[int | None, Score], contexts: list[int]
) -> tuple[str, str] | None:
    """Why a config's cases cannot rank it in a group: (reason, detail), else None."""
    odd = [why for _, _, why in values if why]
    if odd:
        reason = "inconsistent figures" if odd[0] != "errored case" else "errored case"
        return reason, "; ".join(odd)
    if len(per_context) < len(values) or len(per_context) < len(contexts):
        return "missing case", ""  # not comparable over the group
    return None


def _choose(scored: list[Ranked]) -> tuple[list[Ranked], Ranked | None, str | None]:
    """The best set (the top and every config not clearly below it), the runner-up and
    the margin: None with one candidate, ``clear`` when the set is the top alone."""
    if not scored:
        return [], None, None
    top = scored[0]
    margins = {label: _margin(top[2], ctx) for _, label, ctx in scored[1:]}
    chosen = [e for e in scored if e is top or margins.get(e[1]) != "clear"]
    rest = [e for e in scored if e not in chosen]
    runner = rest[0] if rest else (chosen[1] if len(chosen) > 1 else None)
    if len(scored) == 1:
        return chosen, runner, None
    if len(chosen) == 1:
        return chosen, runner, "clear"
    noisy = any(margins.get(e[1]) == "no interval" for e in chosen)
    return chosen, runner, "no interval" if noisy else "tie within noise"


def _member(
    entry: Ranked, best: bool, saved: str | None, covered: Coverage | None
) -> VerdictMember:
    score, label, per_context = entry
    lows = [s[1] for s in per_context.values()]
    highs = [s[2] for s in per_context.values()]
    known = all(v is not None for v in lows + highs)
    return VerdictMember(
        config=label,
        saved=saved,
        score=score,
        low=_geo_mean([v for v in lows if v is not None]) if known else None,
        high=_geo_mean([v for v in highs if v is not None]) if known else None,
        best=best,
        coverage=msgspec.structs.replace(covered) if covered else Coverage(),
    )


# --- Pareto front --------------------------------------------------------------


def pareto(report: Report, excluded: Mapping[str, Sequence[str]]) -> list[Pareto]:
    """Per (context, domain): every (config, load) point, the non-dominated ones marked."""
    groups: dict[tuple[int, str], list[ParetoPoint]] = {}
    for config, case in throughput_cases(report):
        context, load, domain = case_shape(case.case, case.metrics)
        x, y = mean(case.metrics, REQ_TOK_S), mean(case.metrics, TOK_S)
        if context is None or x is None or y is None:
            continue
        groups.setdefault((context, domain), []).append(
            ParetoPoint(
                config=config.label,
                load=load,
                case=case.case,
                req_tok_s=x,
                tok_s=y,
                eligible=not excluded.get(config.label) and not case.metrics.errors,
            )
        )
    out = []
    for (context, domain), points in sorted(
        groups.items(), key=lambda item: (item[0][0], domain_rank(item[0][1]), item[0][1])
    ):
        mark_front(points)
        points.sort(key=lambda p: -(p.req_tok_s or 0.0))
        out.append(Pareto(context=context, domain=domain, points=points))
    return out


def mark_front(points: Sequence[ParetoPoint]) -> None:
    """Set each point's ``front``: eligible, and no eligible point is at least as good on
    both axes (``req_tok_s``, ``tok_s``) and better on one.

    By a sort, not all pairs (a 3,000-config sweep has thousands of points per group):
    walking the eligible points from the highest ``req_tok_s`` down, a point is on the
    front when it has the best ``tok_s`` of the points with its ``req_tok_s`` and beats
    every point with a higher one.
    """
    for p in points:
        p.front = False
    eligible = sorted(
        (
            (p.req_tok_s, p.tok_s, p)
            for p in points
            if p.eligible and p.req_tok_s is not None and p.tok_s is not None
        ),
        key=lambda e: (-e[0], -e[1]),
    )
    best: float | None = None  # the highest tok_s among points of a higher req_tok_s
    for _, same in itertools.groupby(eligible, key=lambda e: e[0]):
        group = list(same)
        top = group[0][1]
        for _, y, p in group:
            p.front = y == top and (best is None or top > best)
        best = top if best is None else max(best, top)
