"""The ``search`` section of a report (``--dflash-search``) as text: terminal and Markdown.

Works on the typed report, so a saved report reads the same as a live run; the section
itself is an open object (``search/record.py`` owns its fields).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_specdecode.report.model import Report


def summary_lines(data: Report) -> list[str]:
    """The terminal summary's lines for a report's ``search`` section (none without one)."""
    found = data.search
    if found is None:
        return []
    metric = found.get("metric")
    lines = [f"search ({metric}): {_progress(found, 'saved against the grid')}"]
    rows = [("#", "config", metric or "objective", "95% interval", "feasible")]
    rows += [_visit_row(visit) for visit in found.get("visited") or []]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for row in rows:
        lines.append(
            "  ".join(c.ljust(w) for c, w in zip(row[:4], widths, strict=True)) + "  " + row[4]
        )
    best = found.get("best")
    lines.append(
        f"search best: {best['label']} {_num(best.get('objective'))}"
        if isinstance(best, Mapping)
        else "search best: none feasible"
    )
    return lines


def _visit_row(visit: Mapping[str, Any]) -> tuple[str, str, str, str, str]:
    """One visited config: restart, label, objective, its interval, whether feasible."""
    carried = " (carried)" if visit.get("carried") else ""
    pruned = " (stopped early)" if visit.get("pruned") else ""
    return (
        str(visit.get("restart")),
        f"{visit.get('label')}{carried}{pruned}",
        _num(visit.get("objective")),
        _interval(visit),
        _feasible(visit),
    )


def _interval(visit: Mapping[str, Any]) -> str:
    interval = visit.get("interval") or {}
    return f"{_num(interval.get('low'))} - {_num(interval.get('high'))}"


def _feasible(visit: Mapping[str, Any]) -> str:
    return "yes" if visit.get("feasible") else "no: " + "; ".join(visit.get("reasons") or [])


def _progress(found: Mapping[str, Any], saved: str) -> str:
    """``3 of 12 configs started (budget 3), 9 restarts <saved>; stopped: <why>``."""
    return (
        f"{found.get('started')} of {found.get('space_size')} configs started "
        f"({_budget(found)}), {found.get('restarts_saved')} restarts {saved}; stopped: "
        f"{found.get('stopped') or 'interrupted'}"
    )


def _budget(found: Mapping[str, Any]) -> str:
    """``budget 8`` (restarts) or ``time budget 5400 s, 1234 s taken``."""
    seconds = found.get("budget_seconds")
    if isinstance(seconds, (int, float)):
        return f"time budget {_num(seconds)} s, {_num(found.get('spent_seconds'))} s taken"
    return f"budget {found.get('restarts')}"


def _num(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) else "-"


def markdown_lines(data: Report) -> list[str]:
    """The step summary's search section (none without one)."""
    found = data.search
    if found is None:
        return []
    best = found.get("best")
    out = [
        "",
        f"### Search ({found.get('metric')})",
        "",
        f"{_progress(found, 'saved')}. Best: "
        + (
            f"**{best['label']}** ({_num(best.get('objective'))})"
            if isinstance(best, Mapping)
            else "none feasible"
        ),
        "",
        "| # | config | objective | 95% interval | feasible |",
        "|---|---|---|---|---|",
    ]
    for visit in found.get("visited") or []:
        out.append(
            f"| {visit.get('restart')} | {visit.get('label')}"
            f"{' (stopped early)' if visit.get('pruned') else ''} | {_num(visit.get('objective'))} "
            f"| {_interval(visit)} | {_feasible(visit)} |"
        )
    return out
