"""Intervals over rounds: Student's t quantiles, means, ratios and differences."""

from __future__ import annotations

import math
import random

import pytest

from pytest_specdecode.throughput.stats import (
    diff_interval,
    mean_interval,
    ratio_interval,
    summary,
    t_cdf,
    t_quantile,
)


@pytest.mark.parametrize(
    ("df", "expected"),
    [(1, 12.706), (2, 4.303), (3, 3.182), (4, 2.776), (9, 2.262), (30, 2.042), (1e7, 1.960)],
)
def test_t_quantile_matches_the_tables(df: float, expected: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=5e-4)
    assert t_quantile(0.025, df) == pytest.approx(-expected, abs=5e-4)


def test_t_cdf_inverts_the_quantile_for_fractional_df() -> None:
    for df in (1.5, 2.7, 7.3):
        assert t_cdf(t_quantile(0.9, df), df) == pytest.approx(0.9, abs=1e-9)


def test_mean_interval_is_mean_plus_minus_t_times_standard_error() -> None:
    found = mean_interval([100.0, 102.0, 98.0])
    assert found is not None
    half = 4.3027 * 2.0 / math.sqrt(3)  # s = 2
    assert (found.value, found.n) == (100.0, 3)
    assert found.low == pytest.approx(100 - half, abs=1e-3)
    assert found.high == pytest.approx(100 + half, abs=1e-3)


def test_one_round_has_a_mean_but_no_interval() -> None:
    found = mean_interval([5.0])
    assert found is not None
    assert (found.value, found.known, found.half_width) == (5.0, False, None)
    assert mean_interval([]) is None
    assert summary(["x", float("nan"), 3.0]) == {  # type: ignore[list-item]
        "mean": 3.0, "low": None, "high": None, "n": 1, "values": [3.0]
    }  # fmt: skip


def test_the_interval_covers_the_true_mean_about_95_percent_of_the_time() -> None:
    rng = random.Random(7)
    covered = 0
    for _ in range(2000):
        found = mean_interval([rng.gauss(10.0, 2.0) for _ in range(3)])
        assert found is not None
        assert found.low is not None
        assert found.high is not None
        covered += found.low <= 10.0 <= found.high
    assert 0.93 <= covered / 2000 <= 0.97


def test_ratio_interval_is_symmetric_in_log_and_holds_the_ratio() -> None:
    found = ratio_interval([10.0, 10.2, 9.8], [5.0, 5.1, 4.9])
    assert found is not None
    assert found.value == pytest.approx(2.0)
    assert found.low is not None
    assert found.high is not None
    assert found.low < 2.0 < found.high
    assert math.log(found.high / 2.0) == pytest.approx(math.log(2.0 / found.low))
    assert found.method == "welch"


def test_a_side_measured_once_borrows_the_other_sides_spread() -> None:
    pooled = ratio_interval([10.0], [5.0, 5.1, 4.9])
    assert pooled is not None
    assert pooled.method == "pooled"
    assert pooled.known
    none = ratio_interval([10.0], [5.0])
    assert none is not None
    assert (none.value, none.known) == (2.0, False)


def test_diff_interval_welch() -> None:
    found = diff_interval([100.0, 102.0, 98.0], [90.0, 91.0, 89.0])
    assert found is not None
    assert found.value == pytest.approx(-10.0)
    assert found.high is not None
    assert found.high < -5.0, "a clear drop lies wholly below -5"
    same = diff_interval([3.0, 3.0], [3.0, 3.0])
    assert same is not None
    assert (same.low, same.high) == (0.0, 0.0), "identical rounds: no spread, no change"


def test_paired_rounds_remove_the_spread_the_prompts_bring() -> None:
    from pytest_specdecode.throughput.stats import paired_diff_interval, paired_ratio_interval

    # Round 2 has harder prompts under both configs: unpaired that is noise, paired it is not.
    base, now = [10.0, 6.0, 10.0], [20.0, 12.0, 20.0]
    unpaired = ratio_interval(now, base)
    paired = paired_ratio_interval(now, base)
    assert unpaired is not None
    assert paired is not None
    assert unpaired.known
    assert paired.method == "paired"
    assert (paired.value, paired.low, paired.high) == pytest.approx((2.0, 2.0, 2.0))
    diff = paired_diff_interval([3.0, 2.0, 4.0], [3.5, 2.5, 4.5])
    assert diff is not None
    assert (diff.value, diff.low, diff.high) == pytest.approx((0.5, 0.5, 0.5))
    fallback = paired_ratio_interval([1.0, 2.0], [1.0, 2.0, 3.0])
    assert fallback is not None
    assert fallback.method != "paired", "different round counts do not pair up"
