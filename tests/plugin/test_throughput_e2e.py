"""Throughput cases through pytest-benchmark, comparisons, gates and the lossless check."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

THROUGHPUT = """
import pytest

@pytest.mark.throughput
def test_throughput(dflash_case, dflash_throughput, benchmark):
    dflash_throughput.run(dflash_case, benchmark)
"""
SMALL = (
    "--dflash-contexts=60",
    "--dflash-concurrency=1,4",
    "--dflash-output-tokens=64",
    "--dflash-rounds=1",
)


@pytest.fixture
def project(
    pytester: pytest.Pytester, sim_project: Callable[[pytest.Pytester, str], None]
) -> pytest.Pytester:
    # A modelled (not zero) step time, 50x faster than real: budgets differ in tok/s.
    sim_project(pytester, "--sim-time-scale 0.02")
    pytester.makepyfile(test_tp=THROUGHPUT)
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    # In-process: the plugin's own state is per Config, and servers stop at session end.
    return pytester.runpytest("-p", "no:cacheprovider", *SMALL, *args)


def test_benchmark_compare_pairs_cases_across_configs(project: pytest.Pytester) -> None:
    first = run(project, "--dflash-config=budget=8,window=2048", "--benchmark-save=b8")
    first.assert_outcomes(passed=2)
    saved = list(project.path.glob(".benchmarks/*/0001_b8.json"))
    assert len(saved) == 1
    extra = [b["extra_info"] for b in json.loads(saved[0].read_text())["benchmarks"]]
    assert {e["case"] for e in extra} == {"ctx60-c1-t64", "ctx60-c4-t64"}
    assert all(e["config"] == "DFLASH budget=8 window=2048" and e["tok_s"] > 0 for e in extra)
    second = run(project, "--dflash-config=budget=16,window=2048", "--benchmark-compare=0001")
    second.assert_outcomes(passed=2)
    for case in ("ctx60-c1-t64", "ctx60-c4-t64"):
        for run_name in ("0001_b8", "NOW"):
            second.stdout.fnmatch_lines([f"*test_throughput?{case}? ({run_name})*"])


def saved_run(path: Path, tok_s: float) -> Path:
    benches = [
        {
            "name": f"test_throughput[{case}]",
            "fullname": f"test_tp.py::test_throughput[{case}]",
            "extra_info": {"case": case, "config": "saved", "tok_s": tok_s, "accept_length": 3.0},
            "stats": {"mean": 1.0},
        }
        for case in ("ctx60-c1-t64", "ctx60-c4-t64")
    ]
    path.write_text(json.dumps({"benchmarks": benches}))
    return path


def test_compare_fail_gate(project: pytest.Pytester) -> None:
    fast = saved_run(project.path / "fast.json", 1e9)
    regressed = run(project, f"--dflash-compare={fast}", "--dflash-compare-fail=tok_s:5%")
    assert regressed.ret == pytest.ExitCode.TESTS_FAILED
    regressed.stdout.fnmatch_lines(
        [
            "*throughput regression: ctx60-c1-t64: tok_s 1,000,000,000 tok/s -> * tok/s (*), "
            "beyond the allowed drop tok_s:5%"
        ]
    )
    assert "Traceback" not in regressed.stdout.str()
    slow = saved_run(project.path / "slow.json", 1.0)
    fine = run(project, f"--dflash-compare={slow}", "--dflash-compare-fail=tok_s:5%")
    assert fine.ret == pytest.ExitCode.OK
    fine.stdout.fnmatch_lines(["compared with *slow.json:", "*ctx60-c1-t64*"])


def test_sweep_prints_one_table_with_every_config(project: pytest.Pytester) -> None:
    result = run(project, "--dflash-sweep=budget=4,8,16", "--dflash-concurrency=1")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "throughput: output tok/s and accept length per case and config",
            "case*tok/s budget=4*accept budget=4*tok/s budget=8*tok/s budget=16*",
        ]
    )
    report = json.loads((project.path / "report.json").read_text())
    accept = [c["throughput"][0]["metrics"]["accept_length"] for c in report["configs"]]
    assert accept[0] < accept[2], "a larger draft budget accepts more tokens per step"


def test_min_accept_length_gate(project: pytest.Pytester) -> None:
    result = run(project, "--dflash-concurrency=1", "--dflash-min-accept-length=50")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*accept length: DFLASH: * < 50*"])


def test_throughput_skips_under_xdist_with_a_reason(project: pytest.Pytester) -> None:
    result = run(project, "-n", "2", "-rs")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*pytest-benchmark is disabled*run throughput cases without -n*"])


LOSSLESS = """
import pytest

@pytest.mark.dflash(algorithm="NONE")
def test_baseline(dflash_lossless):
    dflash_lossless.check()

@pytest.mark.dflash(budget=8)
def test_lossless(dflash_lossless):
    dflash_lossless.check()
"""


@pytest.mark.parametrize("lossy", [False, True])
def test_lossless_check(
    pytester: pytest.Pytester, sim_project: Callable[[pytest.Pytester, str], None], lossy: bool
) -> None:
    sim_project(pytester, "--sim-fault lossy" if lossy else "")
    pytester.makepyfile(test_ll=LOSSLESS)
    result = pytester.runpytest("-p", "no:cacheprovider")
    if not lossy:
        result.assert_outcomes(passed=2)
        return
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*DFLASH budget=8 is not lossless against NONE: *token*"])
