"""The acceptance-integrity gate end to end: each simulator fault fails the run with the
gate's line; the clean simulator passes with its line."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from .conftest import THROUGHPUT

GRID = (
    "--dflash-config=budget=8,window=1024",
    "--dflash-contexts=60,4096",
    "--dflash-concurrency=1,8",
    "--dflash-output-tokens=256",
    "--dflash-rounds=3",
    "--dflash-html=none",
)
FAILED = "acceptance gate FAILED: DFLASH budget=8 window=1024: accept length *"


@pytest.mark.parametrize(
    ("fault", "where"),
    [
        ("window-ignored", "* at ctx4096 (ctx4096-c*-t256-chat, past the window 1024) vs * at "
         "ctx60 within it (-*%, 95% interval -*% to -*%; allowed drop 40%)*"),
        ("batch-collapse", "* at c8 (ctx*-c8-t256-chat) vs * at c1 (-*%, 95% interval *"),
    ],
)  # fmt: skip
def test_each_fault_fails_the_run_with_the_gates_line(
    pytester: pytest.Pytester,
    sim_project: Callable[[pytest.Pytester, str], None],
    fault: str,
    where: str,
) -> None:
    sim_project(pytester, f"--sim-time-scale 0 --sim-fault {fault}")
    pytester.makepyfile(test_tp=THROUGHPUT)
    result = pytester.runpytest("-p", "no:cacheprovider", *GRID)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.assert_outcomes(passed=4)  # every test passed: the gate fails the run
    result.stdout.fnmatch_lines([f"*{FAILED}{where}"])
    report = json.loads((pytester.path / "report.json").read_text())
    (line,) = [g for g in report["gates"]["failed"] if g.startswith("acceptance:")]
    assert "DFLASH budget=8 window=1024" in line


def test_the_clean_simulator_passes_and_says_so(
    pytester: pytest.Pytester, sim_project: Callable[[pytest.Pytester, str], None]
) -> None:
    sim_project(pytester, "--sim-time-scale 0")
    pytester.makepyfile(test_tp=THROUGHPUT)
    result = pytester.runpytest("-p", "no:cacheprovider", *GRID)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(
        ["*acceptance gate passed: DFLASH budget=8 window=1024: 4 comparison(s) across *"]
    )
    assert "acceptance gate FAILED" not in result.stdout.str()


def test_one_load_within_the_window_says_nothing(
    pytester: pytest.Pytester, sim_project: Callable[[pytest.Pytester, str], None]
) -> None:
    sim_project(pytester, "--sim-time-scale 0 --sim-fault batch-collapse")
    pytester.makepyfile(test_tp=THROUGHPUT)
    result = pytester.runpytest(
        "-p", "no:cacheprovider", *GRID, "--dflash-contexts=60", "--dflash-concurrency=1"
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert "acceptance gate" not in result.stdout.str()
