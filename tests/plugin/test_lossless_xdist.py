"""The lossless baseline is shared by xdist workers: serial and -n 2 agree."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_specdecode.throughput.lossless import GreedyOutput
from pytest_specdecode.throughput.runner import LosslessBaseline

LOSSLESS = """
import pytest

@pytest.mark.dflash(algorithm="NONE")
def test_baseline(dflash_lossless):
    dflash_lossless.check()

@pytest.mark.dflash(budget=8)
def test_lossless(dflash_lossless):
    dflash_lossless.check()
"""


@pytest.mark.slow
def test_a_lossy_config_fails_under_workers_as_it_does_serially(
    pytester: pytest.Pytester, sim_project: Callable[[pytest.Pytester, str], None]
) -> None:
    # xdist hands the two tests to two workers: the check runs where the baseline did not.
    sim_project(pytester, "--sim-fault lossy")
    pytester.makepyfile(test_ll=LOSSLESS)
    result = pytester.runpytest("-p", "no:cacheprovider", "-n", "2", "-rs")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*lossless gate FAILED: DFLASH budget=8 against NONE: * drafter defects in 100 replies*"]
    )


def outputs(text: str) -> list[list[GreedyOutput]]:
    return [[GreedyOutput("code", "def f():", text, (1, 2, 3))]] * 2


def test_a_baseline_recorded_by_one_worker_is_read_by_another(tmp_path: Path) -> None:
    mine, theirs = LosslessBaseline(tmp_path), LosslessBaseline(tmp_path)
    assert not theirs.load()
    mine.record(outputs("x = 1"), "NONE")
    assert theirs.load()
    assert theirs.runs == outputs("x = 1")
    assert theirs.label == "NONE"


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.on_sleep: Callable[[], None] = lambda: None

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.on_sleep()


def waiting(tmp_path: Path, clock: FakeClock) -> tuple[LosslessBaseline, LosslessBaseline]:
    runner = LosslessBaseline(tmp_path)
    checker = LosslessBaseline(tmp_path, clock=clock, sleep=clock.sleep, poll_interval=1.0)
    runner.expected = checker.expected = {"t.py::test_baseline"}
    return runner, checker


def test_a_waiting_check_stops_when_the_baseline_test_is_done(tmp_path: Path) -> None:
    clock = FakeClock()
    runner, checker = waiting(tmp_path, clock)

    def finish_at_three() -> None:
        if clock.now >= 3:
            runner.done("t.py::test_baseline")  # another worker's baseline test ends

    clock.on_sleep = finish_at_three
    checker.wait(timeout=60)
    assert clock.now == 3  # not the whole timeout
    assert not checker.load()
    assert checker.missing() == (
        "the non-speculative baseline was not recorded: t.py::test_baseline did not pass"
    )


def test_a_waiting_check_gets_the_outputs_and_gives_up_at_its_deadline(tmp_path: Path) -> None:
    clock = FakeClock()
    runner, checker = waiting(tmp_path, clock)
    checker.wait(timeout=5)
    assert clock.now == 5  # gave up at the deadline, not a poll past it
    assert "did not finish" in checker.missing()
    runner.record(outputs("y"), "NONE")
    checker.wait(timeout=5)
    assert clock.now == 5
    assert checker.runs == outputs("y")


def test_without_a_baseline_test_the_reason_says_so() -> None:
    assert LosslessBaseline().missing().startswith("no non-speculative baseline in this run")
