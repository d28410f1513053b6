"""What a resumed run carries from a report: which tests are done, what their results
are, and the exit status an uninterrupted run would have had."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_specdecode.report.results import RunResults
from pytest_specdecode.report.resume import Resume, exit_status


def entry(nodeid: str, key: str, outcome: str = "passed", when: str = "call") -> dict[str, Any]:
    return {"nodeid": nodeid, "when": when, "outcome": outcome, "config": key, "config_key": key}


def coding(problem: str, nodeid: str, passed: bool = True) -> dict[str, Any]:
    return {"problem": problem, "passed": passed, "status": "pass" if passed else "fail",
            "reason": "", "samples": 1, "correct": int(passed), "nodeid": nodeid}  # fmt: skip


REPORT: dict[str, Any] = {
    "format": 1,
    "started": "2026-12-01T10:00:00+00:00",
    "git_commit": "abc",
    "configs": [
        {
            "label": "NONE",
            "key": "k0",
            "config": {"algorithm": "NONE"},
            "service": {"restarted": True, "ready_seconds": 1.0},
            "coding": [],
            "throughput": [],
            "lossless": {"t::lossless[NONE]": {"passed": True, "detail": "baseline"}},
            "errors": [],
            "died_tests": [],
        },
        {
            "label": "A",
            "key": "kA",
            "config": {"algorithm": "DFLASH", "budget": 4},
            "service": {"restarted": True, "ready_seconds": 9.0},
            "coding": [coding("fib", "t::c[A-fib]"), coding("gcd", "t::c[A-gcd]", False)],
            "throughput": [],
            "lossless": {},
            "errors": [],
            "died_tests": [],
        },
        {
            "label": "B",
            "key": "kB",
            "config": {"algorithm": "DFLASH", "budget": 8},
            "service": {"restarted": True, "ready_seconds": 9.0},
            "coding": [coding("fib", "t::c[B-fib]")],
            "throughput": [],
            "lossless": {},
            "errors": ["t::c[B-gcd]"],
            "died_tests": ["t::c[B-gcd]"],
        },
    ],
    "other_failures": [],
    "tests": [
        entry("t::lossless[NONE]", "k0"),
        entry("t::c[A-fib]", "kA"),
        entry("t::c[A-gcd]", "kA", "failed"),
        entry("t::c[B-fib]", "kB"),
        entry("t::c[B-gcd]", "kB", "failed"),  # its server died under it: not a result
        entry("t::c[B-word]", "kB", "failed", when="setup"),  # an error: not a result
    ],
}
COLLECTED = [
    ("t::lossless[NONE]", "lossless", True),
    ("t::c[A-fib]", "coding", False),
    ("t::c[A-gcd]", "coding", False),
    ("t::c[B-fib]", "coding", False),
    ("t::c[B-gcd]", "coding", False),
    ("t::c[B-word]", "coding", False),
]


def test_done_tests_are_carried_and_their_results_copied() -> None:
    resume = Resume(Path("r.json"), REPORT)
    carried = resume.plan(COLLECTED)
    assert carried == {"t::lossless[NONE]", "t::c[A-fib]", "t::c[A-gcd]", "t::c[B-fib]"}
    results = RunResults()
    assert resume.carry_into(results, {"kB"}) == 4
    a, b = results.configs["kA"], results.configs["kB"]
    # A is whole: its records and its server facts; B keeps only what is done.
    assert sorted(a.coding) == ["fib", "gcd"]
    assert a.service == {"restarted": True, "ready_seconds": 9.0}
    assert a.pass_rate() == (0.5, 1, 2)
    assert sorted(b.coding) == ["fib"]
    assert b.service == {}  # this run restarts B for its missing tests
    assert b.errors == []
    assert b.died is None
    assert b.carried is not None
    assert b.carried["whole"] is False
    assert results.resumed_from == {"report": "r.json", "started": REPORT["started"],
                                    "git_commit": "abc"}  # fmt: skip
    assert all(t["carried"] for t in results.tests)


def test_a_lossless_check_still_to_run_reruns_the_baseline() -> None:
    resume = Resume(Path("r.json"), REPORT)
    collected = [*COLLECTED, ("t::lossless[A]", "lossless", False)]
    carried = resume.plan(collected)
    assert "t::lossless[NONE]" not in carried
    assert "t::c[A-fib]" in carried


def test_carried_failures_count_in_the_exit_status() -> None:
    resume = Resume(Path("r.json"), REPORT)
    results = RunResults()
    resume.carry_into(results, set(), {"t::c[A-fib]"})
    assert exit_status(5, results) == 0  # every test carried: not "no tests collected"
    assert exit_status(0, results) == 0
    resume.carry_into(failed := RunResults(), set(), {"t::c[A-gcd]"})
    assert exit_status(0, failed) == 1  # as the uninterrupted run, which ran it and failed
    assert exit_status(2, failed) == 2
    assert exit_status(5, RunResults()) == 5
