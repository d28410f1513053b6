"""RunOutputs: the report file, comparison, gates and step summary from synthetic results."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import pytest

from pytest_specdecode.config.settings import Settings
from pytest_specdecode.config.spec import ConfigError
from pytest_specdecode.report import summary
from pytest_specdecode.report.outputs import RunOutputs
from pytest_specdecode.report.results import RunResults

from .feed import B4, B8, coding, throughput

CASE = "ctx60-c1"


def saved_run(path: Path, tok_s: float) -> Path:
    """A pytest-benchmark JSON file as --benchmark-save writes it (our extra_info)."""
    bench = {
        "name": f"test_throughput[{CASE}]",
        "fullname": f"test_t.py::test_throughput[{CASE}]",
        "extra_info": {"case": CASE, "config": "saved", "tok_s": tok_s, "accept_length": 3.0},
    }
    path.write_text(json.dumps({"benchmarks": [bench]}))
    return path


def measured(tok_s: float = 30572.4) -> RunResults:
    """One case measured over three rounds (1% apart) around ``tok_s``."""
    results = RunResults()
    rounds = [tok_s * 0.99, tok_s, tok_s * 1.01]
    metrics = {"tok_s": tok_s, "accept_length": 3.1, "intervals": {"tok_s": {"values": rounds}}}
    throughput(results, B8, CASE, metrics)
    return results


def test_no_report_file_when_nothing_of_ours_ran(tmp_path: Path) -> None:
    outputs = RunOutputs(Settings(report="r.json"), RunResults(), tmp_path)
    outputs.update()
    assert outputs.report_path is None
    assert outputs.finish(0) == 0
    assert not (tmp_path / "r.json").exists()


def test_the_report_is_rewritten_after_each_test_and_finished_at_the_end(tmp_path: Path) -> None:
    results = RunResults()
    outputs = RunOutputs(Settings(report="out/r.json", min_pass_rate=0.9), results, tmp_path)
    coding(results, B8, "fib", passed=True)
    outputs.update()
    early = json.loads((tmp_path / "out/r.json").read_text())
    assert early["exitstatus"] is None  # the model writes every key: not finished yet
    assert early["configs"][0]["pass_rate"]["passed"] == 1
    coding(results, B8, "gcd", passed=False)
    assert outputs.finish(1) == 1  # 1/2 is below 90%
    final = json.loads((tmp_path / "out/r.json").read_text())
    assert final["exitstatus"] == 1
    assert final["interrupted"] is False
    assert final["gates"]["failed"] == [
        "pass rate: DFLASH budget=8 window=2048: 1/2 = 50% < 90% "
        "(95% interval 9%-91%, within noise of the floor)"
    ]
    assert [c["problem"] for c in final["configs"][0]["coding"]] == ["fib", "gcd"]


def test_a_comparison_fails_the_run_beyond_the_allowed_drop(tmp_path: Path) -> None:
    saved = saved_run(tmp_path / "base.json", 40000.0)
    settings = Settings(report="r.json", compare=str(saved), compare_fail=("tok_s:5%",))
    outputs = RunOutputs(settings, measured(30572.4), tmp_path)
    assert outputs.finish(0) == 1
    assert outputs.gate_lines == [
        f"throughput regression: {CASE}: tok_s 40,000 tok/s -> 30,572 tok/s (-23.6%, "
        "95% interval -27.3% to -19.7%), beyond the allowed drop tok_s:5%; between-run noise "
        "unknown (0 saved runs; 1 left out: 1 no fingerprint): the gate uses the within-run "
        "interval only"
    ]  # the saved file says nothing of where it ran: not noise of this setup
    assert outputs.compare["findings"][0]["status"] == "fail"  # type: ignore[index]
    assert outputs.compare["findings"][0]["noise"] == "within-run only"  # type: ignore[index]
    assert outputs.compare["findings"][0]["saved_runs"] == 0  # type: ignore[index]
    assert outputs.compare is not None
    (row,) = outputs.compare["rows"]
    assert row["tok_s_saved"] == 40000.0
    assert row["tok_s_change_pct"] == pytest.approx(-23.569, abs=1e-3)


def test_a_comparison_within_the_drop_passes(tmp_path: Path) -> None:
    saved = saved_run(tmp_path / "base.json", 30000.0)
    settings = Settings(report="r.json", compare=str(saved), compare_fail=("tok_s:5%",))
    outputs = RunOutputs(settings, measured(30572.4), tmp_path)
    assert outputs.finish(0) == 0
    assert outputs.gate_lines == []
    # The summary names what "saved" measured, and says the gate held.
    lines = summary.render(outputs.report(), outputs.gate_lines)
    assert "compared with base.json (saved run of saved):" in lines
    assert "  compare gate passed: tok_s:5%: 1 of 1 cases within the limit" in lines


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (Settings(compare="9999"), "--dflash-compare: no saved benchmark run '9999'"),
        (
            Settings(compare_fail=("tok_s:5%",)),
            "--dflash-compare-fail needs a saved run to compare with: --dflash-compare PATH|NNNN, "
            "or pytest-benchmark's --benchmark-compare",
        ),
        (
            Settings(benchmark_compare="latest", compare_fail=("tok_s:5%",)),
            "--benchmark-compare: no saved benchmark run under",
        ),
        (Settings(baseline="0004"), "--dflash-baseline: no saved benchmark run '0004'"),
    ],
)
def test_bad_comparison_settings_are_refused_before_any_test(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: Settings, message: str
) -> None:
    monkeypatch.chdir(tmp_path)  # no .benchmarks here
    with pytest.raises(ConfigError, match=message):
        RunOutputs(settings, RunResults(), tmp_path)


def test_benchmark_compare_alone_is_the_gates_baseline(tmp_path: Path) -> None:
    storage = tmp_path / "bench-store"
    folder = storage / "Some-Machine"
    folder.mkdir(parents=True)
    saved_run(folder / "0001_old.json", 10.0)
    saved_run(folder / "0002_fast.json", 40000.0)
    settings = Settings(
        report="r.json",
        benchmark_compare="latest",
        benchmark_storage=f"file://{storage}",
        compare_fail=("tok_s:5%",),
    )
    outputs = RunOutputs(settings, measured(30572.4), tmp_path)
    assert outputs.finish(0) == 1, "the newest saved run is the baseline, as for pytest-benchmark"
    assert outputs.compare is not None
    assert outputs.compare["baseline"] == "0002_fast.json"
    alone = Settings(benchmark_compare="0009", benchmark_storage=str(storage))
    assert RunOutputs(alone, measured(), tmp_path).baseline is None, "pytest-benchmark warns"


def test_a_speedup_baseline_must_hold_algorithm_none(tmp_path: Path) -> None:
    speculative = saved_run(tmp_path / "b8.json", 100.0)
    with pytest.raises(ConfigError, match="holds no case of algorithm NONE"):
        RunOutputs(Settings(baseline=str(speculative)), RunResults(), tmp_path)


def test_bad_fail_spec_is_refused(tmp_path: Path) -> None:
    saved = saved_run(tmp_path / "base.json", 1.0)
    with pytest.raises(ConfigError, match="--dflash-compare-fail: invalid compare-fail spec"):
        RunOutputs(Settings(compare=str(saved), compare_fail=("tok_s",)), RunResults(), tmp_path)


def test_the_step_summary_is_appended_when_github_asks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    outputs = RunOutputs(Settings(report="r.json"), measured(), tmp_path)
    outputs.finish(0)
    assert "dflash: summary appended to GITHUB_STEP_SUMMARY" in outputs.notes
    assert "30,572" in summary.read_text()
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "missing-dir" / "s.md"))
    again = RunOutputs(Settings(report="r.json"), measured(), tmp_path)
    assert again.finish(0) == 0  # an unwritable summary is a note, not a lost run
    assert any("could not write GITHUB_STEP_SUMMARY" in n for n in again.notes)


def test_the_summary_states_the_simulator_defaults_in_effect(tmp_path: Path) -> None:
    note = "128 output tokens per throughput request (512 against a server)"
    settings = Settings(report="r.json", uses_simulator=True, sim_defaults=(note,))
    outputs = RunOutputs(settings, measured(), tmp_path)
    outputs.finish(0)
    lines = summary.render(outputs.report())
    assert lines[:2] == [
        f"NOTE: {summary.SIM_NOTICE}",
        f"NOTE: simulator default: {note}",
    ]
    assert json.loads((tmp_path / "r.json").read_text())["simulator_defaults"] == [note]


def test_the_default_report_keeps_the_latest_and_a_copy_per_run(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        for tok_s in (100.0, 200.0):
            outputs = RunOutputs(Settings(report="out/report.json"), measured(tok_s), tmp_path)
            outputs.finish(0)
            # Two runs in one second: the second copy gets a suffix, never the first's name.
            assert outputs.report_copy is not None
    finally:
        os.umask(old)
    latest = tmp_path / "out" / "report.json"
    copies = sorted((tmp_path / "out").glob("report-*.json"))
    assert len(copies) == 2, copies
    # Named by start time, pid and a random part: no other run can take the name.
    assert all(re.fullmatch(r"report-\d{8}T\d{6}Z-\d+-[0-9a-f]{8}\.json", c.name) for c in copies)
    measured_in = [json.loads(c.read_text())["configs"][0]["throughput"] for c in copies]
    assert sorted(t[0]["metrics"]["tok_s"] for t in measured_in) == [100.0, 200.0]
    assert outputs.report_copy in copies
    assert json.loads(latest.read_text()) == json.loads(outputs.report_copy.read_text())
    for path in (latest, *copies):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path  # not a temporary file's 0600
    assert not list((tmp_path / "out").glob(".*"))  # no temporary file left


def test_placeholders_name_each_runs_own_report(tmp_path: Path) -> None:
    for _ in range(2):
        RunOutputs(Settings(report="runs/r-{n}.json"), measured(), tmp_path).finish(0)
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["r-0001.json", "r-0002.json"]
    outputs = RunOutputs(Settings(report="runs/{now}.json"), measured(), tmp_path)
    outputs.finish(0)
    assert outputs.report_copy is None
    assert outputs.report_path is not None
    assert re.fullmatch(r"\d{8}T\d{6}Z\.json", outputs.report_path.name)
    assert outputs.report_path.exists()


def test_coding_failures_are_one_table_across_configs(tmp_path: Path) -> None:
    results = RunResults()
    for config in (B4, B8):
        coding(results, config, "fib", passed=True)
        coding(results, config, "gcd", passed=False)  # fails the same way under both
    coding(results, B8, "flatten", passed=False)
    outputs = RunOutputs(Settings(report="r.json"), results, tmp_path)
    outputs.finish(1)
    lines = summary.render(outputs.report())
    start = lines.index(
        "coding failures: each failed problem, the configs it failed under, the verdict"
    )
    rows = [line.split("  ")[0] for line in lines[start + 3 : start + 5]]
    assert rows == ["gcd", "flatten"]
    assert "all 2 configs" in lines[start + 3]
    assert "wrong-answer: f(2) returned 5, expected 4" in lines[start + 3]
    assert "DFLASH budget=8 window=2048" in lines[start + 4]
    assert sum("gcd" in line for line in lines) == 1  # not once per config
