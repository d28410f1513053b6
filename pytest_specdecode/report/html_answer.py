"""The top of the HTML page: the answer (the verdict and the speculation policy), then the
config x load matrix it rests on.

The answer says which config to run per load and domain (the verdict's set,
``tie within noise`` or ``clear``, with each member's correctness coverage)
and per band of concurrency (the policy :mod:`~pytest_specdecode.report.policy`
writes as a file). A config no coding or lossless test checked is never shown
as the choice without ``correctness not checked`` beside it, in either.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_specdecode.report import matrix, policy, tables, verdict
from pytest_specdecode.report.html_sections import ChartSlot, items, para, section, table
from pytest_specdecode.report.model import Report, VerdictMember

NOT_CHECKED = " (correctness not checked)"


def answer(report: Report, charts: ChartSlot) -> str:
    """The verdict per load and domain, then the policy per concurrency band."""
    return section("answer", "Answer: which config to run", *_verdict(report), *_policy(report))


def _verdict(report: Report) -> list[str]:
    found = report.verdict
    header, rows = tables.verdict(report)
    missing = (report.speedup.missing if report.speedup is not None else None) or ""
    if not rows:
        measured = any(c.throughput for c in report.configs)
        reason = (
            "no group to rank"
            if found is not None
            else "this report has none (written by an older version)"
            if measured
            else "no throughput case was measured"
        )
        return ["<h3>Per load and domain</h3>", para(f"No verdict: {reason}."), para(missing)]
    by = tables.ranked_by(report)
    note = (
        f"Per load and domain, the best {by} among the configs that passed every gate "
        "(geometric mean over contexts), with every config whose 95% interval overlaps it "
        "in some context: 'tie within noise' names them all, 'clear' means the best's "
        "interval lies above every other's in every context. A config that no coding or "
        "lossless test checked is marked 'correctness not checked'; figures that contradict "
        "each other (TPOT speedup against tok/s ratio, or a TPOT of 0) are not ranked."
    )
    excluded = [f"not eligible: {line}" for line in tables.excluded_lines(report)]
    return [
        "<h3>Per load and domain</h3>",
        para(note, "note"),
        table(header, rows, ident="verdict-table"),
        items(excluded, "bad"),
        para(missing, "note"),
    ]


def policy_rows(report: Report, found: Mapping[str, Any]) -> list[list[str]]:
    """One row per band of ``found`` (the policy :func:`policy.build` made): concurrency span,
    config, its lowest tok/s ratio over NONE, the concurrencies measured, and the config's
    correctness coverage (as the verdict's)."""
    short = tables.short_labels(report.configs)
    floor = report.gates.min_accept_length
    covered = {
        c.label: VerdictMember(config=c.label, coverage=verdict.coverage(c, floor))
        for c in report.configs
    }
    rows = []
    for band in found.get("bands") or []:
        label = str(band.get("label"))
        top = band.get("max_concurrency")
        span = f"c{band.get('min_concurrency')}" + (f"-{top}" if top is not None else "+")
        none = label == "NONE"
        member = covered.get(label)
        unchecked = not none and tables.checked(member) is not True
        rows.append(
            [
                span,
                short.get(label, label) + (NOT_CHECKED if unchecked else ""),
                "1.00x (baseline)" if none else f"{float(band.get('speedup') or 0):.2f}x",
                ", ".join(f"c{c}" for c in band.get("measured") or []),
                "-" if none else tables.coverage_text(member),
            ]
        )
    return rows


def _policy(report: Report) -> list[str]:
    found = policy.build(report)
    head = "<h3>Speculation policy per concurrency band</h3>"
    if found is None:
        return [
            head,
            para(
                "No policy: it needs a NONE baseline and closed-loop (concurrency) cases.", "note"
            ),
        ]
    note = (
        "Per band of concurrency, the config with the best geometric-mean output tok/s ratio "
        f"over NONE among those whose 95% low bound is at least {policy.FLOOR:g}x of NONE in "
        "every domain and context measured there, else NONE; the ratio shown is the band's "
        "lowest. The run writes it as a file a deployment can apply (--dflash-policy, "
        "default .dflash/policy.json)."
    )
    header = ["concurrency", "config", "tok/s vs NONE", "measured at", "correctness"]
    return [
        head,
        para(note, "note"),
        table(header, policy_rows(report, found), ident="policy-table"),
    ]


def load_matrix(report: Report, charts: ChartSlot) -> str:
    """Per domain, configs down and loads (context x concurrency) across."""
    found = matrix.matrix(report)
    if not found:
        return ""
    note = (
        "Per domain: one row per config, two columns per load (context and load point): the "
        "speedup over NONE (baseline TPOT / config TPOT) with the output tok/s, and beside "
        "it the p99 time to first token and p99 inter-token latency in ms."
    )
    parts = [para(note, "note")]
    for domain, (header, rows) in found:
        parts.append(table(header, rows, ident=f"matrix-{domain}", caption=f"domain {domain}"))
    return section("matrix", "Configs x loads", *parts)
