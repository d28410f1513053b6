"""A speculation policy a team can deploy: one config per band of concurrency.

From a report's throughput cases, per closed-loop load point (concurrency C):
each config's output tok/s ratio over NONE (the verdict's paired ratio, with
its 95% interval; NONE itself is 1.0) in every domain and context measured
at C. A config *qualifies* at C when the lower bound of that ratio is at
least :data:`FLOOR` in every one of them (a config with no interval, or
missing from one, does not qualify); the choice at C is the qualifying
config with the best geometric-mean ratio, else NONE. So a band never runs a
config whose interval reaches below 0.95x of NONE.

Configs the gates excluded, and client-limited or errored cases, take no
part (a config with such a case at C does not qualify there; with a
client-limited NONE case at C, no config does: its ratios are against the
client's figure). Contiguous
load points with the same choice make one band; the first band starts at
concurrency 1, a band ends where the next one starts, and the last one has
no upper end (``max_concurrency`` null): every concurrency has a config.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_specdecode.report.verdict import SPEEDUP_TOK_S

FLOOR = 0.95
"""A band never runs a config whose tok/s ratio over NONE may be below this (its 95% low)."""

NONE_CONFIG = {"algorithm": "NONE"}

Evidence = dict[str, tuple[float, float | None]]
"""Per case shape (``ctx1024-code``): the tok/s ratio over NONE and its 95% low bound."""


@dataclass
class LoadPoint:
    """What one concurrency measured: each config's ratios over NONE, by case shape."""

    concurrency: int
    ratios: dict[str, Evidence] = field(default_factory=dict)  # config label -> evidence
    shapes: set[str] = field(default_factory=set)
    # Shapes whose NONE case is client-limited: every ratio there is against the client's figure.
    unsure: set[str] = field(default_factory=set)


def _finite(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _ratio(case: Mapping[str, Any]) -> tuple[float, float | None] | None:
    found = (case.get("speedup") or {}).get(SPEEDUP_TOK_S) or {}
    value = _finite(found.get("value"))
    return None if value is None else (value, _finite(found.get("low")))


def load_points(
    report: Mapping[str, Any], excluded: Sequence[str] = ()
) -> tuple[list[LoadPoint], dict[str, dict[str, Any]]]:
    """The report's closed-loop load points, and each config's SpecConfig dict by label."""
    points: dict[int, LoadPoint] = {}
    configs: dict[str, dict[str, Any]] = {}
    for config in report.get("configs") or []:
        label = str(config.get("label"))
        spec = configs[label] = dict(config.get("config") or {})
        for case in config.get("throughput") or []:
            concurrency = _concurrency(case.get("metrics") or {})
            if concurrency is not None:  # else a request-rate case: no concurrency band
                point = points.setdefault(concurrency, LoadPoint(concurrency))
                _add(point, label, spec.get("algorithm") == "NONE", case, label in excluded)
    return [points[c] for c in sorted(points)], configs


def _concurrency(metrics: Mapping[str, Any]) -> int | None:
    load = re.fullmatch(r"c(\d+)", str(metrics.get("load") or ""))
    return int(load[1]) if load is not None and int(load[1]) >= 1 else None


def _add(point: LoadPoint, label: str, none: bool, case: Mapping[str, Any], excluded: bool) -> None:
    """File one case of a config at its load point."""
    metrics = case.get("metrics") or {}
    shape = f"ctx{metrics.get('context')}-{metrics.get('domain')}"
    point.shapes.add(shape)
    if none and case.get("client_limited"):
        point.unsure.add(shape)
    ratio = (1.0, 1.0) if none else _ratio(case)
    usable = not (excluded or case.get("client_limited") or metrics.get("errors"))
    if usable and ratio is not None:
        point.ratios.setdefault(label, {})[shape] = ratio


def choose(point: LoadPoint) -> tuple[str | None, float]:
    """The qualifying config with the best geometric-mean ratio at ``point`` (None: NONE)."""
    best: tuple[float, str] | None = None
    if point.unsure:
        return None, 1.0
    for label, evidence in sorted(point.ratios.items()):
        if set(evidence) != point.shapes:
            continue
        if any(low is None or low < FLOOR for _, low in evidence.values()):
            continue
        values = [value for value, _ in evidence.values()]
        if any(v <= 0 for v in values):
            continue
        score = math.exp(sum(math.log(v) for v in values) / len(values))
        if best is None or score > best[0]:
            best = (score, label)
    return (best[1], best[0]) if best else (None, 1.0)


def bands(
    points: Sequence[LoadPoint], configs: Mapping[str, Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Contiguous bands of concurrency, each with its config (NONE when none qualifies)."""
    out: list[dict[str, Any]] = []
    for point in points:
        label, score = choose(point)
        spec = dict(configs.get(label) or NONE_CONFIG) if label else dict(NONE_CONFIG)
        name = label or "NONE"
        evidence = {
            shape: {"ratio": value, "low": low}
            for shape, (value, low) in sorted((point.ratios.get(label or "") or {}).items())
        }
        if out and out[-1]["label"] == name:
            out[-1]["measured"].append(point.concurrency)
            out[-1]["evidence"][f"c{point.concurrency}"] = evidence
            out[-1]["speedup"] = min(out[-1]["speedup"], score)
            continue
        if out:
            out[-1]["max_concurrency"] = point.concurrency - 1
        out.append(
            {
                "min_concurrency": 1 if not out else point.concurrency,
                "max_concurrency": None,
                "config": spec,
                "label": name,
                "speedup": score,
                "measured": [point.concurrency],
                "evidence": {f"c{point.concurrency}": evidence},
            }
        )
    return out


def build(report: Mapping[str, Any]) -> dict[str, Any] | None:
    """The policy of a report (None when it has no closed-loop case or no NONE baseline)."""
    verdict = report.get("verdict") or {}
    excluded = [str(e.get("config")) for e in verdict.get("excluded") or [] if isinstance(e, dict)]
    points, configs = load_points(report, excluded)
    has_none = any(spec.get("algorithm") == "NONE" for spec in configs.values())
    if not points or not (has_none or (report.get("speedup") or {}).get("baseline")):
        return None
    simulated = bool(report.get("simulated")) or any(
        (c.get("service") or {}).get("simulated") for c in report.get("configs") or []
    )
    return {
        "format": 1,
        "simulated": simulated,
        "floor": FLOOR,
        "method": "per concurrency, the config with the best geometric-mean output tok/s ratio "
        f"over NONE among those whose 95% low bound is >= {FLOOR:g} in every domain and "
        "context measured there (else NONE); 'speedup' is a band's lowest such ratio",
        "started": report.get("started"),
        "bands": bands(points, configs),
    }


def band_for(policy: Mapping[str, Any], concurrency: int) -> Mapping[str, Any]:
    """The band a concurrency falls in (the last band for any concurrency above them)."""
    found = policy["bands"][0]
    for band in policy["bands"]:
        if concurrency >= band["min_concurrency"]:
            found = band
    return found  # type: ignore[no-any-return]


def describe(policy: Mapping[str, Any]) -> str:
    """One line: each band and its config."""
    parts = []
    for band in policy["bands"]:
        top = band["max_concurrency"]
        span = f"c{band['min_concurrency']}" + (f"-{top}" if top is not None else "+")
        parts.append(f"{span}: {band['label']}")
    return "; ".join(parts)
