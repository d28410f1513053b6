"""A GitHub-flavoured Markdown summary of a run report, for CI job summaries.

GitHub Actions renders whatever a step appends to the file named by
``GITHUB_STEP_SUMMARY`` as GFM on the run's page; tables make the gates,
pass rates and throughput of every config readable there at a glance.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from pytest_specdecode.report import search_summary, sweep_progress, tables
from pytest_specdecode.report.model import CodingRecord, Compare, ConfigResults, Report

TITLE = "pytest-specdecode run"
SIM_NOTE = (
    "**simulated (not GPU):** these figures come from the bundled simulator, not a GPU server."
)
MAX_FAILURES = 50
"""Coding failures listed before the rest are counted; summaries should stay short."""

_SPECIAL = re.compile(r"([\\`*_\[\]<>|])")


def render_markdown(report: Report) -> str:
    """The report as GFM: gates, per-config results, throughput, comparison, metadata."""
    configs = report.configs
    out: list[str] = [f"## {TITLE}", ""]
    if tables.simulated(report):
        out += [f"> {SIM_NOTE}", ""]
    out += _gates(report)
    out += _sweep(report)
    out += _configs(configs)
    simulated = " (simulated)" if tables.simulated(report) else ""
    if any(c.throughput for c in configs):
        out += _throughput(report, simulated)
    out += _coding_failures(configs)
    out += _compare(report.compare)
    if tables.ranks_several(report):
        out += _verdict(report, simulated)
    out += [*search_summary.markdown_lines(report), *([""] if report.search else [])]
    out.append(_footer(report))
    return "\n".join(out) + "\n"


def append_step_summary(report: Report, environ: Mapping[str, str] = os.environ) -> bool:
    """Append :func:`render_markdown` to ``$GITHUB_STEP_SUMMARY``; False when it is unset.

    An unwritable summary file raises ``OSError``.
    """
    target = environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return False
    with Path(target).open("a", encoding="utf-8") as handle:
        handle.write(render_markdown(report) + "\n")
    return True


# --- sections ----------------------------------------------------------------


def _sweep(report: Report) -> list[str]:
    """Long sweeps: progress, what a resume carried, moved configs, retried starts."""
    found = sweep_progress.notes(report)
    return ["### Sweep", "", *(f"- {_esc(line)}" for line in found), ""] if found else []


def _gates(report: Report) -> list[str]:
    failed = list(report.gates.failed)
    if not failed:
        return ["### Gates", "", ":white_check_mark: all gates passed", ""]
    noun = "gate" if len(failed) == 1 else "gates"
    lines = ["### Gates", "", f":x: **{len(failed)} {noun} failed**", ""]
    lines += [f"- {_esc(line)}" for line in failed]
    return [*lines, ""]


def _config_table(configs: list[ConfigResults]) -> list[str]:
    header, rows = tables.configs(configs)
    right = set(range(1, len(header)))
    cells = [[_esc(c) for c in row] for row in rows]
    if header[-1] == "lossless":  # a failed check stands out
        for row in cells:
            row[-1] = re.sub(r"^FAILED\b", "**FAILED**", row[-1])
    return _table([_esc(h) for h in header], cells, right)


def _configs(configs: list[ConfigResults]) -> list[str]:
    if not configs:
        return ["No config was measured.", ""]
    out = ["### Configs", "", *_config_table(configs), ""]
    phases = tables.start_phases(configs)
    if phases[1]:
        out += ["#### Start phases", "", *_cells(phases), ""]
    return out


def _compare(compare: Compare | None) -> list[str]:
    """The comparison with a saved run: its table, then the inconclusive findings."""
    if compare is None:
        return []
    out = [f"### Compared with {_esc(str(compare.baseline))}", ""]
    out += [*_text_table(compare.table), ""]
    notes = [f for f in compare.findings if f.status == "inconclusive"]
    return [*out, *(f"- {_esc(f.line)}" for f in notes), *([""] if notes else [])]


def _cells(table: tables.Table, right_from: int = 2) -> list[str]:
    """A table as GFM, its cells escaped; the columns from ``right_from`` on align right."""
    header, rows = table
    right = set(range(right_from, len(header)))
    return _table([_esc(h) for h in header], [[_esc(c) for c in r] for r in rows], right)


def _throughput(report: Report, simulated: str) -> list[str]:
    out = [f"### Throughput{simulated}", "", _esc(tables.rounds_note(report)), ""]
    out += [*_cells(tables.throughput(report)), ""]
    missing = report.speedup.missing if report.speedup else None
    if missing:
        out += [_esc(missing), ""]
    out += _titled(
        f"### Acceptance per config and domain{simulated}",
        tables.acceptance(report),
        "Rate at draft position i: verify steps that accepted at least i drafts / "
        "verify steps (from the server's spec_correct_drafts_histogram).",
    )
    out += _titled(
        f"### Output repetition per config and domain{simulated}",
        tables.repetition(report),
        "Share of repeated word 4-grams in the replies (the most repetitive case); "
        "DEGENERATE fails the run and leaves the verdict.",
    )
    return out


def _titled(title: str, table: tables.Table, note: str) -> list[str]:
    """A table under its heading and note; nothing when the table has no rows."""
    return [title, "", note, "", *_cells(table), ""] if table[1] else []


def _verdict(report: Report, simulated: str) -> list[str]:
    out = [f"### Verdict{simulated}", ""]
    out += [f"Per load and domain, the best {tables.ranked_by(report)} among the configs that "
            "passed every gate (geometric mean over contexts), with every config whose 95% "
            "interval overlaps it (tie within noise; clear when none does).", ""]  # fmt: skip
    out += [*_cells(tables.verdict(report)), ""]
    excluded = tables.excluded_lines(report)
    out += [*(f"- not eligible: {_esc(line)}" for line in excluded), *([""] if excluded else [])]
    return out + _titled(
        f"### Pareto front{simulated}",
        tables.pareto(report),
        "Per context and domain, the (config, load) points that no other beats on both "
        "per-request and aggregate tok/s.",
    )


def _coding_failures(configs: list[ConfigResults]) -> list[str]:
    failures: list[tuple[str, CodingRecord]] = [
        (c.label, r) for c in configs for r in c.coding if not r.passed
    ]
    if not failures:
        return []
    lines = ["### Coding failures", ""]
    for label, r in failures[:MAX_FAILURES]:
        reason = f": {r.reason}" if r.reason else ""
        lines.append(f"- {_esc(r.problem)} under {_esc(label)}: {_esc(r.status)}{_esc(reason)}")
    if len(failures) > MAX_FAILURES:
        lines.append(f"- ... and {len(failures) - MAX_FAILURES} more (see the JSON report)")
    return [*lines, ""]


def _text_table(text: str) -> list[str]:
    """A fixed-width text table (:func:`tables.text_table`) as GFM; fenced text if not one."""
    found = tables.text_table(text)
    if found is None:
        lines = text.splitlines()
        return ["```text", *lines, "```"] if lines else []
    return _cells(found, right_from=1)


def _known(value: str | None) -> str:
    return "?" if value is None else value


def _footer(report: Report) -> str:
    facts = [
        f"pytest-specdecode {_known(report.plugin)}",
        f"pytest {_known(report.pytest)}",
        f"Python {_known(report.python)}",
        f"hosts {', '.join(report.hosts) or '?'}",
        f"control {_known(report.control)}",
        f"dialect {_known(report.dialect)}",
    ]
    if report.git_commit:
        facts.append(f"commit {report.git_commit[:12]}")
    if report.started:
        facts.append(f"started {report.started}")
    return "<sub>" + " · ".join(_esc(f) for f in facts) + "</sub>"


# --- helpers -------------------------------------------------------------------


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> list[str]:
    align = ["---:" if i in right else ":---" for i in range(len(header))]
    return [_row(header), _row(align), *(_row(r) for r in rows)]


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(c or " " for c in cells) + " |"


def _esc(text: str) -> str:
    """Text safe inside a table cell or list item: no markup, no pipes, one line."""
    return _SPECIAL.sub(r"\\\1", " ".join(text.split()))
