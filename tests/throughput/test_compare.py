"""Reading saved pytest-benchmark runs, pairing cases, gates and tables."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_specdecode.throughput.comparison import (
    CompareError,
    FailSpec,
    check,
    find_saved_run,
    load_run,
    machine_id,
    pair,
    parse_fail_spec,
    render_compare,
)

HERE: dict[str, Any] = {
    "simulated": False,
    "machine": "box (Example CPU, 8 CPUs)",
    "host": "gpu1",
    "launch": "0123456789abcdef",
}
"""A fingerprint (throughput/fingerprint.py): where the runs of these tests ran."""


def bench(
    test_id: str,
    case: str,
    config: str,
    tok_s: Any,
    accept: float | None,
    rounds: list[Any] | None = None,
    fingerprint: dict[str, Any] | None = HERE,
) -> dict[str, Any]:
    """One entry as pytest-benchmark 5.x writes it (``as_dict(include_data=True)``);
    ``rounds`` are per-round tok/s (the plugin's ``intervals``), ``fingerprint`` where
    it ran (None: a run saved before runs recorded one)."""
    fullname = f"tests/test_tp.py::test_throughput[{test_id}]"
    entry: dict[str, Any] = {
        "group": None,
        "name": f"test_throughput[{test_id}]",
        "fullname": fullname,
        "params": {"case": test_id},
        "param": test_id,
        "extra_info": {"case": case, "config": config, "tok_s": tok_s, "accept_length": accept,
                       "ttft_ms_p50": 12.5, "errors": 0},
        "options": {"disable_gc": False, "timer": "perf_counter", "min_rounds": 5,
                    "max_time": 1.0, "min_time": 5e-06, "warmup": False},
        "stats": {"min": 1.0, "max": 1.2, "mean": 1.1, "stddev": 0.1, "rounds": 3,
                  "median": 1.1, "iqr": 0.1, "q1": 1.05, "q3": 1.15, "iqr_outliers": 0,
                  "stddev_outliers": 1, "outliers": "1;0", "ld15iqr": 1.0, "hd15iqr": 1.2,
                  "ops": 0.909, "total": 3.3, "data": [1.0, 1.1, 1.2], "iterations": 1},
    }  # fmt: skip
    if rounds is not None:
        entry["extra_info"]["intervals"] = {"tok_s": {"values": rounds}}
    if fingerprint is not None:
        entry["extra_info"]["fingerprint"] = fingerprint
    return entry


def saved_run(benchmarks: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "machine_info": {"node": "box", "processor": "x86_64", "machine": "x86_64",
                         "python_implementation": "CPython", "python_version": "3.11.7",
                         "system": "Linux", "release": "6.1", "cpu": {}},
        "commit_info": {"id": "abc123", "time": "2025-11-29T23:00:00+00:00",
                        "author_time": "2025-11-29T23:00:00+00:00", "dirty": False,
                        "project": "demo", "branch": "main"},
        "benchmarks": benchmarks,
        "datetime": "2025-11-29T23:10:00.000000+00:00",
        "version": "5.3.1",
    }  # fmt: skip


def write(path: Path, data: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=4))
    return path


@pytest.fixture
def storage(tmp_path: Path) -> Path:
    root = tmp_path / ".benchmarks"
    write(
        root / machine_id() / "0001_b8.json",
        saved_run([bench("ctx60-c1", "ctx60-c1", "DFLASH budget=8", 100.0, 3.0),
                   bench("ctx60-c8", "ctx60-c8", "DFLASH budget=8", 600.0, 3.1)]),
    )  # fmt: skip
    write(
        root / machine_id() / "0002_b16.json",
        saved_run([bench("ctx60-c1", "ctx60-c1", "DFLASH budget=16", 104.0, 4.0),
                   bench("ctx60-c8", "ctx60-c8", "DFLASH budget=16", 540.0, 2.9)]),
    )  # fmt: skip
    return root


def test_find_by_number_like_benchmark_compare(storage: Path) -> None:
    assert find_saved_run("0001", storage).name == "0001_b8.json"
    assert find_saved_run("0002_b16", storage).name == "0002_b16.json"
    assert find_saved_run("0002", f"file://{storage}").name == "0002_b16.json"
    path = storage / machine_id() / "0001_b8.json"
    assert find_saved_run(str(path), storage) == path


def test_find_by_the_benchmark_save_name_or_latest(storage: Path) -> None:
    # --benchmark-save=b8 saved NNNN_b8.json: the name alone finds its newest run.
    assert find_saved_run("b8", storage).name == "0001_b8.json"
    write(storage / machine_id() / "0003_b8.json", saved_run([]))
    assert find_saved_run("b8", storage).name == "0003_b8.json"
    assert find_saved_run("latest", storage).name == "0003_b8.json"
    with pytest.raises(CompareError, match=r"no saved benchmark run named 'b4' under .*NNNN_b4"):
        find_saved_run("b4", storage)


def test_find_falls_back_to_other_machine_dirs(tmp_path: Path) -> None:
    root = tmp_path / ".benchmarks"
    write(root / "Linux-CPython-3.9-64bit" / "0007_x.json", saved_run([]))
    assert find_saved_run("0007", root).parent.name == "Linux-CPython-3.9-64bit"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("0009", "no saved benchmark run '0009'"),
        ("newest", "no saved benchmark run named 'newest'"),
        ("a/../b", "give a .json file, a run number"),
    ],
)
def test_missing_run_is_one_line(storage: Path, spec: str, message: str) -> None:
    with pytest.raises(CompareError, match=message) as info:
        find_saved_run(spec, storage)
    assert "\n" not in str(info.value)


def test_unreadable_run(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(CompareError, match="cannot read saved benchmark run"):
        load_run(bad)


def test_pairs_across_configs_and_renders_deltas(storage: Path) -> None:
    base = load_run(find_saved_run("0001", storage))
    now = load_run(find_saved_run("0002", storage))
    deltas = pair(base, now)
    assert [d.case for d in deltas] == ["ctx60-c1", "ctx60-c8"]
    assert deltas[0].change_pct("tok_s") == pytest.approx(4.0)
    assert deltas[1].change_pct("tok_s") == pytest.approx(-10.0)
    assert deltas[0].change("accept_length") == pytest.approx(1.0)
    table = render_compare(deltas, "0001", "now")
    lines = table.splitlines()
    assert lines[0].split() == ["case", "config", "tok/s", "0001", "tok/s", "now", "change",
                                "95%", "interval", "accept", "0001", "accept", "now",
                                "change"]  # fmt: skip
    assert lines[2].split() == ["ctx60-c1", "DFLASH", "budget=16", "100", "104", "+4.0%", "-",
                                "3.00", "4.00", "+1.00"]  # fmt: skip
    assert lines[3].split() == ["ctx60-c8", "DFLASH", "budget=16", "600", "540", "-10.0%", "-",
                                "3.10", "2.90", "-0.20"]  # fmt: skip


def test_sweep_ids_pair_by_case_from_extra_info(tmp_path: Path) -> None:
    # Under a sweep the config is part of the test id; the case still pairs.
    a = saved_run([bench("DFLASH-b8-ctx60-c1", "ctx60-c1", "b8", 1, 2)])
    b = saved_run([bench("DFLASH-b16-ctx60-c1", "ctx60-c1", "b16", 2, 3)])
    deltas = pair(load_run(write(tmp_path / "a.json", a)), load_run(write(tmp_path / "b.json", b)))
    assert len(deltas) == 1
    assert deltas[0].base is not None
    assert deltas[0].current is not None


@pytest.mark.parametrize(
    ("text", "spec"),
    [("tok_s:5%", FailSpec("tok_s", 5.0, True)),
     ("accept_length:0.25", FailSpec("accept_length", 0.25, False)),
     ("tok_s:12.5%", FailSpec("tok_s", 12.5, True))],
)  # fmt: skip
def test_parse_fail_spec(text: str, spec: FailSpec) -> None:
    assert parse_fail_spec(text) == spec


@pytest.mark.parametrize("bad", ["tok_s", "mean:5%", "tok_s:-5%", "tok_s:five%"])
def test_bad_fail_spec(bad: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="invalid compare-fail spec"):
        parse_fail_spec(bad)


def test_latest_is_the_newest_saved_run_like_benchmark_compare_alone(storage: Path) -> None:
    assert find_saved_run("latest", storage).name == "0002_b16.json"
    with pytest.raises(CompareError, match="no saved benchmark run under"):
        find_saved_run("latest", storage / "nothing-here")


def failed(deltas: list[Any], spec: str) -> list[str]:
    """The lines of the cases ``spec`` fails."""
    return [f.line for f in check(deltas, [parse_fail_spec(spec)]) if f.status == "fail"]


def rounds_pair(tmp_path: Path, base: list[float], now: list[float]) -> list[Any]:
    a = saved_run([bench("ctx60-c1", "ctx60-c1", "b8", sum(base) / len(base), 3.0, base)])
    b = saved_run([bench("ctx60-c1", "ctx60-c1", "b8", sum(now) / len(now), 3.0, now)])
    return pair(load_run(write(tmp_path / "a.json", a)), load_run(write(tmp_path / "b.json", b)))


def test_a_drop_fails_only_when_the_whole_interval_is_beyond_the_limit(tmp_path: Path) -> None:
    spec = parse_fail_spec("tok_s:5%")
    # Round i sends the same prompts in both runs: paired, round by round.
    clear = rounds_pair(tmp_path, [100.0, 101.0, 99.0], [80.0, 81.0, 79.0])
    assert failed(clear, "tok_s:5%") == [
        "ctx60-c1: tok_s 100 tok/s -> 80.0 tok/s (-20.0%, 95% interval -20.5% to -19.5%), "
        "beyond the allowed drop tok_s:5%"
    ]
    # Unpaired (other round counts): the ratio of the means, a wider interval.
    unpaired = rounds_pair(tmp_path, [100.0, 101.0, 99.0, 100.0], [80.0, 81.0, 79.0])
    [finding] = check(unpaired, [spec])
    assert finding.change is not None
    assert finding.change.method == "welch"
    assert finding.status == "fail"
    assert finding.change.high == pytest.approx(-18.0, abs=0.1)
    noisy = rounds_pair(tmp_path, [100.0, 110.0, 90.0], [84.0, 104.0, 94.0])
    [finding] = check(noisy, [spec])
    assert finding.status == "inconclusive"
    assert finding.line.startswith(
        "ctx60-c1: tok_s 100 tok/s -> 94.0 tok/s (-6.0%): inconclusive: noise +-"
    )
    assert "more rounds (--dflash-rounds) narrow it" in finding.line
    same = rounds_pair(tmp_path, [100.0, 101.0, 99.0], [100.5, 99.5, 100.0])
    assert [f.status for f in check(same, [spec])] == ["pass"]
    single = rounds_pair(tmp_path, [100.0], [50.0])
    [finding] = check(single, [spec])
    assert finding.status == "inconclusive"
    assert "no interval (1 round(s) in the baseline, 1 now)" in finding.line


def test_regressions_one_line_per_regressed_case(storage: Path) -> None:
    # Saved runs without per-round values count as one round each: no interval, no failure.
    deltas = pair(load_run(find_saved_run("0001", storage)),
                  load_run(find_saved_run("0002", storage)))  # fmt: skip
    assert failed(deltas, "tok_s:5%") == []
    assert [f.status for f in check(deltas, [parse_fail_spec("accept_length:0.1")])] == [
        "inconclusive", "inconclusive"
    ]  # fmt: skip


def test_missing_case_is_a_regression(storage: Path, tmp_path: Path) -> None:
    now = write(tmp_path / "now.json", saved_run([bench("ctx60-c1", "ctx60-c1", "b", 100.0, 3)]))
    deltas = pair(load_run(find_saved_run("0001", storage)), load_run(now))
    assert failed(deltas, "tok_s:5%") == [
        "ctx60-c8: tok_s missing in the current run (was 600 tok/s)"
    ]
