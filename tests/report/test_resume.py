"""What a resumed run carries from a report: which tests are done, what their results
are, and the exit status an uninterrupted run would have had."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_specdecode.coding import Problem
from pytest_specdecode.config.settings import Settings
from pytest_specdecode.report import json_report
from pytest_specdecode.report.results import RunResults
from pytest_specdecode.report.resume import Resume, ResumeError, exit_status

from .conftest import typed


def entry(nodeid: str, key: str, outcome: str = "passed", when: str = "call") -> dict[str, Any]:
    return {"nodeid": nodeid, "when": when, "outcome": outcome, "config": key, "config_key": key}


def coding(problem: str, nodeid: str, passed: bool = True) -> dict[str, Any]:
    return {"problem": problem, "passed": passed, "status": "pass" if passed else "fail",
            "reason": "", "samples": 1, "correct": int(passed), "nodeid": nodeid}  # fmt: skip


REPORT: dict[str, Any] = {
    "format": 2,
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
            "lossless": [{"nodeid": "t::lossless[NONE]", "passed": True, "detail": "baseline"}],
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
            "lossless": [],
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
            "lossless": [],
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
    resume = Resume(Path("r.json"), typed(REPORT))
    carried = resume.plan(COLLECTED)
    assert carried == {"t::lossless[NONE]", "t::c[A-fib]", "t::c[A-gcd]", "t::c[B-fib]"}
    results = RunResults()
    assert resume.carry_into(results, {"kB"}) == 4
    a, b = results.configs["kA"], results.configs["kB"]
    # A is whole: its records and its server facts; B keeps only what is done.
    assert sorted(r.problem for r in a.coding.values()) == ["fib", "gcd"]
    assert a.service == {"restarted": True, "ready_seconds": 9.0}
    assert a.pass_rate() == (0.5, 1, 2)
    assert sorted(r.problem for r in b.coding.values()) == ["fib"]
    assert b.service == {}  # this run restarts B for its missing tests
    assert b.errors == []
    assert b.died is None
    assert b.carried is not None
    assert b.carried["whole"] is False
    assert results.resumed_from == {"report": "r.json", "started": REPORT["started"],
                                    "git_commit": "abc"}  # fmt: skip
    assert all(t["carried"] for t in results.tests)


def test_a_lossless_check_still_to_run_reruns_the_baseline() -> None:
    resume = Resume(Path("r.json"), typed(REPORT))
    collected = [*COLLECTED, ("t::lossless[A]", "lossless", False)]
    carried = resume.plan(collected)
    assert "t::lossless[NONE]" not in carried
    assert "t::c[A-fib]" in carried


def test_carried_failures_count_in_the_exit_status() -> None:
    resume = Resume(Path("r.json"), typed(REPORT))
    results = RunResults()
    resume.carry_into(results, set(), {"t::c[A-fib]"})
    assert exit_status(5, results) == 0  # every test carried: not "no tests collected"
    assert exit_status(0, results) == 0
    resume.carry_into(failed := RunResults(), set(), {"t::c[A-gcd]"})
    assert exit_status(0, failed) == 1  # as the uninterrupted run, which ran it and failed
    assert exit_status(2, failed) == 2
    assert exit_status(5, RunResults()) == 5


def saved(tmp_path: Path, settings: Settings, problems: dict[str, str] | None = None) -> Path:
    """A report made with ``settings`` (and that problem set), as a run writes it."""
    made = json_report.result_settings(settings)
    if problems is not None:
        made["problem_set"] = json_report.problem_records(problems)
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"format": 2, "settings": made, "configs": [], "tests": []}))
    return path


@pytest.mark.parametrize(
    ("change", "phrase"),
    [
        ({"domains": ("code", "chat")}, "cases: domains ['chat'] -> ['code', 'chat']"),
        ({"request_rates": (4.0, 8.0)}, "cases: request_rates [] -> [4.0, 8.0]"),
        ({"max_concurrency": 4}, "cases: max_concurrency None -> 4"),
        ({"rate_requests": 32}, "cases: rate_requests 16 -> 32"),
        ({"slo": (("ttft", 0.5),)}, "cases: slo '' -> 'ttft:500ms'"),
        (
            {"sim_args": ("--sim-fault", "start-oom")},
            "simulator_arguments [] -> ['--sim-fault', 'start-oom']",
        ),
    ],
    ids=["domains", "request-rate", "max-concurrency", "rate-requests", "slo", "sim-knobs"],
)
def test_load_settings_that_change_results_refuse_the_resume(
    tmp_path: Path, change: dict[str, Any], phrase: str
) -> None:
    path = saved(tmp_path, Settings())
    Resume.load(path, Settings(), tmp_path)  # the same settings resume
    with pytest.raises(ResumeError) as refused:
        Resume.load(path, dataclasses.replace(Settings(), **change), tmp_path)
    message = str(refused.value)
    assert f"was made with other settings that change results: {phrase}; resume" in message
    assert "\n" not in message


def problem(name: str, cases: tuple[tuple[Any, ...], ...], source: str = "python") -> Problem:
    return Problem(name=name, prompt=f"Write {name}(x).", entry_point=name,
                   reference=f"def {name}(x):\n    return 2 * x\n", cases=cases,
                   source=source)  # fmt: skip


def test_the_problem_set_is_names_and_definitions_whatever_the_source(tmp_path: Path) -> None:
    base = json_report.problem_set([problem("double", ((1,),)), problem("gcd", ((2,),))])
    assert list(base) == ["double", "gcd"]
    # The same definitions from a TOML file instead of a hook: the same set.
    moved = [problem("double", ((1,),), source=str(tmp_path / "p.toml")), problem("gcd", ((2,),))]
    assert json_report.problem_set(moved) == base
    path = saved(tmp_path, Settings(), base)
    Resume.load(path, Settings(), tmp_path, lambda: dict(base))
    other = json_report.problem_set([problem("double", ((1,), (3,))), problem("fib", ((2,),))])
    with pytest.raises(ResumeError, match=r"problem_set: 'double' changed, 'fib' added, 'gcd' "
                       r"removed; resume with that run's settings"):  # fmt: skip
        Resume.load(path, Settings(), tmp_path, lambda: other)
    # Problems that do not load now: their own collection error says so, not the resume.
    Resume.load(path, Settings(), tmp_path, lambda: None)
