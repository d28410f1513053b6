"""Noise across restarts in the compare gate: the saved runs' spread widens its interval."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_specdecode.throughput import stats
from pytest_specdecode.throughput.comparison import (
    CaseRow,
    History,
    check,
    load_run,
    machine_id,
    pair,
    parse_fail_spec,
    row_from_benchmark,
    run_noise,
)
from pytest_specdecode.throughput.saved_runs import load_history

from .test_compare import HERE, bench, saved_run, write

SPEC = parse_fail_spec("tok_s:5%")
means = st.lists(st.floats(min_value=1.0, max_value=1e4), min_size=3, max_size=12)


@given(run_means=means, ratio=st.floats(min_value=0.1, max_value=10.0))
def test_the_between_run_interval_is_t_over_k_minus_1_times_root_2_spreads(
    run_means: list[float], ratio: float
) -> None:
    found = stats.between_run_interval(ratio, run_means, relative=True)
    assert found is not None
    assert found.low is not None
    assert found.high is not None
    assert found.low <= ratio <= found.high
    logs = [math.log(m) for m in run_means]
    half = stats.t_quantile(0.975, len(logs) - 1) * math.sqrt(2) * statistics.stdev(logs)
    assert math.log(found.high / ratio) == pytest.approx(half, rel=1e-9, abs=1e-12)
    # Scale-free on the log scale: the same runs in other units give the same interval.
    scaled = stats.between_run_interval(ratio, [m * 7.5 for m in run_means], relative=True)
    assert scaled is not None
    assert scaled.high == pytest.approx(found.high, rel=1e-9)


@given(run_means=means, diff=st.floats(min_value=-5, max_value=5))
def test_the_absolute_between_run_interval_is_symmetric(
    run_means: list[float], diff: float
) -> None:
    found = stats.between_run_interval(diff, run_means, relative=False)
    assert found is not None
    assert found.half_width is not None
    assert found.value - (found.low or 0) == pytest.approx(found.half_width)
    more = stats.between_run_interval(diff, [*run_means, max(run_means) * 3], relative=False)
    assert more is not None  # a far-off start widens it
    assert (more.half_width or 0) > 0


def test_fewer_than_three_saved_runs_give_no_between_run_interval() -> None:
    assert stats.between_run_interval(1.0, [100.0, 104.0], relative=True) is None
    assert stats.between_run_interval(1.0, [100.0, 0.0, -3.0], relative=True) is None


def save(root: Path, number: int, rounds: list[float], config: str = "DFLASH budget=8") -> Path:
    mean = sum(rounds) / len(rounds)
    entry = bench("ctx60-c1", "ctx60-c1", config, mean, 3.0, rounds)
    return write(root / machine_id() / f"{number:04d}_b8.json", saved_run([entry]))


def test_restart_levels_make_a_within_run_regression_inconclusive(tmp_path: Path) -> None:
    # Three starts at 100, 94 and 106 tok/s, each steady within its own rounds.
    root = tmp_path / ".benchmarks"
    for n, level in enumerate((100.0, 94.0, 106.0), start=1):
        compared = save(root, n, [level - 0.5, level, level + 0.5])
    save(root, 4, [50.0, 50.0, 50.0], config="DFLASH budget=1")  # another config: not counted
    now = write(tmp_path / "now.json", saved_run([bench("ctx60-c1", "ctx60-c1",
                "DFLASH budget=8", 99.0, 3.0, [98.5, 99.0, 99.5])]))  # fmt: skip
    deltas = pair(load_run(compared), load_run(now))
    [within] = check(deltas, [SPEC])  # 106 -> 99 is -6.6% with a tight within-run interval
    assert within.status == "fail"
    assert within.saved_runs is None
    [found] = check(deltas, [SPEC], load_history(compared))
    assert found.status == "inconclusive"
    assert found.noise == "between-run"
    assert found.saved_runs == 3
    assert "between-run noise +-" in found.line
    assert "from 3 saved runs" in found.line
    assert "more rounds do not narrow it" in found.line
    # A real drop is still beyond the limit with the wider interval.
    slow = write(tmp_path / "slow.json", saved_run([bench("ctx60-c1", "ctx60-c1",
                 "DFLASH budget=8", 50.0, 3.0, [49.5, 50.0, 50.5])]))  # fmt: skip
    [failed] = check(pair(load_run(compared), load_run(slow)), [SPEC], load_history(compared))
    assert failed.status == "fail"
    assert failed.noise == "between-run"


def test_with_fewer_saved_runs_the_gate_says_the_between_run_noise_is_unknown(
    tmp_path: Path,
) -> None:
    root = tmp_path / ".benchmarks"
    save(root, 1, [99.0, 100.0, 101.0])
    compared = save(root, 2, [101.0, 102.0, 103.0])
    now = write(tmp_path / "now.json", saved_run([bench("ctx60-c1", "ctx60-c1",
                "DFLASH budget=8", 101.0, 3.0, [100.0, 101.0, 102.0])]))  # fmt: skip
    [found] = check(pair(load_run(compared), load_run(now)), [SPEC], load_history(compared))
    assert found.status == "pass"
    assert found.noise == "within-run only"
    assert found.line.endswith(
        "; between-run noise unknown (2 saved runs): the gate uses the within-run interval only"
    )


def test_steady_starts_leave_the_within_run_interval_in_charge(tmp_path: Path) -> None:
    root = tmp_path / ".benchmarks"
    for n in range(1, 5):
        compared = save(root, n, [90.0, 100.0, 110.0 + n * 0.01])
    (root / machine_id() / "0009_broken.json").write_text("{not json")  # skipped, not fatal
    now = write(tmp_path / "now.json", saved_run([bench("ctx60-c1", "ctx60-c1",
                "DFLASH budget=8", 100.0, 3.0, [91.0, 99.0, 110.0])]))  # fmt: skip
    [found] = check(pair(load_run(compared), load_run(now)), [SPEC], load_history(compared))
    assert found.noise == "within-run"
    assert found.saved_runs == 4
    assert "(the 4 saved runs' between-run noise: +-0.0%)" in found.line


ELSEWHERE = {
    "another machine": {**HERE, "machine": "laptop (Other CPU, 4 CPUs)"},
    "simulated": {**HERE, "simulated": True, "host": "simulator"},
    "another dflash host": {**HERE, "host": "gpu2"},
    "another launch line": {**HERE, "launch": "fedcba9876543210"},
    "no fingerprint": None,
}


def save_from(root: Path, number: int, level: float, fingerprint: dict[str, Any] | None) -> Path:
    rounds = [level - 0.5, level, level + 0.5]
    entry = bench("ctx60-c1", "ctx60-c1", "DFLASH budget=8", level, 3.0, rounds, fingerprint)
    return write(root / machine_id() / f"{number:04d}_b8.json", saved_run([entry]))


def test_saved_runs_measured_elsewhere_are_not_noise_so_a_real_drop_fails(
    tmp_path: Path,
) -> None:
    root = tmp_path / ".benchmarks"
    # Three runs of one folder (pytest-benchmark's: OS, Python, bits) made elsewhere,
    # far apart: counted as noise they turn a 54% drop into "inconclusive".
    save_from(root, 1, 40.0, ELSEWHERE["another machine"])
    save_from(root, 2, 220.0, ELSEWHERE["another machine"])
    save_from(root, 3, 300.0, ELSEWHERE["simulated"])
    compared = save_from(root, 4, 100.0, HERE)
    now = write(tmp_path / "now.json", saved_run([bench("ctx60-c1", "ctx60-c1",
                "DFLASH budget=8", 46.0, 3.0, [45.5, 46.0, 46.5])]))  # fmt: skip
    [found] = check(pair(load_run(compared), load_run(now)), [SPEC], load_history(compared))
    assert found.status == "fail", found.line
    assert found.saved_runs == 1
    assert found.line.endswith(
        "; between-run noise unknown (1 saved runs; 3 left out: 2 another machine, "
        "1 simulated): the gate uses the within-run interval only"
    )


@pytest.mark.parametrize("why", ELSEWHERE)
def test_each_difference_of_the_fingerprint_is_named(tmp_path: Path, why: str) -> None:
    root = tmp_path / ".benchmarks"
    for n, level in enumerate((100.0, 94.0, 106.0), start=1):
        compared = save_from(root, n, level, HERE)
    save_from(root, 7, 400.0, ELSEWHERE[why])
    (root / machine_id() / "0009_broken.json").write_text("[" * 200_000)
    now = write(tmp_path / "now.json", saved_run([bench("ctx60-c1", "ctx60-c1",
                "DFLASH budget=8", 99.0, 3.0, [98.5, 99.0, 99.5])]))  # fmt: skip
    [found] = check(pair(load_run(compared), load_run(now)), [SPEC], load_history(compared))
    assert found.saved_runs == 3
    assert found.line.endswith(f"from 3 saved runs (2 left out: 1 {why}, 1 unreadable)")


@given(
    figure=st.one_of(
        st.text(max_size=8),
        st.booleans(),
        st.lists(st.floats(), max_size=2),
        st.sampled_from([math.nan, math.inf, -math.inf]),
        st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
    )
)
def test_a_saved_record_whose_figure_has_the_wrong_type_is_left_out_as_refused(
    figure: Any,
) -> None:
    rows = load_rows([bench("ctx60-c1", "ctx60-c1", "DFLASH budget=8", figure, 3.0,
                            [99.0, 100.0, 101.0])])  # fmt: skip
    [row] = rows
    assert row.refused is not None
    assert row.refused.startswith("tok_s is ")
    assert row.samples("tok_s") == []  # never repaired from the round values
    assert row.mean("tok_s") is None
    good = load_rows([bench("ctx60-c1", "ctx60-c1", "DFLASH budget=8", 100.0, 3.0,
                            [99.0, 100.0, 101.0])])  # fmt: skip
    history = History({(row.key, row.config): [row, *good]})
    found = run_noise(history, good[0], "tok_s", good[0])
    assert found.means == [100.0]
    assert found.said() == "1 left out: 1 refused"


def load_rows(benchmarks: list[dict[str, Any]]) -> list[CaseRow]:
    return [row_from_benchmark(json.loads(json.dumps(b))) for b in benchmarks]
