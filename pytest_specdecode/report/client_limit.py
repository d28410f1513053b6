"""Which throughput cases the load client (or the machine) limited: out of the ranking.

A case's figures say how fast the server was only while the client kept up.
Against the run's calibration (:mod:`pytest_specdecode.throughput.calibration`:
the same client against a null server on the same machine) a case is
*client-limited* when

- its output tok/s is above :data:`CEILING_SHARE` of the client's ceiling at its
  concurrency: the server's speed no longer decides the figure, the client's
  does; or
- its client overhead p99 (client e2e minus the server's own e2e) is above
  :data:`~pytest_specdecode.throughput.calibration.LOADED_SHARE` of its e2e p50 *and*
  above :data:`~pytest_specdecode.throughput.calibration.OVERHEAD_FACTOR` times the
  overhead the client showed against the null server at that concurrency: the
  machine was busier than the client's own cost explains. A round that was, the
  runner measured again (:func:`pytest_specdecode.throughput.load.run_case`), so a
  case is marked for a load that lasted, not for one spike; or
- the load client's own CPU time during its rounds was above :data:`CPU_SHARE`
  of their wall time (with or without a calibration): the client runs on one
  thread, so near one core it delays its own reads, and on a machine whose
  cores the server shares it takes them from the server.

Such a case gets ``client_limited`` (its reasons) and the verdict leaves it
out. Without a calibration (``--dflash-client-calibration off``, or one that
could not run) only the CPU reason marks a case; the summary's warning line
then also names the cases whose overhead alone is above the share (the client
*may* be limiting them).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pytest_specdecode.output import figures
from pytest_specdecode.throughput.calibration import loaded
from pytest_specdecode.throughput.metrics import TOK_S

CEILING_SHARE = 0.5
"""A case above this share of the client's null-server tok/s is client-limited."""

OVERHEAD_SHARE = 0.02
"""Client overhead p99 above this share of e2e p50: the client may be the limit (the
warning of a run without a calibration)."""

CPU_SHARE = 0.8
"""The load client busy this share of its rounds' wall time (CPU seconds per second) is
near its one core: its own work, not the server, paced the case."""

SHOWN_CASES = 4
"""The warning names this many cases (the worst first), then a count."""


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def ceilings(calibration: Mapping[str, Any] | None) -> dict[int, Mapping[str, Any]]:
    """The calibration's ceilings by concurrency (nothing from a malformed one)."""
    found: dict[int, Mapping[str, Any]] = {}
    for entry in (calibration or {}).get("ceilings") or []:
        usable = isinstance(entry, Mapping) and _number(entry.get("tok_s"))
        if usable and isinstance(entry.get("concurrency"), int):
            found[entry["concurrency"]] = entry
    return found


def reasons(metrics: Mapping[str, Any], ceiling: Mapping[str, Any] | None) -> list[str]:
    """Why a case with these metrics is client-limited against ``ceiling`` (none: it is not);
    without a ceiling, by the client's own CPU time alone."""
    found = []
    share = _number(metrics.get("client_cpu_share"))
    if share is not None and share > CPU_SHARE:
        found.append(
            f"the load client was busy {share:.0%} of its rounds' wall time (CPU seconds "
            "per second, one thread): its own CPU was the limit"
        )
    if ceiling is None:
        return found
    tok_s, top = _number(metrics.get(TOK_S)), _number(ceiling.get("tok_s"))
    if tok_s is not None and top and tok_s > CEILING_SHARE * top:
        found.append(
            f"{figures.tok_s(tok_s)} is {tok_s / top:.0%} of the client's ceiling "
            f"({figures.tok_s(top)} against a null server)"
        )
    overhead, e2e = (
        _number(metrics.get("client_overhead_ms_p99")),
        _number(metrics.get("e2e_ms_p50")),
    )
    floor = _number(ceiling.get("overhead_ms_p99"))
    if overhead is None or not e2e or not floor:
        return found
    if loaded(overhead, e2e, floor):
        found.append(
            f"client overhead p99 {overhead:.1f} ms is {overhead / e2e:.0%} of e2e p50 and "
            f"{overhead / floor:.1f}x the null server's {floor:.1f} ms"
        )
    return found


def mark(report: dict[str, Any]) -> None:
    """Set each throughput case's ``client_limited`` from ``report["calibration"]``."""
    found = ceilings(report.get("calibration"))
    for config in report.get("configs") or []:
        for case in config.get("throughput") or []:
            case.pop("client_limited", None)
            metrics = case.get("metrics") or {}
            concurrency = metrics.get("concurrency")
            why = reasons(metrics, found.get(concurrency) if isinstance(concurrency, int) else None)
            if why:
                case["client_limited"] = {"why": "; ".join(why)}


def warning(report: Mapping[str, Any], short: Mapping[str, str]) -> list[str]:
    """The run's one warning line naming its client-limited cases (none: no line)."""
    marked: list[tuple[int, str]] = []
    total = 0
    for config in report.get("configs") or []:
        label = str(config.get("label"))
        for case in config.get("throughput") or []:
            total += 1
            if case.get("client_limited"):
                marked.append((len(marked), f"{case.get('case')} ({short.get(label, label)})"))
    if not marked:
        return []
    return [
        f"WARNING: {len(marked)} of {total} cases are client-limited, left out of the verdict "
        f"(their tok/s near this machine's null-server ceiling, the machine loaded, or the "
        f"load client's own CPU the limit): "
        f"{_names(marked)}"
    ]


def _names(found: list[tuple[Any, str]]) -> str:
    named = ", ".join(name for _, name in found[:SHOWN_CASES])
    more = f" and {len(found) - SHOWN_CASES} more" if len(found) > SHOWN_CASES else ""
    return named + more
