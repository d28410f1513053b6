"""Pass rates as statistics: the Wilson interval and the exact sign test."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_specdecode.report.rates import paired, sign_test
from pytest_specdecode.throughput.stats import wilson_interval as wilson


@given(st.integers(min_value=1, max_value=2000), st.data())
def test_the_wilson_interval_holds_the_rate_inside_zero_to_one(
    total: int, data: st.DataObject
) -> None:
    passed = data.draw(st.integers(min_value=0, max_value=total))
    low, high = wilson(passed, total)
    assert 0.0 <= low <= passed / total <= high <= 1.0
    assert low < high  # never degenerate, not even at 0/n or n/n


def test_wilson_known_values() -> None:
    # 95% Wilson interval of 8/10: 0.490 to 0.943 (the textbook figure).
    low, high = wilson(8, 10)
    assert (round(low, 3), round(high, 3)) == (0.49, 0.943)
    assert wilson(0, 0) == (0.0, 1.0)


@pytest.mark.parametrize(
    ("lost", "won", "p"),
    [(0, 0, 1.0), (0, 5, 1.0), (5, 0, 1 / 32), (8, 0, 1 / 256), (3, 1, 5 / 16), (1, 1, 3 / 4)],
)
def test_sign_test_is_the_exact_binomial_tail(lost: int, won: int, p: float) -> None:
    assert math.isclose(sign_test(lost, won), p)


@given(st.integers(min_value=0, max_value=60), st.integers(min_value=0, max_value=60))
def test_one_more_loss_never_makes_a_config_look_better(lost: int, won: int) -> None:
    assert sign_test(lost + 1, won) <= sign_test(lost, won)
    assert 0.0 < sign_test(lost, won) <= 1.0


def test_pairing_counts_only_problems_both_answered() -> None:
    found = paired({"a": True, "b": True, "c": False}, {"a": False, "c": True, "d": False})
    assert (found.problems, found.lost, found.won) == (2, 1, 1)
