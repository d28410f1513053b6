"""RunOutputs: the report file, comparison, gates and step summary from synthetic results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_specdecode.config.settings import Settings
from pytest_specdecode.config.spec import ConfigError
from pytest_specdecode.report import summary
from pytest_specdecode.report.outputs import RunOutputs
from pytest_specdecode.report.results import RunResults

from .feed import B8, coding, throughput

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
    assert "exitstatus" not in early
    assert early["configs"][0]["pass_rate"]["passed"] == 1
    coding(results, B8, "gcd", passed=False)
    assert outputs.finish(1) == 1  # 1/2 is below 90%
    final = json.loads((tmp_path / "out/r.json").read_text())
    assert final["exitstatus"] == 1
    assert final["interrupted"] is False
    assert final["gates"]["failed"] == ["pass rate: DFLASH budget=8 window=2048: 1/2 = 50% < 90%"]
    assert [c["problem"] for c in final["configs"][0]["coding"]] == ["fib", "gcd"]


def test_a_comparison_fails_the_run_beyond_the_allowed_drop(tmp_path: Path) -> None:
    saved = saved_run(tmp_path / "base.json", 40000.0)
    settings = Settings(report="r.json", compare=str(saved), compare_fail=("tok_s:5%",))
    outputs = RunOutputs(settings, measured(30572.4), tmp_path)
    assert outputs.finish(0) == 1
    assert outputs.gate_lines == [
        f"throughput regression: {CASE}: tok_s 40,000 tok/s -> 30,572 tok/s (-23.6%, "
        "95% interval -27.3% to -19.7%), beyond the allowed drop tok_s:5%"
    ]
    assert outputs.compare["findings"][0]["status"] == "fail"  # type: ignore[index]
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
    lines = summary.render(outputs.data())
    assert lines[:2] == [
        f"NOTE: {summary.SIM_NOTICE}",
        f"NOTE: simulator default: {note}",
    ]
    assert json.loads((tmp_path / "r.json").read_text())["simulator_defaults"] == [note]
