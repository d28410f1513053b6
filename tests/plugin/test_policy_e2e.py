"""A sweep against the simulator: the client calibrated first, the policy file written."""

from __future__ import annotations

import json

import jsonschema
import pytest

from pytest_specdecode.report import model, policy

SMALL = (
    "--dflash-contexts=60",
    "--dflash-concurrency=1,4",
    "--dflash-output-tokens=64",
    "--dflash-rounds=3",
    "--dflash-sweep=algorithm=NONE,DFLASH;budget=8",
    "--dflash-client-calibration=on",
)


def test_a_sweep_calibrates_once_and_writes_a_policy_that_never_runs_below_the_floor(
    throughput_project: pytest.Pytester,
) -> None:
    result = throughput_project.runpytest(
        "-p", "no:cacheprovider", *SMALL, "--dflash-policy=out/policy.json"
    )
    result.assert_outcomes(passed=4)
    lines = result.stdout.lines
    assert sum("load client ceiling against a null server" in line for line in lines) == 1
    assert sum("client-limited" in line and "WARNING" in line for line in lines) <= 1
    report = json.loads((throughput_project.path / "report.json").read_text())
    jsonschema.validate(report, model.shipped_schema())
    # The calibration has a whole deadline: a loaded machine may leave c4 out of it, and
    # then the report says so. Every concurrency is one of the two, lowest first.
    ceilings = report["calibration"]["ceilings"]
    measured = [c["concurrency"] for c in ceilings]
    assert measured + report["calibration"]["skipped"] == [1, 4]
    assert all(c["tok_s"] > 0 for c in ceilings)
    found = json.loads((throughput_project.path / "out/policy.json").read_text())
    assert found["simulated"] is True
    assert found["floor"] == policy.FLOOR
    bands = found["bands"]
    assert bands[0]["min_concurrency"] == 1
    assert bands[-1]["max_concurrency"] is None
    assert sorted(c for b in bands for c in b["measured"]) == [1, 4]
    for band in bands:
        if band["label"] != "NONE":
            lows = [e["low"] for load in band["evidence"].values() for e in load.values()]
            assert lows
            assert min(lows) >= policy.FLOOR
    result.stdout.fnmatch_lines([f"dflash policy: out/policy.json ({policy.describe(found)})"])


@pytest.mark.parametrize("flag", ["--collect-only", "--dflash-dry-run"])
def test_a_run_that_measures_nothing_does_not_calibrate(
    throughput_project: pytest.Pytester, flag: str
) -> None:
    result = throughput_project.runpytest("-p", "no:cacheprovider", *SMALL, flag)
    assert result.ret == 0
    assert not any("load client" in line for line in result.stdout.lines)
    assert not (throughput_project.path / ".dflash/policy.json").exists()
