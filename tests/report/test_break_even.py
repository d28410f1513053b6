"""The break-even load: log-scale interpolation, its interval, no crossing, several crossings."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pytest_specdecode.report import break_even, summary, tables
from pytest_specdecode.report.model import Report

LOADS = [1.0, 8.0, 32.0]


def points(speedups: list[float], spread: float = 1.05) -> list[break_even.Point]:
    return [(x, s, s / spread, s * spread) for x, s in zip(LOADS, speedups, strict=True)]


def test_a_falling_speedup_crosses_where_the_log_log_line_meets_one() -> None:
    found = break_even.record("DFLASH budget=8", "chat", "c", points([2.0, 1.25, 0.8]))
    # Between c=8 (1.25) and c=32 (0.8): log 1.25 / (log 1.25 - log 0.8) of the way on log(load).
    share = math.log(1.25) / (math.log(1.25) - math.log(0.8))
    assert found.break_even == pytest.approx(8 * 4**share)
    assert found.status == "crosses"
    assert found.direction == "down"
    low, high, at = found.low, found.high, found.break_even
    assert low is not None
    assert high is not None
    assert at is not None
    assert low < at < high  # the low end falls below 1.0 sooner
    assert found.line.startswith("DFLASH budget=8 chat: speedup falls below 1.0 at c=16")
    assert "95% interval c=" in found.line


def test_an_interval_that_does_not_cross_within_the_loads_is_open_ended() -> None:
    found = break_even.record("B8", "chat", "c", points([1.02, 0.99, 0.9], spread=1.2))
    assert found.low is None  # the low end is below 1.0 already at c=1
    assert "(95% interval below c=1 to " in found.line
    rising = break_even.record("B8", "chat", "c", points([1.9, 1.5, 0.97], spread=1.2))
    assert rising.high is None
    assert rising.line.endswith("to above c=32)")


@pytest.mark.parametrize(
    ("speedups", "status", "line"),
    [
        ([2.0, 1.6, 1.1], "above", "B8 chat: speedup above 1.0 up to c=32"),
        ([0.9, 0.8, 0.7], "below", "B8 chat: speedup below 1.0 from c=1"),
        ([1.0, 0.9, 0.8], "below", "B8 chat: speedup below 1.0 from c=1"),  # 1.0 does not pay
    ],
)
def test_no_crossing_says_above_up_to_or_below_from(
    speedups: list[float], status: str, line: str
) -> None:
    found = break_even.record("B8", "chat", "c", points(speedups))
    assert (found.status, found.line, found.break_even) == (status, line, None)


def test_with_several_crossings_the_first_downward_one_is_reported() -> None:
    xs = [1.0, 4.0, 16.0, 64.0]
    ups_and_downs = [(x, s, s, s) for x, s in zip(xs, [0.9, 1.3, 0.8, 1.1], strict=True)]
    found = break_even.record("B8", "code", "c", ups_and_downs)
    assert found.crossings == 3
    assert found.direction == "down"
    assert found.break_even is not None
    assert 4 < found.break_even < 16
    assert "it crosses 1.0 3 times, the first downward one shown" in found.line
    only_up = break_even.record("B8", "code", "r", [(1.0, 0.8, 0.8, 0.8), (4.0, 1.2, 1.2, 1.2)])
    assert only_up.direction == "up"
    assert only_up.line.startswith("B8 code: speedup rises above 1.0 at r=")


@given(
    st.lists(st.floats(min_value=0.2, max_value=5.0), min_size=2, max_size=6),
)
@example([1.0, 1.0, 1.0, 1.0, 2.0])  # exp(log(8)) is 7.999...: once outside [8, 16]
def test_every_crossing_lies_between_two_loads_whose_speedups_straddle_one(
    speedups: list[float],
) -> None:
    xs = [2.0**i for i in range(len(speedups))]
    for at, direction in break_even.crossings(xs, speedups):
        assert any(
            xs[i] <= at <= xs[i + 1] and ((a > 1.0 >= b) if direction == "down" else (a <= 1.0 < b))
            for i, (a, b) in enumerate(itertools.pairwise(speedups))
        )
    above = [s > 1.0 for s in speedups]
    flips = sum(1 for a, b in itertools.pairwise(above) if a != b)
    assert len(break_even.crossings(xs, speedups)) == flips


@given(st.floats(min_value=1.01, max_value=5.0), st.floats(min_value=0.2, max_value=0.99))
def test_a_monotone_fall_crosses_once_between_its_ends(first: float, last: float) -> None:
    found = break_even.record("B8", "chat", "c", points([first, math.sqrt(first * last), last]))
    assert found.crossings == 1
    assert found.break_even is not None
    assert 1.0 <= found.break_even <= 32.0


def case(load: str, context: int, value: float, low: float, high: float) -> dict[str, Any]:
    metrics = {"context": context, "load": load, "domain": "chat"}
    speedup = {"tpot": {"value": value, "low": low, "high": high}}
    return {"case": f"ctx{context}-{load}-chat", "metrics": metrics, "speedup": speedup}


def test_records_take_the_geometric_mean_over_contexts_and_show_in_summary_and_verdict() -> None:
    throughput = [
        case("c1", 60, 2.0, 1.9, 2.1), case("c1", 1024, 2.0, 1.8, 2.2),
        case("c8", 60, 1.5, 1.4, 1.6), case("c8", 1024, 1.0, 0.9, 1.1),
        case("c32", 60, 0.8, 0.7, 0.9), case("c32", 1024, 0.8, 0.75, 0.85),
    ]  # fmt: skip
    report: dict[str, Any] = {
        "configs": [
            {"label": "NONE", "config": {"algorithm": "NONE"}, "throughput": []},
            {"label": "DFLASH budget=8", "config": {"algorithm": "DFLASH"},
             "throughput": throughput},
        ],
        "verdict": {"ranked_by": "speedup", "groups": [
            {"load": "c8", "domain": "chat", "best": "DFLASH budget=8", "score": 1.22}]},
    }  # fmt: skip
    typed = Report.from_dict(report)
    [found] = break_even.records(typed)
    assert found.loads == LOADS
    assert found.speedups[1] == pytest.approx(math.sqrt(1.5))
    assert found.lows[0] == pytest.approx(math.sqrt(1.9 * 1.8))
    assert found.status == "crosses"
    typed.break_even = [found]
    lines = summary._break_even(typed, "")
    assert lines[1].startswith("break-even load: per config and domain")
    assert lines[2] == f"  {found.line}"
    header, rows = tables.verdict(typed)
    assert header[-1] == "best's break-even"
    assert rows[0][-1] == f"c~{found.break_even:.0f}"


def test_one_load_or_no_speedup_gives_no_record() -> None:
    one = {"label": "B8", "config": {}, "throughput": [case("c8", 60, 1.2, 1.1, 1.3)]}
    assert break_even.records(Report.from_dict({"configs": [one]})) == []
    bare = {"label": "B8", "config": {}, "throughput": [{"case": "ctx60-c1-chat"}]}
    assert break_even.records(Report.from_dict({"configs": [bare]})) == []
