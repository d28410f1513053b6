"""Throughput cases through pytest-benchmark, comparisons, gates and the lossless check."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pytest_specdecode.report import model

SMALL = (
    "--dflash-contexts=60",
    "--dflash-concurrency=1,4",
    "--dflash-output-tokens=64",
    "--dflash-rounds=3",
)
CASES = ("ctx60-c1-t64-chat", "ctx60-c4-t64-chat")


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    # In-process: the plugin's own state is per Config, and servers stop at session end.
    return pytester.runpytest("-p", "no:cacheprovider", *SMALL, *args)


@pytest.mark.slow
def test_benchmark_compare_pairs_cases_and_is_the_gates_baseline(
    throughput_project: pytest.Pytester,
) -> None:
    first = run(throughput_project, "--dflash-config=budget=8,window=2048", "--benchmark-save=b8")
    first.assert_outcomes(passed=2)
    saved = list(throughput_project.path.glob(".benchmarks/*/0001_b8.json"))
    assert len(saved) == 1
    benches = json.loads(saved[0].read_text())["benchmarks"]
    assert {b["fullname"] for b in benches} == {f"test_tp.py::test_throughput[{c}]" for c in CASES}
    extra = [b["extra_info"] for b in benches]
    assert all(e["config"] == "DFLASH budget=8 window=2048" and e["tok_s"] > 0 for e in extra)
    assert all(len(e["intervals"]["tok_s"]["values"]) == 3 for e in extra)
    # The params are JSON, not pytest-benchmark's UNSERIALIZABLE[SpecConfig(...)].
    assert "UNSERIALIZABLE" not in saved[0].read_text()
    params = {b["params"]["dflash_case"]["id"]: b["params"] for b in benches}
    assert set(params) == set(CASES)
    for p in params.values():
        assert p["dflash_config"]["label"] == "DFLASH budget=8 window=2048"
        assert (p["dflash_config"]["budget"], p["dflash_case"]["context"]) == (8, 60)
    # The same config again, --benchmark-compare alone as the baseline. Whether two runs
    # of one config stay within a tolerance is a timing question for a benchmark
    # (benchmarks/compare_gate.py: tok_s:5% passes 5/5), not for this suite, whose own
    # load moves between the runs: here only the pairing is checked.
    again = run(throughput_project, "--dflash-config=budget=8,window=2048", "--benchmark-compare")
    assert again.ret == pytest.ExitCode.OK, again.stdout.str()
    for case in CASES:  # pytest-benchmark pairs every case by its id
        for run_name in ("0001_b8", "NOW"):
            again.stdout.fnmatch_lines([f"*test_throughput?{case}? ({run_name})*"])
    again.stdout.fnmatch_lines(
        ["compared with 0001_b8.json (saved run of DFLASH budget=8 window=2048):"]
    )
    # A run clearly slower than its baseline fails the gate. The baseline's figures are
    # made a thousand times faster rather than measuring a slower config, so the verdict does
    # not hang on the load of the machine: three rounds of a c1 case on a loaded CI machine
    # spread by +-63% (a 95% interval from -96% to +29% at ten times), which no factor of ten
    # outruns (benchmarks/compare_gate.py measures budget=1 vs 8).
    data = json.loads(saved[0].read_text())
    for bench in data["benchmarks"]:
        info = bench["extra_info"]
        info["tok_s"] *= 1000
        values = info["intervals"]["tok_s"]["values"]
        info["intervals"]["tok_s"]["values"] = [v * 1000 for v in values]
    saved[0].write_text(json.dumps(data))
    slower = run(
        throughput_project,
        "--dflash-config=budget=8,window=2048",
        "--benchmark-compare=0001",
        "--dflash-compare-fail=tok_s:5%",
    )
    assert slower.ret == pytest.ExitCode.TESTS_FAILED, slower.stdout.str()
    slower.stdout.fnmatch_lines(
        [
            "*compare gate FAILED: ctx60-c1-t64-chat: tok_s * (-*%, 95% interval -*% to -*%), "
            "beyond the allowed drop tok_s:5%; between-run noise unknown (1 saved runs): the gate "
            "uses the within-run interval only"
        ]
    )
    assert "Traceback" not in slower.stdout.str()


def saved_run(path: Path, tok_s: float) -> Path:
    benches = [
        {
            "name": f"test_throughput[{case}]",
            "fullname": f"test_tp.py::test_throughput[{case}]",
            "extra_info": {
                "case": case,
                "config": "saved",
                "tok_s": tok_s,
                "accept_length": 3.0,
                "intervals": {"tok_s": {"values": [tok_s * 0.99, tok_s, tok_s * 1.01]}},
            },
            "stats": {"mean": 1.0},
        }
        for case in CASES
    ]
    path.write_text(json.dumps({"benchmarks": benches}))
    return path


def test_compare_fail_gate_against_a_saved_file(throughput_project: pytest.Pytester) -> None:
    fast = saved_run(throughput_project.path / "fast.json", 1e9)
    regressed = run(
        throughput_project, f"--dflash-compare={fast}", "--dflash-compare-fail=tok_s:5%"
    )
    assert regressed.ret == pytest.ExitCode.TESTS_FAILED
    regressed.stdout.fnmatch_lines(
        [
            "*compare gate FAILED: ctx60-c1-t64-chat: tok_s 1,000,000,000 tok/s -> * tok/s (*), "
            "beyond the allowed drop tok_s:5%; between-run noise unknown "
            "(0 saved runs; 1 left out: 1 no fingerprint)*"
        ]
    )
    regressed.stdout.fnmatch_lines(
        ["compared with fast.json (saved run of *):", "*ctx60-c1-t64-chat*"]
    )
    assert "Traceback" not in regressed.stdout.str()


def test_pytest_benchmarks_own_compare_fail_is_a_gate_and_the_summary_still_prints(
    throughput_project: pytest.Pytester,
) -> None:
    run(throughput_project, "--dflash-concurrency=1", "--benchmark-save=fast").assert_outcomes(
        passed=1
    )
    (saved,) = (throughput_project.path / ".benchmarks").glob("*/0001_fast.json")
    data = json.loads(saved.read_text())
    for bench in data["benchmarks"]:  # the saved run 1000x faster: a regression on any machine
        bench["stats"] = {
            k: v / 1000 if k in ("min", "max", "mean", "median") else v
            for k, v in bench["stats"].items()
        }
    saved.write_text(json.dumps(data))
    result = run(
        throughput_project,
        "--dflash-concurrency=1",
        "--benchmark-compare",
        "--benchmark-compare-fail=mean:10%",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(
        [
            "*dflash summary*",
            "*benchmark gate FAILED: --benchmark-compare-fail: performance has regressed*",
        ]
    )
    report = json.loads((throughput_project.path / "report.json").read_text())
    assert report["exitstatus"] == 1
    assert any("--benchmark-compare-fail" in line for line in report["gates"]["failed"])


def test_sweep_with_the_baseline_shows_speedup_per_domain_and_a_verdict(
    throughput_project: pytest.Pytester,
) -> None:
    result = run(
        throughput_project,
        "--dflash-sweep=algorithm=NONE,DFLASH;budget=4,8",
        "--dflash-concurrency=1",
        "--dflash-domains=code,chat",
    )
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(
        [
            "throughput (simulated): mean over 3 rounds; ± is the 95% interval (Student t*",
            "case*config*tok/s*TPOT ms*accept*speedup*tok/s ratio",
            "ctx60-c1-t64-code*NONE*1.00x (baseline)*1.00x",
            "ctx60-c1-t64-code*budget=4*±*±*±*x (*-*)*x",
            "verdict (simulated): per load and domain, the best speedup among the configs *",
            "load*domain*best config*speedup*over contexts*runner-up*correctness",
            "c1*code*: budget=*(correctness not checked)*x*60*not checked*",
            "c1*chat*: budget=*(correctness not checked)*x*60*not checked*",
            "pareto front (simulated):*",
        ]
    )
    report = json.loads((throughput_project.path / "report.json").read_text())
    b8 = next(c for c in report["configs"] if c["label"] == "DFLASH budget=8")
    accept = {t["metrics"]["domain"]: t["metrics"]["accept_length"] for t in b8["throughput"]}
    assert accept["code"] > accept["chat"] * 1.2, "the simulator drafts code better than chat"
    assert all(t["speedup"]["tpot"]["value"] > 1 for t in b8["throughput"])
    assert all(t["metrics"]["accept_histogram"] for t in b8["throughput"])
    assert [g["load"] for g in report["verdict"]["groups"]] == ["c1", "c1"]


def test_request_rate_cases_report_goodput_and_attainment(
    throughput_project: pytest.Pytester,
) -> None:
    result = run(
        throughput_project,
        "--dflash-concurrency=1",
        "--dflash-request-rate=8",
        "--dflash-rate-requests=4",
        "--dflash-slo=ttft:200ms,tpot:20ms",
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "case*config*tok/s*speedup*tok/s ratio*goodput req/s*SLO met",
            "ctx60-c1-t64-chat*DFLASH*-*-*.*%",
            "ctx60-r8-n4-t64-chat*DFLASH*-*-*.*%",
            "no speedup: this run has no non-speculative baseline; add algorithm NONE *",
        ]
    )
    report = json.loads((throughput_project.path / "report.json").read_text())
    rate = next(t for t in report["configs"][0]["throughput"] if "-r8-" in t["case"])
    assert rate["metrics"]["rate"] == 8.0
    assert rate["metrics"]["requests"] == 12
    assert 0 <= rate["metrics"]["slo_attainment"] <= 1
    assert rate["metrics"]["slo"] == "ttft:200ms,tpot:20ms"


def test_min_accept_length_gate(throughput_project: pytest.Pytester) -> None:
    result = run(
        throughput_project,
        "--dflash-concurrency=1",
        "--dflash-rounds=1",
        "--dflash-min-accept-length=50",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*accept-length gate FAILED: DFLASH: * < 50*"])


@pytest.mark.parametrize("off", [["-n", "1"], ["--benchmark-disable"]])  # one worker is xdist
def test_throughput_skipped_whole_fails_the_run_with_the_reason(
    throughput_project: pytest.Pytester, off: list[str]
) -> None:
    result = run(throughput_project, *off, "--dflash-rounds=1")
    result.assert_outcomes(skipped=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # nothing measured is no green run
    result.stdout.fnmatch_lines(
        [
            "*throughput gate CANNOT JUDGE: 2 throughput test(s) selected, none ran: all "
            "skipped: pytest-benchmark is disabled*run throughput cases without -n*"
        ]
    )


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
    result.stdout.fnmatch_lines(
        ["*lossless gate FAILED: DFLASH budget=8 against NONE: * drafter defects in 100 replies*"]
    )


def test_near_tie_numerics_pass_the_lossless_gate_and_are_counted(
    pytester: pytest.Pytester, sim_project: Callable[[pytest.Pytester, str], None]
) -> None:
    # BF16-like flips at near ties, in the NONE runs too: an exact-match gate fails here.
    sim_project(pytester, "--sim-fault near-tie")
    pytester.makepyfile(test_ll=LOSSLESS)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    report = json.loads((pytester.path / "report.json").read_text())
    by_label = {c["label"]: c for c in report["configs"]}
    (record,) = by_label["DFLASH budget=8"]["lossless"]
    assert record["passed"]
    assert record["replies"] == 100
    assert record["defects"] == 0
    assert record["numerics"] > 0
    assert len(record["divergences"]) == record["numerics"]
    assert record["detail"].startswith("lossless gate passed: DFLASH budget=8 against NONE: ")
    shown = record["divergences"][0]
    assert shown["kind"] == "numerics"
    assert shown["baseline"] != shown["actual"]
    assert shown["before"] or shown["index"] == 0


def test_a_drafter_wrong_once_in_ten_replies_fails_the_gate_with_its_counts(
    pytester: pytest.Pytester, sim_project: Callable[[pytest.Pytester, str], None]
) -> None:
    sim_project(pytester, "--sim-fault near-tie --sim-fault lossy:0.1")
    pytester.makepyfile(test_ll=LOSSLESS)
    result = pytester.runpytest("-p", "no:cacheprovider", "--dflash-lossless-margin", "0.05")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*lossless gate FAILED: DFLASH budget=8 against NONE: * drafter defect* in 100 "
            "replies (*%, 95% interval *-*%), * numerics (top-2 margin < 0.05*"
            "(defect: top-2 margin *, the baseline's runs agree here): after '*' the baseline "
            "wrote '*', this config '*'*"
        ]
    )


@pytest.mark.parametrize(
    ("verbosity", "shown"),
    [([], ["round 1/1", "sweep: 1/1 configs done"]), (["-q"], ["sweep: 1/1"]), (["-qq"], [])],
)
def test_quiet_runs_print_no_line_per_round(
    throughput_project: pytest.Pytester,
    capfd: pytest.CaptureFixture[str],
    verbosity: list[str],
    shown: list[str],
) -> None:
    capfd.readouterr()
    result = throughput_project.runpytest(
        "-p", "no:cacheprovider", "--dflash-contexts=60", "--dflash-concurrency=1",
        "--dflash-output-tokens=8", "--dflash-rounds=1", *verbosity,
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    progress = [line for line in capfd.readouterr().err.splitlines() if "[dflash]" in line]
    for text in shown:
        assert any(text in line for line in progress), progress
    assert bool(verbosity) is not any("round" in line for line in progress), progress
    if verbosity == ["-qq"]:
        assert progress == []


def test_the_lossless_baseline_measures_its_speedup_cases_as_a_config_measures_them(
    throughput_project: pytest.Pytester,
) -> None:
    # Both servers take 512 tokens; the case asks for a 600-token prompt. The config's
    # case and the baseline's measurement of it are refused alike, before any request,
    # naming the option that fixes it (the baseline once sent the prompt regardless).
    throughput_project.makepyfile(test_ll=LOSSLESS.replace("@pytest.mark.dflash(budget=8)\n", ""))
    result = run(
        throughput_project,
        "--dflash-config=budget=8,context-length=512",
        "--dflash-contexts=600",
        "--dflash-concurrency=1",
        "--dflash-rounds=1",
    )
    result.assert_outcomes(passed=2, failed=1)  # both lossless tests; the case
    # The case failed before its first round: no pytest-benchmark "fixture was not used".
    assert "not used at all" not in result.stdout.str()
    too_long = "ctx600-c1-t64-chat: a prompt of 600 tokens and 64 output tokens do not fit"
    result.stdout.fnmatch_lines([f"*DFLASH budget=8*{too_long}*--dflash-contexts at most*"])
    report = json.loads((throughput_project.path / "report.json").read_text())
    (none,) = [c for c in report["configs"] if c["config"]["algorithm"] == "NONE"]
    (baseline,) = none["lossless"]
    assert baseline["nodeid"] == "test_ll.py::test_baseline"
    assert baseline["passed"] is True
    assert f"speedup baseline ctx600-c1-t64-chat not measured: {too_long}" in baseline["detail"]


def all_keys(value: Any) -> list[str]:
    """The keys of every object in ``value``, however deep."""
    if isinstance(value, dict):
        return [k for key, item in value.items() for k in (key, *all_keys(item))]
    return [k for item in value for k in all_keys(item)] if isinstance(value, list) else []


def test_the_lossless_checks_baseline_is_the_speedup_source_in_the_json_report(
    throughput_project: pytest.Pytester,
) -> None:
    # The sweep has no algorithm NONE: only the lossless check's baseline runs it.
    throughput_project.makepyfile(test_ll=LOSSLESS.replace("@pytest.mark.dflash(budget=8)\n", ""))
    result = run(
        throughput_project,
        "--dflash-config=budget=8",
        "--dflash-concurrency=1",
        "--dflash-rounds=2",
    )
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["ctx60-c1-t64-chat*NONE*1.00x (baseline)*", "*budget=8*x*"])
    report = json.loads((throughput_project.path / "report.json").read_text())
    # The report as written: format 2, snake_case keys only, valid by the shipped schema.
    assert report["format"] == 2
    assert [k for k in all_keys(report) if not re.fullmatch(r"[a-z][a-z0-9_]*", k)] == []
    jsonschema.validate(report, model.shipped_schema())
    assert report["speedup"]["baseline"] == ["NONE (this run)"]
    assert report["speedup"]["missing"] is None
    assert set(report["speedup"]) == {"baseline", "missing", "method"}
    by_label = {c["label"]: c for c in report["configs"]}
    (base,) = by_label["NONE"]["throughput"]  # measured by the lossless baseline test
    assert base["nodeid"] == "test_ll.py::test_baseline"
    (case,) = by_label["DFLASH budget=8"]["throughput"]
    assert case["case"] == base["case"] == "ctx60-c1-t64-chat"
    speedup = case["speedup"]
    assert set(speedup) == {"tpot", "tok_s", "baseline"}
    assert speedup["baseline"] == "NONE (this run)"

    def rounds(metrics: dict[str, Any], name: str) -> list[float]:
        values: list[float] = metrics["intervals"][name]["values"]
        assert len(values) == 2
        return values

    # Paired round by round: the geometric mean of the per-round ratios. A busy machine
    # can deliver a round's whole reply in one chunk (TPOT 0, no ratio): tok/s always pairs.
    for name, metric, faster in (("tpot", "tpot_ms", False), ("tok_s", "tok_s", True)):
        pairs = list(
            zip(rounds(base["metrics"], metric), rounds(case["metrics"], metric), strict=True)
        )
        if not all(b > 0 and c > 0 for b, c in pairs):
            assert name == "tpot"
            continue
        expected = math.prod(c / b if faster else b / c for b, c in pairs) ** 0.5
        figure = speedup[name]
        assert set(figure) == {"value", "low", "high", "n"}
        assert figure["value"] == pytest.approx(expected, rel=1e-6)
        assert figure["low"] <= figure["value"] <= figure["high"]
        assert figure["n"] == 2
