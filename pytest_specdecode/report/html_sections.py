"""The HTML report's sections as markup, in the order a reader asks.

Every value shown is escaped here (:func:`esc`), whatever its source: a
config label, a failure's cause and a launch line are text from the run, not
markup. Tables are plain ``<table>`` elements built from the same cells the
terminal and Markdown summaries show (:mod:`~pytest_specdecode.report.tables`),
so they read without JavaScript; :mod:`~pytest_specdecode.report.html_charts`
adds the charts.
"""

from __future__ import annotations

import bisect
import html
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from pytest_specdecode.output import figures
from pytest_specdecode.report import client_limit, tables
from pytest_specdecode.report.model import ConfigResults, PassRate, Report

MAX_FAILURES = 500
"""Coding failures listed on the page; the JSON report keeps every one."""
MAX_SEARCH_ROWS = 500
SIM_BANNER = (
    "Simulated, not a GPU result: every figure on this page comes from the bundled "
    "SGLang-compatible simulator."
)

ChartSlot = Callable[[str], str]
"""Markup of the charts whose ids start with the given prefix (empty when none)."""


def esc(value: object) -> str:
    """Any value as text in HTML (element content or a quoted attribute)."""
    return html.escape(str(value), quote=True)


_NUMERIC = re.compile(r"[-+]?[\d,.]+(x|%| s)?( \(|\s±|$).*")
"""A cell that reads as a figure (``30,572 ±2.1%``, ``2.41x (2.30-2.52)``): aligned right."""


def table(
    header: Sequence[str], rows: Sequence[Sequence[str]], *, ident: str = "", caption: str = ""
) -> str:
    """A ``<table>`` of text cells (escaped here); numeric-looking cells align right."""
    if not rows:
        return ""
    attr = f' id="{esc(ident)}"' if ident else ""
    # Each table scrolls in its own box: a wide one never widens the page.
    out = [f'<div class="scroll"><table{attr}>']
    if caption:
        out.append(f"<caption>{esc(caption)}</caption>")
    out.append("<thead><tr>" + "".join(f'<th scope="col">{esc(h)}</th>' for h in header))
    out.append("</tr></thead><tbody>")
    for row in rows:
        cells = "".join(
            f'<td class="num">{esc(c)}</td>' if _NUMERIC.match(str(c)) else f"<td>{esc(c)}</td>"
            for c in row
        )
        out.append(f"<tr>{cells}</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def section(ident: str, title: str, *body: str) -> str:
    """A titled ``<section>``; the empty parts of ``body`` are left out."""
    inner = "\n".join(b for b in body if b)
    return f'<section id="{esc(ident)}">\n<h2>{esc(title)}</h2>\n{inner}\n</section>'


def para(text: str, cls: str = "") -> str:
    attr = f' class="{esc(cls)}"' if cls else ""
    return f"<p{attr}>{esc(text)}</p>" if text else ""


def items(lines: Sequence[str], cls: str = "") -> str:
    if not lines:
        return ""
    attr = f' class="{esc(cls)}"' if cls else ""
    return f"<ul{attr}>" + "".join(f"<li>{esc(line)}</li>" for line in lines) + "</ul>"


# --- the top of the page -----------------------------------------------------------


def banner(report: Report) -> str:
    if not tables.simulated(report):
        return ""
    return f'<div class="banner" id="simulated" role="note">{esc(SIM_BANNER)}</div>'


def status(report: Report) -> str:
    """One line: the exit status and how many gates failed."""
    failed = list(report.gates.failed)
    code = report.exitstatus
    parts = []
    if report.interrupted:
        parts.append("run interrupted: the figures are what it measured before that")
    count = len(failed)
    parts.append(f"{count} gate{'s' if count != 1 else ''} failed" if failed else "no gate failed")
    if code is not None:
        parts.append(f"exit status {code}")
    cls = "status bad" if failed or code not in (0, None) else "status good"
    return f'<p class="{cls}" id="status">{esc("; ".join(parts))}</p>' + items(failed, "bad")


# --- configs -------------------------------------------------------------------------


def named_in(lines: Sequence[str], labels: Sequence[str]) -> dict[str, list[str]]:
    """Per label, the lines that name it, in order: a gate line names a config as
    ``<label>:`` at its start or after whitespace ("pass rate: DFLASH budget=8: 3/5 ...").

    One pass over each line's ``<words>:`` spans (no longer than the longest label),
    looked up in a set: a page of N configs and N gate lines does not test every
    line against every label."""
    known = set(labels)
    longest = max((len(label) for label in known), default=0)
    out: dict[str, list[str]] = {}
    for line in lines:
        starts = [0] + [i + 1 for i, char in enumerate(line) if char.isspace()]
        colons = [i for i, char in enumerate(line) if char == ":"]
        found: dict[str, None] = {}
        for start in starts:
            at = bisect.bisect_left(colons, start)
            while at < len(colons) and colons[at] - start <= longest:
                if line[start : colons[at]] in known:
                    found[line[start : colons[at]]] = None
                at += 1
        for label in found:
            out.setdefault(label, []).append(line)
    return out


@dataclass(frozen=True)
class CardIndex:
    """What each config card looks up, indexed once for the page (by config label)."""

    standing: tables.Standing
    summary: Mapping[str, list[str]]
    """The gate summary lines naming each config."""
    failed: Mapping[str, list[str]]
    """The failed gate lines naming each config."""


def card_index(report: Report) -> CardIndex:
    labels = [c.label for c in report.configs]
    return CardIndex(
        tables.standing(report),
        named_in(report.gates.summary, labels),
        named_in(report.gates.failed, labels),
    )


def gate_rows(
    report: Report, config: ConfigResults, index: CardIndex | None = None
) -> list[list[str]]:
    """Every gate's word on one config: readiness, verified config, lossless, the run's
    gates that name it, and whether the verdict could choose it (``index``: the page's
    :func:`card_index`, built once for every card)."""
    index = card_index(report) if index is None else index
    label = config.label
    rows = [*_readiness(config), *_verified(config.service), *_died(config), *_lossless(config)]
    for line in index.summary.get(label) or []:
        word = "FAILED" if " gate FAILED" in line else "passed"
        rows.append([line.split(" gate ")[0], word, line.split(": ", 1)[-1]])
    details = {r[2] for r in rows}
    rows += [
        [line.split(":")[0], "FAILED", line]
        for line in index.failed.get(label) or []
        if line.split(": ", 1)[-1] not in details
    ]
    if report.verdict is not None:
        rows.append(_eligible(index.standing, label))
    return rows


def _readiness(config: ConfigResults) -> list[list[str]]:
    service = config.service
    if config.errors:
        return [["readiness", "FAILED", f"{len(config.errors)} test(s) errored at setup"]]
    if not service:
        return []
    phases = [str(p[0]) for p in service.get("phases") or [] if isinstance(p, Sequence) and p]
    restarted = "restarted" if service.get("restarted") else "live server, no restart"
    shown = " -> ".join(phases) or restarted
    return [["readiness", "passed", f"{shown}; {_secs(service.get('ready_seconds'))}"]]


def _verified(service: Mapping[str, Any]) -> list[list[str]]:
    if not service:
        return []
    unverified = [str(u) for u in service.get("unverified") or []]
    if unverified:
        return [["config verified", "partly", f"not verifiable: {', '.join(unverified)}"]]
    if service.get("speculative_algorithm") is not None or "verified" in str(service.get("phases")):
        return [["config verified", "passed", "every requested value seen in /server_info"]]
    return [["config verified", "unknown", "the report does not say (written by an older version)"]]


def _died(config: ConfigResults) -> list[list[str]]:
    died = config.server_died
    if died is None:
        return []
    return [["server alive", "FAILED", f"died after {died.after_tests} tests: {died.reason}"]]


def _lossless(config: ConfigResults) -> list[list[str]]:
    if not config.lossless:
        return []
    bad = [v for v in config.lossless if not v.passed]
    detail = "; ".join(v.detail for v in config.lossless)
    return [["lossless", "FAILED" if bad else "passed", detail]]


def _eligible(standing: tables.Standing, label: str) -> list[str]:
    """Whether the verdict could choose a config; "yes" only when a test checked it."""
    reasons = standing.excluded.get(label) or []
    if reasons:
        return ["verdict eligible", "no", ", ".join(map(str, reasons))]
    members = standing.members.get(label) or []
    if any(tables.checked(m) is False for m in members):
        named = any(m.best for m in members)
        said = "fastest, correctness not checked" if named else "correctness not checked"
        return ["verdict eligible", "not checked", f"{said}: no coding or lossless result"]
    return ["verdict eligible", "yes", "-"]


def _secs(value: Any) -> str:
    shown = figures.number(value, 2)
    return shown if shown == figures.MISSING else f"ready in {shown} s"


_FACTS = (
    "version",
    "speculative_algorithm",
    "speculative_num_draft_tokens",
    "speculative_eagle_topk",
    "speculative_draft_window_size",
)


def config_card(report: Report, config: ConfigResults, index: CardIndex | None = None) -> str:
    label = config.label
    service = config.service
    values = msgspec.structs.asdict(config.config)
    shown = ", ".join(f"{k}={v}" for k, v in values.items() if v not in (None, [], {}))
    phases = [
        [str(p[0]), figures.number(p[1], 3)]
        for p in service.get("phases") or []
        if isinstance(p, Sequence) and len(p) == 2
    ]
    proof = [
        ("restarted", service.get("restarted")),
        ("restart proof", service.get("restart_proof")),
        ("identity", service.get("identity")),
        ("host", service.get("host")),
        ("server", service.get("base_url")),
    ]
    facts = [(k, service.get(k)) for k in _FACTS if service.get(k) is not None]
    summary = [
        ("ready", _secs(service.get("ready_seconds"))),
        ("pass rate", _rate(config.pass_rate)),
        ("accept length", figures.number(config.accept_length, 2)),
        ("throughput cases", str(len(config.throughput))),
    ]
    return "\n".join(
        [
            '<article class="config">',
            f'<h3 class="config-label">{esc(label)}</h3>',
            para(shown, "muted"),
            _pairs(summary),
            table(["gate", "outcome", "detail"], gate_rows(report, config, index), caption="gates"),
            table(["phase", "seen at (s)"], phases, caption="readiness phases"),
            _start_phases(config),
            _pairs([(k, v) for k, v in proof if v is not None], "what proves the restart"),
            _pairs(facts, "server facts checked (/server_info)"),
            "</article>",
        ]
    )


def _start_phases(config: ConfigResults) -> str:
    header, rows = tables.start_phases([config])
    if not rows:
        return ""
    return table(header[1:], [row[1:] for row in rows], caption="start phases (seconds)")


def _rate(rate: PassRate | None) -> str:
    if rate is None:
        return figures.MISSING
    return f"{rate.passed}/{rate.total} ({rate.rate:.0%})"


def _pairs(pairs: Sequence[tuple[str, Any]], caption: str = "") -> str:
    if not pairs:
        return ""
    head = f"<h4>{esc(caption)}</h4>" if caption else ""
    body = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in pairs)
    return f'{head}<dl class="pairs">{body}</dl>'


def configs(report: Report, charts: ChartSlot) -> str:
    found = report.configs
    if not found:
        return section("configs", "Configs", para("No config was measured."))
    index = card_index(report)
    cards = "\n".join(config_card(report, c, index) for c in found)
    return section(
        "configs",
        "Configs: readiness, verification, gates",
        charts("chart-readiness"),
        f'<div class="cards">{cards}</div>',
    )


# --- figures ---------------------------------------------------------------------------


def throughput(report: Report, charts: ChartSlot) -> str:
    return _table_section(
        "throughput",
        "Speedup and throughput" + (" (simulated)" if tables.simulated(report) else ""),
        tables.rounds_note(report),
        tables.throughput(report),
        charts("chart-speedup"),
        charts("chart-tok-s"),
    )


def _table_section(name: str, title: str, note: str, found: tables.Table, *charts: str) -> str:
    """A section that is one table under a note and its charts; none when the table has no
    rows."""
    header, rows = found
    if not rows:
        return ""
    shown = table(header, rows, ident=f"{name}-table")
    return section(name, title, para(note, "note"), *charts, shown)


def latency(report: Report, charts: ChartSlot) -> str:
    return _table_section(
        "latency",
        "Latency per case",
        "What a single request sees, p50 over the case's requests (TTFT also p99).",
        tables.latency(report),
    )


def warnings(report: Report, charts: ChartSlot) -> str:
    """The run's warnings about its own figures: the client, the calibration, the baseline."""
    if not any(c.throughput for c in report.configs):
        return ""
    short = tables.short_labels(report.configs)
    found = [line.removeprefix("WARNING: ") for line in client_limit.warning(report, short)]
    calibration = report.calibration
    if calibration is not None and calibration.error:
        found.append(f"the client calibration could not run: {calibration.error}")
    missing = report.speedup.missing if report.speedup is not None else None
    if missing:
        found.append(missing)
    body = items(found, "bad") if found else para("No warning about the run's figures.", "muted")
    return section("warnings", "Warnings", body)


def repetition(report: Report, charts: ChartSlot) -> str:
    return _table_section(
        "repetition",
        "Output repetition",
        "Per config and domain: the share of repeated word 4-grams in the replies (its most "
        "repetitive case), the baseline's beside it.",
        tables.repetition(report),
    )


def break_even(report: Report, charts: ChartSlot) -> str:
    found = [r for r in report.break_even if r.line]
    if not found:
        return ""
    return section(
        "break-even",
        "Break-even load",
        para("Per config and domain, the load where the speedup (baseline TPOT / config TPOT, "
             "geometric mean over contexts) crosses 1.0, interpolated on log scales.", "note"),
        charts("chart-break-even"),
        items([r.line for r in found]),
    )  # fmt: skip


def pareto(report: Report, charts: ChartSlot) -> str:
    header, rows = tables.pareto(report)
    if not rows:
        return ""
    return section(
        "pareto",
        "Pareto front",
        para(
            "Per context and domain, the (config, load) points that no other beats on both "
            "per-request and aggregate tok/s."
        ),
        charts("chart-pareto-"),
        table(header, rows, ident="pareto-table"),
    )


def acceptance(report: Report, charts: ChartSlot) -> str:
    return _table_section(
        "acceptance",
        "Acceptance per draft position",
        "",
        tables.acceptance(report),
        charts("chart-acceptance"),
        charts("chart-histogram"),
    )


def coding(report: Report, charts: ChartSlot) -> str:
    rated = [c for c in report.configs if c.coding]
    if not rated:
        return ""
    header = ["config", "pass rate", "pass@k", "failed"]
    rows = [_pass_rate_row(c) for c in rated]
    failures = [row for c in rated for row in _failed_problems(c)]
    more = len(failures) - MAX_FAILURES
    return section(
        "coding",
        "Coding pass rate and failed problems",
        charts("chart-pass-rate"),
        table(header, rows, ident="pass-rate-table"),
        table(["config", "problem", "status", "cause"], failures[:MAX_FAILURES],
              ident="failures-table", caption="failed problems")
        if failures else para("Every problem passed under every config."),
        para(f"... and {more} more failures (see the JSON report)." if more > 0 else ""),
    )  # fmt: skip


def _pass_rate_row(config: ConfigResults) -> list[str]:
    return [
        config.label,
        _rate(config.pass_rate),
        ", ".join(f"pass@{p.k} {figures.number(p.value, 2)}" for p in config.pass_at_k) or "-",
        str(sum(1 for r in config.coding if not r.passed)),
    ]


def _failed_problems(config: ConfigResults) -> list[list[str]]:
    return [
        [config.label, r.problem, r.status, _one_line(r.reason)]
        for r in config.coding
        if not r.passed
    ]


def _one_line(text: Any, limit: int = 300) -> str:
    line = " ".join(str(text or "").split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


# --- comparison, search, provenance ----------------------------------------------------


def compare(report: Report) -> str:
    found = report.compare
    if found is None:
        return ""
    findings: dict[str, list[str]] = {}
    for f in found.findings:
        findings.setdefault(str(f.case), []).append(f"{f.status}: {f.line}")
    parsed = tables.text_table(found.table)
    if parsed is not None:
        header, rows = parsed
        words = [" | ".join(findings.get(r[0], [])) or "-" for r in rows]
        body = table([*header, "gate"], [[*r, w] for r, w in zip(rows, words, strict=True)],
                     ident="compare-table")  # fmt: skip
    else:
        body = f"<pre>{esc(found.table)}</pre>"
    saved = ", ".join(found.baseline_configs)
    return section(
        "compare",
        f"Compared with the saved run {found.baseline}",
        para(f"The saved run measured: {saved}." if saved else ""),
        body,
    )


def search(report: Report) -> str:
    """The search's path (``report.search``, search/record.py's), shown whatever its shape."""
    found = report.search
    if found is None:
        return ""
    return section("search", "Search path", _generic(found, 0))


def _generic(value: Any, depth: int) -> str:
    if isinstance(value, Mapping):
        return _generic_mapping(value, depth)
    if isinstance(value, list):
        return _generic_list(value)
    return para(_scalar(value))


def _generic_mapping(value: Mapping[Any, Any], depth: int) -> str:
    """Its scalar values as pairs, then each nested value under its key (to depth 3)."""
    if depth > 3:
        return f"<code>{esc(value)}</code>"
    scalars = [(str(k), v) for k, v in value.items() if not isinstance(v, (Mapping, list))]
    nested = [(str(k), v) for k, v in value.items() if isinstance(v, (Mapping, list))]
    out = _pairs([(k, _scalar(v)) for k, v in scalars])
    for key, inner in nested:
        out += f"<h4>{esc(key)}</h4>{_generic(inner, depth + 1)}"
    return out


def _generic_list(value: list[Any]) -> str:
    """A list of mappings as a table (a column per key), any other list as items."""
    if value and all(isinstance(v, Mapping) for v in value):
        keys = list(dict.fromkeys(str(k) for v in value for k in v))
        rows = [[_scalar(v.get(k)) for k in keys] for v in value[:MAX_SEARCH_ROWS]]
        more = len(value) - MAX_SEARCH_ROWS
        return table(keys, rows) + para(f"... and {more} more" if more > 0 else "")
    return items([_scalar(v) for v in value[:MAX_SEARCH_ROWS]])


def _scalar(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return figures.plain(value)
    if isinstance(value, (Mapping, list)):
        import json

        return json.dumps(value, default=str)[:300]
    return str(value)


def provenance(report: Report) -> str:
    run = _run_facts(report)
    found = report.configs
    launch = [
        [
            c.label,
            str(c.service.get("host") or "-"),
            str(c.service.get("launch_command") or report.launch or "-"),
        ]
        for c in found
    ]
    facts = [[c.label, *(_scalar(c.service.get(k)) for k in _FACTS)] for c in found if c.service]
    return section(
        "provenance",
        "Provenance",
        _pairs([(k, v) for k, v in run if v not in (None, "")]),
        table(["config", "host", "launch line"], launch, ident="launch-table",
              caption="launch line per config (the base launch line where the server did not "
              "report its own)"),
        table(["config", *_FACTS], facts, caption="server facts the gate checked"),
    )  # fmt: skip


def _run_facts(report: Report) -> list[tuple[str, Any]]:
    """What the whole run ran on and when (a missing fact is None)."""
    asked = report.settings.sglang_version if report.settings is not None else None
    versions = {str(v) for c in report.configs if (v := c.service.get("version"))}
    return [
        ("simulated", "yes" if tables.simulated(report) else "no"),
        ("pytest-specdecode", report.plugin),
        ("SGLang (server version)", _joined(", ", sorted(versions))),
        ("SGLang dialect / version asked", f"{report.dialect} / {asked or 'auto'}"),
        ("pytest / Python", f"{report.pytest} / {report.python}"),
        ("git commit", report.git_commit or "not a git checkout"),
        ("hosts", _joined(", ", report.hosts)),
        ("control", report.control),
        ("started", report.started),
        ("finished", report.finished),
        ("simulator defaults", _joined("; ", report.simulator_defaults)),
        ("intervals", report.intervals),
        ("speedup method", report.speedup.method if report.speedup is not None else None),
    ]


def _joined(sep: str, values: Any) -> str | None:
    """The values as text joined by ``sep``; None when there are none."""
    return sep.join(map(str, values or [])) or None
