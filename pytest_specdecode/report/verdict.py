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

Everything works on the report dict (:meth:`RunResults.to_json`), so a saved
report is judged the same way as a live run.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pytest_specdecode.config.load_options import DOMAINS
from pytest_specdecode.throughput import stats
from pytest_specdecode.throughput.comparison import CaseRow
from pytest_specdecode.throughput.metrics import REQ_TOK_S, TOK_S, TPOT_MS, single_key
from pytest_specdecode.throughput.workload import parse_case_id

NO_BASELINE = (
    "no speedup: this run has no non-speculative baseline; add algorithm NONE to it "
    "(e.g. --dflash-sweep 'algorithm=NONE,DFLASH;budget=4,8') or pass --dflash-baseline "
    "with a saved run of --dflash-config algorithm=NONE"
)
SPEEDUP_TPOT, SPEEDUP_TOK_S = "tpot", "tok_s"
"""The keys of a case's ``speedup``: the TPOT speedup and the output tok/s ratio."""


def samples(metrics: Mapping[str, Any], name: str) -> list[float]:
    """Per-round values of ``name`` (``tok_s``, ``tpot_ms``, ...) from a case's metrics.

    Reports written before intervals existed have one value: the case's own.
    """
    intervals = metrics.get("intervals")
    found = intervals.get(name) if isinstance(intervals, Mapping) else None
    values = stats.clean(found.get("values") or []) if isinstance(found, Mapping) else []
    if values:
        return values
    return stats.clean([metrics.get(single_key(name))])


def mean(metrics: Mapping[str, Any], name: str) -> float | None:
    """The mean over rounds of ``name``."""
    values = samples(metrics, name)
    return sum(values) / len(values) if values else None


def case_shape(case: str, metrics: Mapping[str, Any]) -> tuple[int | None, str, str]:
    """(context, load, domain) of a case: from its metrics, else from its id."""
    context, load, domain = metrics.get("context"), metrics.get("load"), metrics.get("domain")
    if isinstance(context, int) and isinstance(load, str) and isinstance(domain, str):
        return context, load, domain
    try:
        parsed = parse_case_id(case)
    except argparse.ArgumentTypeError:  # a report from before domains: ctx1024-c8
        match = re.match(r"ctx(\d+)-c(\d+)", case)
        if match is None:
            return (context if isinstance(context, int) else None, case, "-")
        return int(match[1]), f"c{match[2]}", "-"
    return parsed.context, parsed.load, parsed.domain


# --- speedup ------------------------------------------------------------------


def _interval_json(found: stats.Interval | None) -> dict[str, Any] | None:
    return None if found is None else found.to_json()


def _speedup(base: Mapping[str, Any], now: Mapping[str, Any]) -> dict[str, Any]:
    return {
        SPEEDUP_TPOT: _interval_json(
            stats.paired_ratio_interval(samples(base, TPOT_MS), samples(now, TPOT_MS))
        ),
        SPEEDUP_TOK_S: _interval_json(
            stats.paired_ratio_interval(samples(now, TOK_S), samples(base, TOK_S))
        ),
    }


def _session_baselines(configs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for c in configs if (c.get("config") or {}).get("algorithm") == "NONE"]


def _pick(baselines: list[dict[str, Any]], config: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Baselines with the config's own extra server flags first (same build and flags)."""
    extra = config.get("extra")
    return sorted(baselines, key=lambda b: (b.get("config") or {}).get("extra") != extra)


def annotate_speedups(
    report: dict[str, Any], saved: Iterable[CaseRow] = (), saved_label: str | None = None
) -> None:
    """Give every throughput case of the report its ``speedup``; set ``report["speedup"]``."""
    configs: list[dict[str, Any]] = list(report.get("configs") or [])
    baselines = _session_baselines(configs)
    saved_none = {row.case: row for row in saved if row.algorithm == "NONE"}
    sources: set[str] = set()
    cases = [(config, case) for config in configs for case in config.get("throughput") or []]
    for config, case in cases:
        case.pop("speedup", None)
        found = _baseline_of(case["case"], config, baselines, saved_none, saved_label)
        if found is not None:
            metrics, source = found
            case["speedup"] = {**_speedup(metrics, case.get("metrics") or {}), "baseline": source}
            sources.add(source)
    report["speedup"] = {
        "baseline": sorted(sources),
        "missing": NO_BASELINE if cases and not sources and not baselines else None,
        "method": "baseline TPOT / config TPOT, and config tok/s / baseline tok/s, with a 95% "
        "interval: geometric mean of the per-round ratios (round i has the same prompts under "
        "every config), t interval on their logs; unpaired: ratio of means, delta method",
    }


def _baseline_of(
    case: str,
    config: Mapping[str, Any],
    baselines: list[dict[str, Any]],
    saved_none: Mapping[str, CaseRow],
    saved_label: str | None,
) -> tuple[dict[str, Any], str] | None:
    """A case's baseline metrics and where they came from: this run's NONE case, else the
    saved run's (None for a NONE config, or with neither)."""
    spec = config.get("config") or {}
    if spec.get("algorithm") == "NONE":
        return None
    found = _baseline_case(case, _pick(baselines, spec))
    if found is not None:
        return found[1], f"{found[0]} (this run)"
    if case in saved_none:
        return dict(saved_none[case].extra_info), f"NONE (saved run {saved_label})"
    return None


def _baseline_case(case: str, baselines: list[dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
    for config in baselines:
        for found in config.get("throughput") or []:
            if found.get("case") == case:
                return str(config.get("label")), dict(found.get("metrics") or {})
    return None


# --- verdict ------------------------------------------------------------------


def _geo_mean(values: Sequence[float]) -> float | None:
    usable = [v for v in values if v > 0]
    if not usable:
        return None
    return math.exp(sum(math.log(v) for v in usable) / len(usable))


Score = tuple[float, float | None, float | None]
"""A config's figure on one case, with its 95% interval: (value, low, high)."""


def _bound(found: Mapping[str, Any], name: str) -> float | None:
    value = found.get(name)
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _score(case: Mapping[str, Any], config: Mapping[str, Any], by_speedup: bool) -> Score | None:
    metrics = case.get("metrics") or {}
    if case.get("client_limited"):
        return None  # its figures are the client's (report/client_limit.py): not ranked
    if not by_speedup:
        intervals = metrics.get("intervals")  # a saved run's extra_info: anything
        found = intervals.get(TOK_S) if isinstance(intervals, Mapping) else None
        found = found if isinstance(found, Mapping) else {}
        value = mean(metrics, TOK_S)
        return None if value is None else (value, _bound(found, "low"), _bound(found, "high"))
    if (config.get("config") or {}).get("algorithm") == "NONE":
        return (1.0, 1.0, 1.0)
    found = (case.get("speedup") or {}).get(SPEEDUP_TPOT) or {}
    value = _bound(found, "value")
    return None if value is None else (value, _bound(found, "low"), _bound(found, "high"))


def _direction(found: Any) -> int:
    """+1 when a ratio's interval lies above 1, -1 when below, 0 when it holds 1 (or is
    unknown); without bounds the value alone says."""
    if not isinstance(found, Mapping):
        return 0
    value, low, high = _bound(found, "value"), _bound(found, "low"), _bound(found, "high")
    low = value if low is None else low
    high = value if high is None else high
    if low is not None and low > 1:
        return 1
    if high is not None and high < 1:
        return -1
    return 0


def inconsistent(case: Mapping[str, Any], config: Mapping[str, Any]) -> str | None:
    """Why a case's figures cannot rank its config by speedup (None when they can): its
    TPOT is 0 or missing, or the TPOT speedup and the tok/s ratio point opposite ways
    beyond their intervals (a loaded client, a broken clock: not a speedup to act on)."""
    tpot = mean(case.get("metrics") or {}, TPOT_MS)
    if tpot is None or tpot <= 0:
        return f"{case.get('case')}: TPOT {'missing' if tpot is None else 'is 0'}"
    if (config.get("config") or {}).get("algorithm") == "NONE":
        return None
    speedup = case.get("speedup") or {}
    ratio, tok = speedup.get(SPEEDUP_TPOT) or {}, speedup.get(SPEEDUP_TOK_S) or {}
    value = _bound(ratio, "value")
    if value is None or value <= 0:
        return f"{case.get('case')}: no TPOT speedup"
    if _direction(ratio) * _direction(tok) < 0:
        return (
            f"{case.get('case')}: TPOT speedup {value:.2f}x but tok/s ratio "
            f"{_bound(tok, 'value') or 0:.2f}x"
        )
    return None


def coverage(config: Mapping[str, Any], min_accept_length: Any) -> dict[str, Any]:
    """What checked a config's correctness: its coding pass rate, the lossless check and
    the accept floor; ``checked`` is False when neither coding nor lossless ran for it."""
    rate = config.get("pass_rate") if isinstance(config.get("pass_rate"), Mapping) else None
    coding = bool(config.get("coding")) or bool(rate and rate.get("total"))
    counted: Mapping[str, Any] = rate if rate and coding else {}
    lossless = _lossless(config)
    return {
        "checked": coding or lossless != "not checked",
        "passed": counted.get("passed"),
        "total": counted.get("total"),
        "lossless": lossless,
        "accept_floor": _accept_floor(config, min_accept_length),
    }


def _lossless(config: Mapping[str, Any]) -> str:
    checks = [v for v in config.get("lossless") or [] if isinstance(v, Mapping)]
    if not checks:
        return "not checked"
    return "fail" if any(not v.get("passed") for v in checks) else "pass"


def _accept_floor(config: Mapping[str, Any], min_accept_length: Any) -> str:
    accept = config.get("accept_length")
    if (config.get("config") or {}).get("algorithm") == "NONE":
        return "no drafter"
    if isinstance(min_accept_length, (int, float)) and isinstance(accept, (int, float)):
        return "held" if accept >= min_accept_length else "FAILED"
    return "not checked"


def saved_configs(
    report: Mapping[str, Any], rows: Iterable[CaseRow], name: str
) -> list[dict[str, Any]]:
    """A compared run's configs as configs of this report, labelled ``(saved run NAME)``,
    their speedups against this run's NONE case (else the saved run's own NONE), so the
    verdict ranks them beside this run's."""
    rows = list(rows)
    baselines = _session_baselines(list(report.get("configs") or []))
    saved_none = {row.case: row for row in rows if row.algorithm == "NONE"}
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row.algorithm == "NONE" and baselines:
            continue  # this run's NONE is the reference; a second 1.0x says nothing
        label = f"{row.config or '?'} (saved run {name})"
        entry = out.setdefault(
            label,
            {"label": label, "base": row.config, "saved": name,
             "config": {"algorithm": row.algorithm}, "throughput": []},
        )  # fmt: skip
        case: dict[str, Any] = {"case": row.case, "metrics": dict(row.extra_info)}
        if row.algorithm != "NONE":
            found = _baseline_case(row.case, baselines)
            base = found[1] if found else None
            if base is None and row.case in saved_none:
                base = dict(saved_none[row.case].extra_info)
            if base is not None:
                case["speedup"] = _speedup(base, case["metrics"])
        entry["throughput"].append(case)
    return list(out.values())


Member = list[tuple[int | None, Score | None, str | None]]
"""A config's cases in one group: (context, score, why it cannot be ranked)."""
Ranked = tuple[float, str, dict[int | None, Score]]
"""A ranked config of a group: (its score, its label, its score per context)."""


def decide(
    report: Mapping[str, Any],
    excluded: Mapping[str, Sequence[str]],
    saved: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The verdict per (load, domain) and the Pareto front per (context, domain).

    ``excluded`` maps a config label to the gates it failed; those configs are
    never chosen (nor on a front), and the verdict lists why. ``saved`` are a
    compared run's configs (:func:`saved_configs`), ranked beside this run's.
    """
    configs: list[Mapping[str, Any]] = [*(report.get("configs") or []), *saved]
    by_speedup = any(
        "speedup" in case for config in configs for case in config.get("throughput") or []
    )
    floor = (report.get("gates") or {}).get("min_accept_length")
    covered = {str(c.get("label")): coverage(c, floor) for c in configs}
    saved_of = {str(c.get("label")): c.get("saved") for c in saved}
    return {
        "ranked_by": "speedup" if by_speedup else "tok_s",
        "groups": [
            _group(key, members, excluded, by_speedup, covered, saved_of)
            for key, members in _members(configs, by_speedup).items()
        ],
        "excluded": [
            {"config": label, "reasons": list(reasons)}
            for label, reasons in excluded.items()
            if reasons
        ],
        "pareto": pareto(report, excluded),
    }


def _members(
    configs: Sequence[Mapping[str, Any]], by_speedup: bool
) -> dict[tuple[str, str], dict[str, Member]]:
    """Each config's cases per (load, domain), the groups in load then domain order."""
    groups: dict[tuple[str, str], dict[str, Member]] = {}
    for config in configs:
        label = str(config.get("label"))
        for case in config.get("throughput") or []:
            context, load, domain = case_shape(str(case.get("case")), case.get("metrics") or {})
            entry = (context, *_judge(case, config, by_speedup))
            groups.setdefault((load, domain), {}).setdefault(label, []).append(entry)
    return dict(sorted(groups.items(), key=lambda item: _group_order(*item[0])))


def _judge(
    case: Mapping[str, Any], config: Mapping[str, Any], by_speedup: bool
) -> tuple[Score | None, str | None]:
    """A case's score, else why it cannot be ranked (errors, inconsistent figures)."""
    if (case.get("metrics") or {}).get("errors"):
        return None, "errored case"
    odd = inconsistent(case, config) if by_speedup else None
    return (None, odd) if odd else (_score(case, config, by_speedup), None)


def _group_order(load: str, domain: str) -> tuple[Any, ...]:
    rank = DOMAINS.index(domain) if domain in DOMAINS else len(DOMAINS)
    return (_load_order(load), rank, domain)


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
    covered: Mapping[str, Mapping[str, Any]],
    saved_of: Mapping[str, Any],
) -> dict[str, Any]:
    """The group's answer is a set: the top config and every config whose interval
    overlaps the top's in some context (not clearly below it). Ordered by score, then
    label, never by the order configs ran in, so identical runs give identical sets."""
    load, domain = key
    contexts = sorted({c for values in members.values() for c, _, _ in values if c is not None})
    scored, unranked = _rank(members, excluded, contexts)
    chosen, runner, margin = _choose(scored)
    top = scored[0] if scored else None
    figures = [s[0] for s in top[2].values()] if top else []
    return {
        "load": load,
        "domain": domain,
        "contexts": contexts,
        "best": top[1] if top else None,
        "best_set": [e[1] for e in chosen],
        "score": top[0] if top else None,
        "range": [min(figures), max(figures)] if figures else None,
        "runner_up": runner[1] if runner else None,
        "runner_up_score": runner[0] if runner else None,
        "margin": margin,
        "candidates": len(scored),
        "ranked_by": "speedup" if by_speedup else "tok_s",
        "members": [_member(e, e in chosen, saved_of.get(e[1]), covered.get(e[1])) for e in scored],
        "unranked": unranked,
    }


def _rank(
    members: Mapping[str, Member], excluded: Mapping[str, Sequence[str]], contexts: list[int]
) -> tuple[list[Ranked], list[dict[str, Any]]]:
    """The group's configs by score then label, and those it cannot rank, with why."""
    scored: list[Ranked] = []
    unranked: list[dict[str, Any]] = []
    for label, values in sorted(members.items()):
        if excluded.get(label):
            continue
        per_context = {c: s for c, s, _ in values if s is not None}
        why = _unranked(values, per_context, contexts)
        if why is not None:
            unranked.append({"config": label, **why})
            continue
        score = _geo_mean([s[0] for s in per_context.values()])
        if score is not None:
            scored.append((score, label, per_context))
    scored.sort(key=lambda entry: (-entry[0], entry[1]))
    return scored, unranked


def _unranked(
    values: Member, per_context: Mapping[int | None, Score], contexts: list[int]
) -> dict[str, str] | None:
    odd = [why for _, _, why in values if why]
    if odd:
        reason = "inconsistent figures" if odd[0] != "errored case" else "errored case"
        return {"reason": reason, "detail": "; ".join(odd)}
    if len(per_context) < len(values) or len(per_context) < len(contexts):
        return {"reason": "missing case", "detail": ""}  # not comparable over the group
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
    entry: Ranked, best: bool, saved: Any, covered: Mapping[str, Any] | None
) -> dict[str, Any]:
    score, label, per_context = entry
    lows = [s[1] for s in per_context.values()]
    highs = [s[2] for s in per_context.values()]
    known = all(v is not None for v in lows + highs)
    return {
        "config": label,
        "saved": saved,
        "score": score,
        "low": _geo_mean([v for v in lows if v is not None]) if known else None,
        "high": _geo_mean([v for v in highs if v is not None]) if known else None,
        "best": best,
        "coverage": dict(covered or coverage({}, None)),
    }


def _load_order(load: str) -> tuple[int, float]:
    try:
        head = load.split("-")[0]
        return (0 if head.startswith("c") else 1, float(head[1:]))
    except ValueError:
        return (2, 0.0)


# --- Pareto front --------------------------------------------------------------


def pareto(
    report: Mapping[str, Any], excluded: Mapping[str, Sequence[str]]
) -> list[dict[str, Any]]:
    """Per (context, domain): every (config, load) point, the non-dominated ones marked."""
    groups: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for config in report.get("configs") or []:
        label = str(config.get("label"))
        for case in config.get("throughput") or []:
            metrics = case.get("metrics") or {}
            context, load, domain = case_shape(str(case.get("case")), metrics)
            x, y = mean(metrics, REQ_TOK_S), mean(metrics, TOK_S)
            if context is None or x is None or y is None:
                continue
            groups.setdefault((context, domain), []).append(
                {
                    "config": label,
                    "load": load,
                    "case": case.get("case"),
                    "req_tok_s": x,
                    "tok_s": y,
                    "eligible": not excluded.get(label) and not metrics.get("errors"),
                }
            )
    out = []

    def rank(key: tuple[int, str]) -> tuple[int, int, str]:
        return (key[0], DOMAINS.index(key[1]) if key[1] in DOMAINS else len(DOMAINS), key[1])

    for (context, domain), points in sorted(groups.items(), key=lambda item: rank(item[0])):
        mark_front(points)
        points.sort(key=lambda p: -p["req_tok_s"])
        out.append({"context": context, "domain": domain, "points": points})
    return out


def mark_front(points: Sequence[dict[str, Any]]) -> None:
    """Set each point's ``front``: eligible, and no eligible point is at least as good on
    both axes (``req_tok_s``, ``tok_s``) and better on one.

    By a sort, not all pairs (a 3,000-config sweep has thousands of points per group):
    walking the eligible points from the highest ``req_tok_s`` down, a point is on the
    front when it has the best ``tok_s`` of the points with its ``req_tok_s`` and beats
    every point with a higher one.
    """
    for p in points:
        p["front"] = False
    eligible = sorted(
        (p for p in points if p["eligible"]), key=lambda p: (-p["req_tok_s"], -p["tok_s"])
    )
    best: float | None = None  # the highest tok_s among points of a higher req_tok_s
    start = 0
    while start < len(eligible):
        x = eligible[start]["req_tok_s"]
        end = start
        while end < len(eligible) and eligible[end]["req_tok_s"] == x:
            end += 1
        top = eligible[start]["tok_s"]
        for p in eligible[start:end]:
            p["front"] = p["tok_s"] == top and (best is None or top > best)
        best = top if best is None else max(best, top)
        start = end
