"""Gates and the exit status, from synthetic results (no pytest run, no server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_specdecode.config.settings import Settings
from pytest_specdecode.report import gates, summary
from pytest_specdecode.report.outputs import RunOutputs
from pytest_specdecode.report.results import RunResults

from .feed import B4, B8, NONE, coding, errored, throughput

OK, FAILED = pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED


def two_of_three() -> RunResults:
    results = RunResults()
    for problem, passed in (("fib", True), ("gcd", True), ("flatten", False)):
        coding(results, B8, problem, passed)
    return results


def test_pass_rate_gate_names_the_config_and_the_figures() -> None:
    lines = gates.evaluate(Settings(min_pass_rate=0.8), two_of_three(), [])
    assert lines == [
        "pass rate: DFLASH budget=8 window=2048: 2/3 = 67% < 80% "
        "(95% interval 21%-94%, within noise of the floor)"
    ]
    assert gates.exit_status(FAILED, Settings(min_pass_rate=0.8), two_of_three(), lines) == FAILED


def test_a_held_pass_rate_gate_turns_coding_failures_into_a_pass() -> None:
    settings = Settings(min_pass_rate=0.6)
    assert gates.evaluate(settings, two_of_three(), []) == []
    assert gates.exit_status(FAILED, settings, two_of_three(), []) == OK
    # Without the gate the failed answer fails the run as pytest says.
    assert gates.exit_status(FAILED, Settings(), two_of_three(), []) == FAILED


def test_other_failures_and_errors_still_fail_under_a_held_gate() -> None:
    settings = Settings(min_pass_rate=0.5)
    results = two_of_three()
    errored(results, B4, "t.py::test_behind_a_failed_gate")
    assert gates.evaluate(settings, results, []) == []
    assert gates.exit_status(FAILED, settings, results, []) == FAILED


@pytest.mark.parametrize("status", [2, 3, 4, 5])
def test_interrupts_and_usage_errors_keep_pytests_status(status: int) -> None:
    lines = ["pass rate: x"]
    assert gates.exit_status(status, Settings(min_pass_rate=0.9), two_of_three(), lines) == status


def accept_results(*pairs: tuple[object, dict[str, float]]) -> RunResults:
    results = RunResults()
    for config, metrics in pairs:
        throughput(results, config, "ctx60-c1", {"tok_s": 30572.4, **metrics})  # type: ignore[arg-type]
    return results


def test_accept_length_gate_fails_below_the_minimum() -> None:
    results = accept_results(
        (B4, {"completion_tokens": 300, "spec_verify_ct": 200}),
        (B8, {"completion_tokens": 300, "spec_verify_ct": 100}),
    )
    lines = gates.evaluate(Settings(min_accept_length=2.5), results, [])
    assert lines == ["accept length: DFLASH budget=4 window=2048: 1.50 < 2.5"]


def test_accept_length_unknown_fails_the_gate_that_was_asked_for() -> None:
    # The server reported no speculation counts: the gate cannot hold, so it fails.
    results = accept_results((B8, {"completion_tokens": 300}))
    lines = gates.evaluate(Settings(min_accept_length=2), results, [])
    assert len(lines) == 1
    assert lines[0].startswith("accept length: DFLASH budget=8 window=2048: unknown < 2: ")
    assert "no speculation counts" in lines[0]
    assert gates.exit_status(OK, Settings(min_accept_length=2), results, lines) == FAILED
    # Not asked for: nothing to say.
    assert gates.evaluate(Settings(), results, []) == []


def test_accept_length_gate_ignores_the_baseline_but_not_an_empty_run() -> None:
    both = accept_results(
        (NONE, {"completion_tokens": 300}),
        (B8, {"completion_tokens": 300, "spec_verify_ct": 100}),
    )
    assert gates.evaluate(Settings(min_accept_length=2), both, []) == []
    only_baseline = accept_results((NONE, {"completion_tokens": 300}))
    (line,) = gates.evaluate(Settings(min_accept_length=2), only_baseline, [])
    assert "nothing measured it" in line


def test_coding_answers_carry_the_accept_length_without_throughput() -> None:
    results = RunResults()
    coding(results, B8, "fib", passed=True, accept=1.2, tokens=12)
    (line,) = gates.evaluate(Settings(min_accept_length=2), results, [])
    assert line == "accept length: DFLASH budget=8 window=2048: 1.20 < 2"


def test_regression_lines_come_after_the_other_gates() -> None:
    lines = gates.evaluate(Settings(min_pass_rate=0.8), two_of_three(), ["ctx60-c1: tok_s ..."])
    assert lines[-1] == "throughput regression: ctx60-c1: tok_s ..."


def test_every_gate_says_its_verdict_passing_or_failing() -> None:
    settings = Settings(min_pass_rate=0.6, min_accept_length=2.0, compare_fail=("tok_s:5%",))
    results = two_of_three()
    throughput(results, B8, "ctx60-c1", {"completion_tokens": 310, "spec_verify_ct": 100})
    findings = [{"case": "ctx60-c1", "spec": "tok_s:5%", "status": "pass", "line": "..."}]
    shown = [o.shown for o in gates.outcomes(settings, results, [], findings)]
    assert shown == [
        "pass-rate gate passed: DFLASH budget=8 window=2048: 2/3 = 67% >= 60% "
        "(95% interval 21%-94%, within noise of the floor)",
        "accept-length gate passed: DFLASH budget=8 window=2048: 3.10 >= 2",
        "compare gate passed: tok_s:5%: 1 of 1 cases within the limit",
    ]
    failing = gates.outcomes(Settings(min_pass_rate=0.8), results, ["ctx60-c1: tok_s -9%"])
    assert [o.shown for o in failing] == [
        "pass-rate gate FAILED: DFLASH budget=8 window=2048: 2/3 = 67% < 80% "
        "(95% interval 21%-94%, within noise of the floor)",
        "compare gate FAILED: ctx60-c1: tok_s -9%",
    ]
    # The failure lines CI logs and the report keeps stay as they were.
    assert [o.line for o in failing] == gates.evaluate(
        Settings(min_pass_rate=0.8), results, ["ctx60-c1: tok_s -9%"]
    )


def test_the_summary_explains_a_green_run_with_red_coding_failures(tmp_path: Path) -> None:
    results = RunResults()
    for i in range(26):
        coding(results, B8, f"p{i}", passed=i >= 2)
    outputs = RunOutputs(Settings(report="r.json", min_pass_rate=0.8), results, tmp_path)
    assert outputs.finish(int(FAILED)) == OK
    lines = summary.render(outputs.report(), outputs.gate_lines)
    start = lines.index("dflash gates: all passed (the exit status follows them)")
    assert lines[start + 1 : start + 3] == [
        "  pass-rate gate passed: DFLASH budget=8 window=2048: 24/26 = 92% >= 80% "
        "(95% interval 76%-98%, within noise of the floor)",
        "  coding failures above do not fail the run by themselves: with "
        "--dflash-min-pass-rate the pass rate per config decides",
    ]
    saved = json.loads((tmp_path / "r.json").read_text())["gates"]
    assert saved["summary"] == [lines[start + 1].strip()]
    assert saved["failed"] == []


def paired_results(base: dict[str, bool], config: dict[str, bool]) -> RunResults:
    results = RunResults()
    for problem, passed in base.items():
        coding(results, NONE, problem, passed)
    for problem, passed in config.items():
        coding(results, B8, problem, passed)
    return results


def test_a_config_that_loses_problems_the_baseline_solved_fails_the_paired_gate() -> None:
    names = [f"p{i}" for i in range(40)]
    base = dict.fromkeys(names, True)
    config = {n: i >= 6 for i, n in enumerate(names)}  # 6 lost, 0 won: p = 1/64
    lines = gates.evaluate(Settings(), paired_results(base, config), [])
    assert lines == [
        "paired coding: DFLASH budget=8 window=2048 against NONE on 40 problems: 6 lost, "
        "0 won (exact sign test p = 0.0156 < 0.05): the config changes answers the baseline "
        "got right"
    ]


def test_losses_balanced_by_wins_are_chance_and_pass() -> None:
    names = [f"p{i}" for i in range(40)]
    base = {n: i % 2 == 0 for i, n in enumerate(names)}
    config = {n: i % 2 == 1 for i, n in enumerate(names)}  # 20 lost, 20 won
    outcomes = gates.outcomes(Settings(), paired_results(base, config), [])
    (paired,) = [o for o in outcomes if o.gate == "paired coding"]
    assert paired.passed
    assert "20 lost, 20 won" in paired.detail


def test_no_baseline_no_paired_gate() -> None:
    assert not [o for o in gates.outcomes(Settings(), two_of_three(), []) if "paired" in o.gate]


def test_a_config_that_loses_problems_is_kept_out_of_the_verdict() -> None:
    names = [f"p{i}" for i in range(40)]
    results = paired_results(dict.fromkeys(names, True), {n: i >= 6 for i, n in enumerate(names)})
    failures = gates.config_failures(Settings(), results)
    assert failures[B8.label()] == ["loses coding problems NONE solves"]
    assert failures[NONE.label()] == []
