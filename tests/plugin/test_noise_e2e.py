"""End to end on the simulator: between-run noise in the compare gate, the break-even load."""

from __future__ import annotations

import json
import platform

import pytest


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    small = ("--dflash-contexts=60", "--dflash-output-tokens=64", "--dflash-rounds=3")
    return pytester.runpytest("-p", "no:cacheprovider", *small, *args)


@pytest.mark.slow
def test_three_saved_starts_give_the_gate_its_between_run_noise(
    throughput_project: pytest.Pytester,
) -> None:
    once = ("--dflash-concurrency=1", "--dflash-config=budget=8", "--dflash-sim-restart-noise=0.06")
    for _ in range(2):
        run(throughput_project, *once, "--benchmark-save=b8").assert_outcomes(passed=1)
    # Under test is which noise the gate uses, not its verdict: three c1 rounds of 64 tokens
    # are mostly machine time, so the limit is one no machine load reaches.
    gate = ("--benchmark-compare", "--dflash-compare-fail=tok_s:99%")
    early = run(throughput_project, *once, *gate)
    assert early.ret == 0, early.stdout.str()
    early.stdout.fnmatch_lines(
        ["*between-run noise unknown (2 saved runs): the gate uses the within-run interval only*"]
    )
    run(throughput_project, *once, "--benchmark-save=b8").assert_outcomes(passed=1)
    result = run(throughput_project, *once, *gate)
    assert result.ret == 0, result.stdout.str()
    assert (throughput_project.path / ".dflash" / "sim-starts").read_text().strip() == "5"
    report = json.loads((throughput_project.path / "report.json").read_text())
    [finding] = report["compare"]["findings"]
    assert finding["saved_runs"] == 3
    assert finding["status"] in ("pass", "inconclusive"), finding["line"]
    assert finding["noise"] in ("between-run", "within-run")
    result.stdout.fnmatch_lines(
        [f"  noise used for 1 case(s): {finding['noise']} noise * 3 saved runs*"]
    )
    # Each saved benchmark says where it ran; the gate counted them as this setup's.
    [saved] = {
        json.dumps(b["extra_info"]["fingerprint"], sort_keys=True)
        for path in (throughput_project.path / ".benchmarks").glob("*/*.json")
        for b in json.loads(path.read_text())["benchmarks"]
    }
    fingerprint = json.loads(saved)
    assert (fingerprint["simulated"], fingerprint["host"]) == (True, "simulator")
    assert fingerprint["machine"].startswith(platform.node())
    assert len(fingerprint["launch"]) == 16


def test_a_baseline_and_two_loads_give_a_break_even_line_and_record(
    throughput_project: pytest.Pytester,
) -> None:
    result = run(
        throughput_project,
        "--dflash-sweep=algorithm=NONE,DFLASH;budget=8",
        "--dflash-concurrency=1,4",
    )
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "break-even load (simulated): per config and domain, where the speedup *",
            "  DFLASH budget=8 chat: speedup *c=*",
        ]
    )
    report = json.loads((throughput_project.path / "report.json").read_text())
    [record] = report["break_even"]
    assert (record["config"], record["domain"], record["load_kind"]) == (
        "DFLASH budget=8",
        "chat",
        "concurrency",
    )
    assert record["loads"] == [1, 4]
    assert record["status"] in ("crosses", "above", "below")
    assert all(key == key.lower() and " " not in key for key in record)
