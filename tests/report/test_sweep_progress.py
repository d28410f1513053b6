"""Sweep progress: configs done of all, elapsed, and time left from what was measured."""

from __future__ import annotations

from pytest_specdecode.report.markdown import render_markdown
from pytest_specdecode.report.sweep_progress import SweepProgress, describe, duration, notes

from .conftest import typed

RESTARTED = {"restarted": True, "ready_seconds": 60.0}


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


def run_test(sweep: SweepProgress, clock: Clock, nodeid: str, key: str, first: bool) -> bool:
    """One test: setup (with the start when ``first``), a 10 s call, teardown."""
    service = RESTARTED if first else {**RESTARTED}
    setup = 60.0 + 1.0 if first else 1.0
    clock.now += setup + 10.0
    sweep.report(nodeid, "setup", key, "coding", setup, service)
    sweep.report(nodeid, "call", key, "coding", 10.0, service)
    return sweep.report(nodeid, "teardown", key, "coding", 0.0, service)


def test_time_left_comes_from_the_starts_and_tests_measured_so_far() -> None:
    clock = Clock()
    sweep = SweepProgress(clock=clock)
    sweep.plan({"a": 2, "b": 2, "c": 2})
    assert sweep.status().left_seconds is None  # nothing measured yet
    assert not run_test(sweep, clock, "t1", "a", first=True)
    assert run_test(sweep, clock, "t2", "a", first=False)  # a's last test
    status = sweep.status()
    assert (status.configs_done, status.configs_total) == (1, 3)
    assert status.elapsed_seconds == 82.0
    # Two configs left: each a 60 s start and two tests of 11 s.
    assert status.left_seconds == 2 * (60 + 2 * 11)
    assert describe(status) == "sweep: 1/3 configs done, 1m22s elapsed, about 2m44s left"


def test_hosts_in_parallel_share_the_work_left_and_carried_configs_count_as_done() -> None:
    clock = Clock()
    sweep = SweepProgress(clock=clock, parallel=2)
    sweep.plan({"a": 1, "b": 1, "c": 1}, carried={"z": 0})
    run_test(sweep, clock, "t1", "a", first=True)
    status = sweep.status()
    assert (status.configs_done, status.configs_total, status.carried) == (2, 4, 1)
    assert status.left_seconds == 2 * (60 + 11) / 2
    assert "(1 carried from the resumed report)" in describe(status)


def test_durations_read_for_people() -> None:
    assert [duration(s) for s in (0, 45.4, 252, 7500)] == ["0s", "45s", "4m12s", "2h05m"]


def test_the_step_summary_names_moved_configs_retries_and_the_resume() -> None:
    data = {
        "tests": [
            {"nodeid": "a", "when": "call", "outcome": "passed", "carried": True},
            {"nodeid": "b", "when": "call", "outcome": "passed", "carried": True},
            {"nodeid": "a", "when": "teardown", "outcome": "passed", "carried": True},
            {"nodeid": "c", "when": "call", "outcome": "passed"},
        ],
        "sweep": {"configs_done": 2, "configs_total": 2, "carried": 1, "elapsed_seconds": 5.0},
        "resumed_from": {"report": "r.json", "started": "2026-12-01T10:00:00+00:00"},
        "configs": [
            {"label": "DFLASH budget=4", "carried": {"whole": True}, "service": {}},
            {
                "label": "DFLASH budget=8",
                "service": {
                    "host": "gpu2",
                    "moves": [{"from": "gpu3", "to": "gpu2", "reason": "SSH refused"}],
                    "start_attempts": [
                        {"why": "CUDA out of memory at start-up", "retried_after_seconds": 10.0}
                    ],
                },
            },
            {  # started once, not retried: an error of its own, not a "retried" line
                "label": "DFLASH budget=16 sim-fault=bogus",
                "service": {
                    "start_attempts": [
                        {"why": "an argument error (exit status 2)", "retried_after_seconds": None}
                    ]
                },
            },
        ],
    }
    report = typed(data)
    assert notes(report) == [
        "sweep: 2/2 configs done (1 carried from the resumed report), 5s elapsed",
        "resumed from r.json (run of 2026-12-01T10:00:00+00:00): 2 tests carried (not run "
        "again), 1 config whole (DFLASH budget=4)",
        "moved: DFLASH budget=8: gpu3 -> gpu2 (SSH refused)",
        "retried: DFLASH budget=8: 1 failed start(s) (CUDA out of memory at start-up) on gpu2",
    ]
    markdown = render_markdown(report)
    assert "### Sweep\n\n- sweep: 2/2 configs done" in markdown
    assert "- moved: DFLASH budget=8: gpu3 -\\> gpu2 (SSH refused)" in markdown
