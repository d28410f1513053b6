"""The plugin's terminal summary: per config readiness, pass rate, throughput.

pytest-benchmark's own table shows only times; this one shows what the run
is for. Plain functions returning lines, so ``pytest-specdecode report`` can
print the same summary from a saved JSON report.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from pytest_specdecode.report import client_limit, search_summary, tables
from pytest_specdecode.report.model import Compare, ConfigResults, Finding, Report

SIM_NOTICE = "simulated server: these figures come from the bundled simulator, not a GPU"


def render(report: Report, gate_lines: Iterable[str] = ()) -> list[str]:
    """Summary lines from a run report (``RunOutputs.report()`` or a saved one)."""
    configs = report.configs
    if not configs:  # nothing measured; a gate that was asked for still says its verdict
        return _gates(report, list(gate_lines))
    notice = _notice(report)
    simulated = " (simulated)" if notice else ""
    lines = [*notice, *_config_table(configs), *_carried(configs), *_coding_times(configs)]
    if any(c.throughput for c in configs):
        lines += _measured(report, configs, simulated)
    lines += _coding_failures(configs)
    lines += _compare(report.compare)
    if tables.ranks_several(report):
        lines += _verdict(report, simulated)
    lines += _break_even(report, simulated)
    return [*lines, *_search(report), *_gates(report, list(gate_lines))]


def _notice(report: Report) -> list[str]:
    """That the figures are the simulator's, with the defaults it assumed."""
    if not tables.simulated(report):
        return []
    defaults = report.simulator_defaults
    return [f"NOTE: {SIM_NOTICE}", *(f"NOTE: simulator default: {t}" for t in defaults)]


def _measured(report: Report, configs: list[ConfigResults], simulated: str) -> list[str]:
    """The throughput, latency, acceptance and repetition tables."""
    short = tables.short_labels(configs)
    lines = ["", f"throughput{simulated}: {tables.rounds_note(report)}"]
    lines += _table(*tables.throughput(report, short))
    missing = report.speedup.missing if report.speedup else None
    lines += [missing] if missing else []
    lines += ["", "latency per case (p50 over requests)", *_table(*tables.latency(report, short))]
    lines += client_limit.warning(report, short)
    lines += _titled(tables.acceptance(report), "acceptance per config and domain: rate at draft "
                     "position i = verify steps accepting at least i drafts / verify "
                     "steps")  # fmt: skip
    lines += _titled(tables.repetition(report), "output repetition per config and domain: share "
                     "of repeated word 4-grams in the replies (the most repetitive "
                     "case)")  # fmt: skip
    return lines


def _titled(table: tables.Table, title: str) -> list[str]:
    """A table under its title line; nothing when the table has no rows."""
    return ["", title, *_table(*table)] if table[1] else []


def _compare(compare: Compare | None) -> list[str]:
    """The comparison with a saved run: its table and the gate's findings."""
    if compare is None:
        return []
    saved = ", ".join(compare.baseline_configs) or "config not recorded"
    head = f"compared with {compare.baseline} (saved run of {saved}):"
    return ["", head, *compare.table.splitlines(), *_findings(compare.findings)]


def _search(report: Report) -> list[str]:
    found = search_summary.summary_lines(report)
    return ["", *found] if found else []


def _carried(configs: list[ConfigResults]) -> list[str]:
    """The results a resumed run carried (not measured again), per config."""
    found = [(c.label, c.carried) for c in configs if c.carried is not None]
    if not found:
        return []
    lines = []
    for label, carried in found:
        tests = carried.tests
        shown = ", ".join(tests[:5]) + (f" and {len(tests) - 5} more" if len(tests) > 5 else "")
        whole = " (the whole config)" if carried.whole else ""
        lines.append(f"  {label}: {len(tests)} carried{whole}: {shown}")
    source = found[0][1]
    head = (
        f"carried from {source.report!r} (run of {source.started}): "
        "results of that run, not measured again"
    )
    return ["", head, *lines]


def _gates(report: Report, failed: list[str]) -> list[str]:
    """Every gate's verdict, passing ones too (a report from before they were kept:
    its failed lines)."""
    gates = report.gates
    shown = list(gates.summary)
    if not shown:
        return ["", "dflash gates FAILED:", *[f"  {line}" for line in failed]] if failed else []
    lines = ["", f"dflash gates: {_gates_head(shown)} (the exit status follows them)"]
    lines += [f"  {line}" for line in shown]
    coding_failed = any(not r.passed for c in report.configs for r in c.coding)
    if gates.min_pass_rate is not None and coding_failed:
        lines.append(
            "  coding failures above do not fail the run by themselves: with "
            "--dflash-min-pass-rate the pass rate per config decides"
        )
    return lines


def _gates_head(shown: list[str]) -> str:
    """``all passed``, or how many passed, FAILED and CANNOT JUDGE."""
    bad = sum(1 for line in shown if " gate FAILED: " in line)
    unjudged = sum(1 for line in shown if " gate CANNOT JUDGE: " in line)
    if not bad and not unjudged:
        return "all passed"
    head = f"{len(shown) - bad - unjudged} passed, {bad} FAILED"
    return head + (f", {unjudged} CANNOT JUDGE (which fails too)" if unjudged else "")


def _coding_failures(configs: list[ConfigResults]) -> list[str]:
    """One table of failed problems, each with the configs it failed under (a problem
    failing the same way under every config of a sweep is one row, not one per config)."""
    ran: dict[str, list[str]] = {}
    failed: dict[tuple[str, str], list[str]] = {}
    for c in configs:
        for r in c.coding:
            ran.setdefault(r.problem, []).append(c.label)
            if not r.passed:
                verdict = f"{r.status}: {r.reason}"
                failed.setdefault((r.problem, verdict), []).append(c.label)
    body = []
    for (problem, verdict), labels in failed.items():
        where = ", ".join(labels)
        if len(ran[problem]) > 1 and len(labels) == len(ran[problem]):
            where = f"all {len(labels)} configs"
        body.append([problem, where, verdict])
    head = "coding failures: each failed problem, the configs it failed under, the verdict"
    return _titled((["problem", "failed under", "verdict"], body), head)


def _findings(findings: list[Finding]) -> list[str]:
    """The compare gate's tally per spec, and each inconclusive case (failures are gate lines)."""
    lines = []
    for spec in dict.fromkeys(f.spec for f in findings):
        mine = [f for f in findings if f.spec == spec]
        count = {s: sum(1 for f in mine if f.status == s) for s in ("pass", "fail", "cannot-judge")}
        unsure = [f for f in mine if f.status == "inconclusive"]
        unjudged = f", {count['cannot-judge']} cannot be judged" if count["cannot-judge"] else ""
        lines.append(
            f"{spec}: {count['pass']} within the limit, {len(unsure)} inconclusive, "
            f"{count['fail']} beyond it (95% intervals){unjudged}"
        )
        lines += [f"  {f.line}" for f in unsure]
        lines += _noise_used(mine)
    return lines


def _noise_used(findings: list[Finding]) -> list[str]:
    """Which noise the cases' verdicts used, with the saved runs found for them."""
    groups = Counter(
        (str(f.noise), f.saved_runs) for f in findings if f.noise and isinstance(f.saved_runs, int)
    )
    return [
        f"  noise used for {n} case(s): {_NOISE.get(noise, _WITHIN).format(k=k)}"
        for (noise, k), n in groups.items()
    ]


_NOISE = {
    "within-run only": "between-run noise unknown ({k} saved runs): the gate uses the "
    "within-run interval only",
    "between-run": "between-run noise from {k} saved runs (wider than the within-run interval)",
}
"""What each noise a compare verdict used means, with the saved runs found for it."""
_WITHIN = "within-run noise (wider than the between-run noise of {k} saved runs)"


def _verdict(report: Report, simulated: str) -> list[str]:
    by = tables.ranked_by(report)
    lines = [
        "",
        f"verdict{simulated}: per load and domain, the best {by} among the configs that passed "
        "every gate (geometric mean over contexts), with every config whose 95% interval "
        "overlaps it (tie within noise; clear when none does)",
        *_table(*tables.verdict(report)),
    ]
    lines += [f"  not eligible: {line}" for line in tables.excluded_lines(report)]
    return lines + _titled(tables.pareto(report), f"pareto front{simulated}: per context and "
                           "domain, the (config, load) points no other beats on both per-request "
                           "and aggregate tok/s")  # fmt: skip


def _break_even(report: Report, simulated: str) -> list[str]:
    """One line per config and domain: the load where its speedup crosses 1.0."""
    found = [r for r in report.break_even if r.line]
    if not found:
        return []
    head = (
        f"break-even load{simulated}: per config and domain, where the speedup (baseline TPOT / "
        "config TPOT, geometric mean over contexts) crosses 1.0, interpolated on log scales"
    )
    return ["", head, *[f"  {r.line}" for r in found]]


def _config_table(configs: list[ConfigResults]) -> list[str]:
    return _table(*tables.configs(configs)) + _titled(tables.start_phases(configs), "start "
        "phases: from the server's log lines (start, other and first generate: the plugin's clock "
        "from the launch)")  # fmt: skip


def _coding_times(configs: list[ConfigResults]) -> list[str]:
    """Per config: time spent generating the coding answers and checking them."""
    lines = []
    for c in configs:
        timed = [r for r in c.coding if r.check_seconds is not None]
        if timed:
            generating = sum(r.generate_seconds or 0.0 for r in timed)
            checking = sum(r.check_seconds or 0.0 for r in timed)
            answers = sum(r.samples for r in timed)
            again = sum(r.rechecked for r in timed)
            rechecked = f"; {again} checked again after the time limit" if again else ""
            lines.append(
                f"coding time under {c.label}: generating {generating:.1f} s, checking "
                f"{checking:.1f} s ({answers} answers{rechecked}; checks run in parallel with "
                "generation)"
            )
    return lines


def _table(header: list[str], body: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    out.append("  ".join("-" * w for w in widths))
    for row in body:
        out.append("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    return out
