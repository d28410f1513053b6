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

Such a case gets ``client_limited`` (its reasons: :func:`client_limited`) and the
verdict leaves it out. Without a calibration (``--dflash-client-calibration off``,
or one that could not run) only the CPU reason marks a case; the summary's warning
line then also names the cases whose overhead alone is above the share (the client
*may* be limiting them).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from pytest_specdecode.output import figures
from pytest_specdecode.report.model import (
    Calibration,
    Ceiling,
    ClientLimited,
    ConfigResults,
    Metrics,
    Report,
)
from pytest_specdecode.report.verdict import throughput_cases
from pytest_specdecode.throughput.calibration import loaded

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


def _number(value: float | None) -> float | None:
    return float(value) if value is not None and math.isfinite(value) and value >= 0 else None


def ceilings(calibration: Calibration | None) -> dict[int, Ceiling]:
    """The calibration's ceilings by concurrency (a ceiling of no tok/s left out)."""
    found = calibration.ceilings if calibration is not None else []
    return {entry.concurrency: entry for entry in found if _number(entry.tok_s)}


def reasons(metrics: Metrics, ceiling: Ceiling | None) -> list[str]:
    """Why a case with these metrics is client-limited against ``ceiling`` (none: it is not);
    without a ceiling, by the client's own CPU time alone."""
    found = []
    share = _number(metrics.client_cpu_share)
    if share is not None and share > CPU_SHARE:
        found.append(
            f"the load client was busy {share:.0%} of its rounds' wall time (CPU seconds "
            "per second, one thread): its own CPU was the limit"
        )
    if ceiling is None:
        return found
    tok_s, top = _number(metrics.tok_s), _number(ceiling.tok_s)
    if tok_s is not None and top and tok_s > CEILING_SHARE * top:
        found.append(
            f"{figures.tok_s(tok_s)} is {tok_s / top:.0%} of the client's ceiling "
            f"({figures.tok_s(top)} against a null server)"
        )
    overhead, e2e = _number(metrics.client_overhead_ms_p99), _number(metrics.e2e_ms_p50)
    floor = _number(ceiling.overhead_ms_p99)
    if overhead is None or not e2e or not floor:
        return found
    if loaded(overhead, e2e, floor):
        found.append(
            f"client overhead p99 {overhead:.1f} ms is {overhead / e2e:.0%} of e2e p50 and "
            f"{overhead / floor:.1f}x the null server's {floor:.1f} ms"
        )
    return found


def client_limited(report: Report) -> list[ClientLimited | None]:
    """Every throughput case's ``client_limited`` against ``report.calibration``, in
    :func:`~pytest_specdecode.report.verdict.throughput_cases`' order (None: not limited)."""
    found = ceilings(report.calibration)
    out: list[ClientLimited | None] = []
    for _, case in throughput_cases(report):
        concurrency = case.metrics.concurrency
        why = reasons(case.metrics, found.get(concurrency) if concurrency is not None else None)
        out.append(ClientLimited(why="; ".join(why)) if why else None)
    return out


def warning(report: Report, short: Mapping[str, str]) -> list[str]:
    """The run's warning lines about its client: the cases marked client-limited (by the
    calibration, or by the client's own CPU time), and without a calibration also the
    cases whose client overhead alone may limit them (:func:`overhead_warning`)."""
    cases = throughput_cases(report)
    marked = [
        f"{case.case} ({short.get(config.label, config.label)})"
        for config, case in cases
        if case.client_limited is not None
    ]
    lines = []
    if marked:
        lines.append(
            f"WARNING: {len(marked)} of {len(cases)} cases are client-limited, left out of the "
            f"verdict (their tok/s near this machine's null-server ceiling, the machine loaded, "
            f"or the load client's own CPU the limit): {_names(marked)}"
        )
    if not ceilings(report.calibration):
        lines += overhead_warning(report.configs, short)
    return lines


def overhead_warning(configs: Sequence[ConfigResults], short: Mapping[str, str]) -> list[str]:
    """Without a calibration: one warning for the run naming the cases whose client overhead
    p99 (client e2e minus the server's own e2e) exceeds :data:`OVERHEAD_SHARE` of their e2e
    p50."""
    found: list[tuple[float, str]] = []
    total = 0
    for c in configs:
        for t in c.throughput:
            overhead, e2e = t.metrics.client_overhead_ms_p99, t.metrics.e2e_ms_p50
            if overhead is None or e2e is None:
                continue
            total += 1
            if overhead > OVERHEAD_SHARE * e2e:
                name = f"{t.case} ({short.get(c.label, c.label)})"
                found.append((overhead / e2e if e2e > 0 else math.inf, name))
    if not found:
        return []
    found.sort(key=lambda f: -f[0])
    return [
        f"WARNING: in {len(found)} of {total} cases the client overhead p99 exceeds "
        f"{OVERHEAD_SHARE:.0%} of e2e p50 (the worst first: {_names([n for _, n in found])}): "
        "the client may be limiting them"
    ]


def _names(found: list[str]) -> str:
    named = ", ".join(found[:SHOWN_CASES])
    more = f" and {len(found) - SHOWN_CASES} more" if len(found) > SHOWN_CASES else ""
    return named + more
