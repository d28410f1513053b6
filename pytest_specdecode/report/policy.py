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

import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_specdecode.report import tables
from pytest_specdecode.report.model import Config, Metrics, Report, ThroughputRecord
from pytest_specdecode.report.verdict import finite

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


def _ratio(case: ThroughputRecord) -> tuple[float, float | None] | None:
    found = case.speedup.tok_s if case.speedup else None
    value = finite(found.value) if found else None
    return None if found is None or value is None else (value, finite(found.low))


def load_points(
    report: Report, excluded: Sequence[str] = ()
) -> tuple[list[LoadPoint], dict[str, Config]]:
    """The report's closed-loop load points, and each config's values by label."""
    points: dict[int, LoadPoint] = {}
    configs: dict[str, Config] = {}
    for config in report.configs:
        label = config.label
        configs[label] = config.config
        for case in config.throughput:
            concurrency = _concurrency(case.metrics)
            if concurrency is not None:  # else a request-rate case: no concurrency band
                point = points.setdefault(concurrency, LoadPoint(concurrency))
                _add(point, label, config.config.algorithm == "NONE", case, label in excluded)
    return [points[c] for c in sorted(points)], configs


def _concurrency(metrics: Metrics) -> int | None:
    load = re.fullmatch(r"c(\d+)", metrics.load or "")
    return int(load[1]) if load is not None and int(load[1]) >= 1 else None


def _add(point: LoadPoint, label: str, none: bool, case: ThroughputRecord, excluded: bool) -> None:
    """File one case of a config at its load point."""
    metrics = case.metrics
    shape = f"ctx{metrics.context}-{metrics.domain}"
    point.shapes.add(shape)
    limited = case.client_limited is not None
    if none and limited:
        point.unsure.add(shape)
    ratio = (1.0, 1.0) if none else _ratio(case)
    usable = not (excluded or limited or metrics.errors)
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
        score = statistics.geometric_mean(values)
        if best is None or score > best[0]:
            best = (score, label)
    return (best[1], best[0]) if best else (None, 1.0)


def bands(points: Sequence[LoadPoint], configs: Mapping[str, Config]) -> list[dict[str, Any]]:
    """Contiguous bands of concurrency, each with its config (NONE when none qualifies)."""
    out: list[dict[str, Any]] = []
    for point in points:
        label, score = choose(point)
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
                # The config's values as the policy file holds them (NONE's when none qualifies).
                "config": configs[label].to_dict() if label else dict(NONE_CONFIG),
                "label": name,
                "speedup": score,
                "measured": [point.concurrency],
                "evidence": {f"c{point.concurrency}": evidence},
            }
        )
    return out


def build(report: Report) -> dict[str, Any] | None:
    """The policy of a report (None when it has no closed-loop case or no NONE baseline):
    the policy file's content."""
    excluded = [e.config for e in report.verdict.excluded] if report.verdict else []
    points, configs = load_points(report, excluded)
    has_none = any(spec.algorithm == "NONE" for spec in configs.values())
    if not points or not (has_none or (report.speedup and report.speedup.baseline)):
        return None
    return {
        "format": 1,
        "simulated": tables.simulated(report),
        "floor": FLOOR,
        "method": "per concurrency, the config with the best geometric-mean output tok/s ratio "
        f"over NONE among those whose 95% low bound is >= {FLOOR:g} in every domain and "
        "context measured there (else NONE); 'speedup' is a band's lowest such ratio",
        "started": report.started,
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
