"""Gates: turn a run's results into an exit status CI can rely on.

Each gate's verdict is one line: it passed, FAILED, or CANNOT JUDGE (``pass-rate
gate passed: DFLASH budget=8: 24/26 = 92% >= 80%``). A gate cannot judge when
what it needs is missing (a saved run without the figure, nothing measured); its
line says what is missing, and it fails the run as a failed gate does: any failed
or unjudged gate makes the run exit 1. With ``--dflash-min-pass-rate`` the
coding tests' own failures stop deciding the exit status: the pass rate per
config does, while every other test must still pass.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pytest_specdecode.config.settings import Settings
from pytest_specdecode.output import figures
from pytest_specdecode.report import acceptance, degenerate, rates
from pytest_specdecode.report.results import ConfigResults, RunResults
from pytest_specdecode.throughput.stats import wilson_interval

OK, TESTS_FAILED = 0, 1
CANNOT_JUDGE = "cannot-judge"


@dataclass(frozen=True)
class Outcome:
    """One gate's verdict on one config (or one compare spec).

    ``line`` is the failure line CI logs and the JSON report keep (``pass rate:
    DFLASH budget=8: 3/5 = 60% < 80%``); :attr:`shown` is what the summary says,
    passing or failing (``pass-rate gate passed: DFLASH budget=8: 24/26 = 92% >= 80%``).
    """

    gate: str
    passed: bool
    detail: str
    line: str = ""
    judged: bool = True  # False: the gate lacked what it needs (it fails: passed is False)

    def __post_init__(self) -> None:
        if not self.judged and self.passed:
            raise ValueError("a gate that cannot judge does not pass")

    @property
    def status(self) -> str:
        """``pass``, ``fail`` or ``cannot-judge``."""
        return "pass" if self.passed else "fail" if self.judged else CANNOT_JUDGE

    @property
    def shown(self) -> str:
        verdict = {"pass": "passed", "fail": "FAILED"}.get(self.status, "CANNOT JUDGE")
        return f"{self.gate.replace(' ', '-')} gate {verdict}: {self.detail}"


def cannot_judge(gate: str, detail: str, line: str | None = None) -> Outcome:
    """A gate that lacks what it needs: its line says what is missing, and it fails."""
    return Outcome(gate, False, detail, line or f"{gate} cannot judge: {detail}", judged=False)


def benchmark_regression(exc: BaseException) -> Outcome | None:
    """pytest-benchmark's own ``--benchmark-compare-fail`` failure (it raises at its
    summary) as a failed gate of the run; None for any other error."""
    try:
        from pytest_benchmark.session import PerformanceRegression
    except ImportError:  # pragma: no cover - a dependency of the plugin
        return None
    if not isinstance(exc, PerformanceRegression):
        return None
    detail = "--benchmark-compare-fail: performance has regressed (pytest-benchmark's lines above)"
    return Outcome("benchmark", False, detail, f"pytest-benchmark {detail}")


def evaluate(settings: Settings, results: RunResults, compare_lines: list[str]) -> list[str]:
    """One line per failed gate; empty when every gate holds."""
    return [o.line for o in outcomes(settings, results, compare_lines) if not o.passed]


def outcomes(
    settings: Settings,
    results: RunResults,
    compare_lines: list[str],
    findings: list[dict[str, Any]] | None = None,
) -> list[Outcome]:
    """Every gate's verdict, passing or failing: a green run with red coding failures
    says why it is green. ``findings`` are the compare gate's per-case findings."""
    found: list[Outcome] = []
    for r in results.ordered():
        if r.died is not None:  # what it answered after that says nothing about the model
            detail = f"config {r.label}: server died after {r.died_after()} tests ({r.died})"
            found.append(Outcome("server", False, detail, detail))
    found.extend(_measured_nothing(results))
    found.extend(_unreadable(results))
    if settings.min_pass_rate is not None:
        found.extend(_pass_rate(settings.min_pass_rate, results))
    found.extend(outcome for _, outcome in _paired_by_label(results))
    if settings.min_accept_length is not None:
        found.extend(_accept_length(settings.min_accept_length, results))
    found.extend(_acceptance(settings.max_accept_drop, results))
    found.extend(
        Outcome("repetition", False, line, line)
        for line in degenerate.failure_lines(results, settings.max_repetition)
    )
    found.extend(
        Outcome("compare", False, line, f"throughput regression: {line}") for line in compare_lines
    )
    found.extend(_compare_unjudged(findings or []))
    found.extend(_compare_passed(settings, findings or []))
    return found


def _pass_rate(threshold: float, results: RunResults) -> list[Outcome]:
    """Per config with coding results (a config whose server died is the server gate's)."""
    found: list[Outcome] = []
    if not any(r.coding for r in results.ordered()) and not _skipped_all(results, "coding"):
        detail = f"no coding test ran, so nothing measured a pass rate to hold to {threshold:.0%}"
        found.append(cannot_judge("pass rate", detail))
    for r in results.ordered():
        rate_found = r.pass_rate() if r.died is None else None
        if rate_found is None:
            continue
        rate, passed, total = rate_found
        shown = f"{passed}/{total}" if _single_sample(r) else f"pass@1 {rate:.2f}"
        ok = rate >= threshold
        detail = (
            f"{r.label}: {shown} = {rate:.0%} {'>=' if ok else '<'} {threshold:.0%}"
            f"{_wilson_note(passed, total, threshold)}{_recheck_note(r)}"
        )
        found.append(Outcome("pass rate", ok, detail, f"pass rate: {detail}"))
    return found


def _wilson_note(passed: int, total: int, threshold: float) -> str:
    """The pass rate's 95% Wilson interval, and whether the floor lies inside it."""
    low, high = wilson_interval(passed, total)
    side = "within noise of" if low < threshold <= high else "clear of"
    return f" (95% interval {low:.0%}-{high:.0%}, {side} the floor)"


def _recheck_note(r: ConfigResults) -> str:
    again = sum(c.rechecked for c in r.coding.values())
    return f"; {again} answer(s) checked again after the time limit" if again else ""


PAIRED_ALPHA = 0.05
"""The paired test's level for the whole run (Holm's step-down over the configs)."""


def _paired_by_label(results: RunResults) -> list[tuple[str, Outcome]]:
    """Each config against the NONE baseline on the same problems: an exact sign test on
    the problems where they disagree. A lossless drafter changes no answer, so a config
    that loses more than chance allows fails; Holm's correction keeps a sweep of many
    configs at one false failure in twenty runs."""
    ordered = results.ordered()
    baseline = next((r for r in ordered if r.config.algorithm == "NONE" and r.coding), None)
    if baseline is None:
        return []
    base = _verdicts(baseline)
    tests = [
        (r, rates.paired(base, _verdicts(r)))
        for r in ordered
        if r is not baseline and r.coding and r.died is None and baseline.died is None
    ]
    tests = [(r, t) for r, t in tests if t.problems]
    out = []
    failing = True  # Holm: step down while the smallest p-values stay below their level
    for rank, (r, test) in enumerate(sorted(tests, key=lambda rt: rt[1].p_value)):
        level = PAIRED_ALPHA / (len(tests) - rank)
        failing = failing and test.p_value < level
        detail = (
            f"{r.label} against {baseline.label} on {test.problems} problems: "
            f"{test.lost} lost, {test.won} won (exact sign test p = {test.p_value:.3g} "
            f"{'<' if failing else '>='} {level:.3g})"
        )
        line = f"paired coding: {detail}: the config changes answers the baseline got right"
        out.append((r.label, Outcome("paired coding", not failing, detail, line)))
    return out


def _verdicts(r: ConfigResults) -> dict[str, bool]:
    return {c.problem: c.passed for c in r.coding.values()}


def _skipped_all(results: RunResults, marker: str) -> bool:
    tally = results.selected.get(marker)
    return tally is not None and tally.none_ran()


def _measured_nothing(results: RunResults) -> list[Outcome]:
    """A cannot-judge line per measuring marker whose every selected test skipped: a run
    asked to measure throughput that measured none is no green run, whatever the reason
    (``-n`` without hosts, a config the live server does not run, ...)."""
    out = []
    for marker, tally in results.selected.items():
        # What a resumed run carried from an earlier run was measured.
        carried = any(r.carried and getattr(r, marker) for r in results.ordered())
        if not tally.none_ran() or carried:
            continue
        reasons = sorted(set(tally.skipped.values()), key=list(tally.skipped.values()).index)
        more = f" (and {len(reasons) - 1} other reason(s))" if len(reasons) > 1 else ""
        n = len(tally.skipped)
        detail = f"{n} {marker} test(s) selected, none ran: all skipped: {reasons[0]}{more}"
        out.append(cannot_judge(marker, detail))
    return out


def _unreadable(results: RunResults) -> list[Outcome]:
    """A cannot-judge line per config with a record that did not read: what its test
    measured is nowhere in the report, so the run cannot say how that config did."""
    out = []
    for r in results.ordered():
        if r.refused:
            nodeid, why = next(iter(r.refused.items()))
            more = f" (and {len(r.refused) - 1} more)" if len(r.refused) > 1 else ""
            detail = f"config {r.label}: {nodeid}'s record{more} did not read: {why}"
            out.append(cannot_judge("records", detail))
    return out


def _compare_unjudged(findings: list[dict[str, Any]]) -> list[Outcome]:
    """One cannot-judge line per spec: its first unjudged case and how many more
    (``tok_s:5%: the saved run 0003 has no tok_s for ctx1024-c8-chat``)."""
    by_spec: dict[str, list[str]] = {}
    for f in findings:
        if f.get("status") == CANNOT_JUDGE:
            by_spec.setdefault(str(f.get("spec")), []).append(str(f.get("line")))
    out = []
    for spec, lines in by_spec.items():
        more = f" (and {len(lines) - 1} more case(s) it cannot judge)" if len(lines) > 1 else ""
        out.append(cannot_judge("compare", f"{spec}: {lines[0]}{more}"))
    return out


def _compare_passed(settings: Settings, findings: list[dict[str, Any]]) -> list[Outcome]:
    """A passing line per ``--dflash-compare-fail`` spec no case failed or left unjudged."""
    out = []
    for spec in settings.compare_fail:
        mine = [f for f in findings if str(f.get("spec")) == spec]
        if not mine or any(f.get("status") in ("fail", CANNOT_JUDGE) for f in mine):
            continue  # failures and unjudged cases are lines of their own
        unsure = sum(1 for f in mine if f.get("status") == "inconclusive")
        within = len(mine) - unsure
        across = any(f.get("noise") == "between-run" for f in mine if f.get("status") != "pass")
        hint = "across server starts" if across else "more rounds narrow it"
        note = f", {unsure} inconclusive (within noise; {hint})" if unsure else ""
        detail = f"{spec}: {within} of {len(mine)} cases within the limit{note}"
        out.append(Outcome("compare", True, detail))
    return out


def config_failures(settings: Settings, results: RunResults) -> dict[str, list[str]]:
    """Per config label, the gates it failed (pass rate, paired coding, lossless, accept
    floor, acceptance integrity, degenerate output) and whether its server failed its
    readiness gate: what keeps a config out of
    the verdict (and what a search treats as infeasible)."""
    degenerate_configs = degenerate.infeasible(results, settings.max_repetition)
    lost = {label for label, o in _paired_by_label(results) if not o.passed}
    return {
        r.label: [
            *_failed(r, settings),
            *(["loses coding problems NONE solves"] if r.label in lost else []),
            *degenerate_configs.get(r.label, []),
        ]
        for r in results.ordered()
    }


def _failed(r: ConfigResults, settings: Settings) -> Iterator[str]:
    """The gates a config failed on its own figures: pass rate, lossless, accept floor,
    readiness and acceptance integrity."""
    found, floor = r.pass_rate(), settings.min_pass_rate
    if floor is not None and found is not None and found[0] < floor:
        yield f"pass rate {found[0]:.0%} < {floor:.0%}"
    if any(not record.passed for record in r.lossless.values()):
        yield "not lossless"
    yield from _under_accept_floor(r, settings.min_accept_length)
    if r.errors:
        yield "server not ready"
    if r.refused:
        yield "unreadable record"
    held = _acceptance_of(r, settings.max_accept_drop)
    if held is not None and not held[0]:
        yield "acceptance collapses"


def _under_accept_floor(r: ConfigResults, least: float | None) -> list[str]:
    """An unknown accept length is below the floor: it cannot show the drafter helps."""
    if least is None or r.config.algorithm == "NONE":
        return []
    accept = r.accept_length()
    if accept is not None and accept >= least:
        return []
    shown = "unknown" if accept is None else figures.number(accept, 2)
    return [f"accept length {shown} < {figures.plain(least)}"]


def exit_status(
    exitstatus: int, settings: Settings, results: RunResults, gate_lines: list[str]
) -> int:
    """The run's exit status once gates are applied.

    Interruptions, usage and internal errors and "no tests ran" keep pytest's
    status; otherwise a failed gate is 1, and with a pass-rate gate, coding
    failures alone no longer fail the run.
    """
    if exitstatus not in (OK, TESTS_FAILED):
        return exitstatus
    if gate_lines:
        return TESTS_FAILED
    if settings.min_pass_rate is not None and any(r.coding for r in results.ordered()):
        errored = any(r.errors for r in results.ordered())
        return TESTS_FAILED if results.other_failures or errored else OK
    return exitstatus


def _single_sample(results: ConfigResults) -> bool:
    return all(record.samples == 1 for record in results.coding.values())


def _accept_length(minimum: float, results: RunResults) -> list[Outcome]:
    """The accept-length gate: a figure the server did not report is unknown, and an
    unknown figure fails the gate (it cannot show the drafter still helps)."""
    found: list[Outcome] = []
    measured = [
        r for r in results.ordered() if r.config.algorithm != "NONE" and (r.throughput or r.coding)
    ]
    floor = figures.plain(minimum)
    for r in measured:
        accept = r.accept_length()
        if accept is None:
            detail = (
                f"{r.label}: unknown < {floor}: the server reported no speculation counts "
                "(spec_verify_ct, spec_accept_length); check that it runs speculative decoding "
                "and reports them"
            )
            found.append(cannot_judge("accept length", detail, f"accept length: {detail}"))
        else:
            ok = accept >= minimum
            detail = f"{r.label}: {figures.number(accept, 2)} {'>=' if ok else '<'} {floor}"
            found.append(Outcome("accept length", ok, detail, f"accept length: {detail}"))
    if not measured:
        detail = (
            f"unknown < {floor}: no throughput or coding test of a speculative config ran, "
            "so nothing measured it"
        )
        found.append(cannot_judge("accept length", detail, f"accept length: {detail}"))
    return found


def _acceptance(tolerance: float, results: RunResults) -> list[Outcome]:
    """The acceptance-integrity gate (report/acceptance.py), per speculative config with
    something to compare: several loads, or contexts past its window."""
    found: list[Outcome] = []
    for r in results.ordered():
        verdict = _acceptance_of(r, tolerance)
        if verdict is not None:
            ok, detail = verdict
            found.append(Outcome("acceptance", ok, detail, "" if ok else f"acceptance: {detail}"))
    return found


def _acceptance_of(r: ConfigResults, tolerance: float) -> tuple[bool, str] | None:
    if r.config.algorithm == "NONE" or r.died is not None:
        return None
    points = [p for t in r.throughput.values() if (p := acceptance.point(t.case, t.metrics))]
    return acceptance.judge(r.label, points, acceptance.window_of(r.config), tolerance)
