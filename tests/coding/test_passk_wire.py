from __future__ import annotations

import math

import pytest

from pytest_specdecode.coding import aggregate, pass_at_k
from pytest_specdecode.coding.values import same
from pytest_specdecode.coding.worker import Opaque, decode, encode


def _exact(n: int, c: int, k: int) -> float:
    return 1 - math.comb(n - c, k) / math.comb(n, k)


@pytest.mark.parametrize(
    ("n", "c", "k"),
    [(1, 0, 1), (1, 1, 1), (10, 3, 1), (10, 3, 5), (10, 3, 10), (10, 0, 5), (20, 19, 10)],
)
def test_pass_at_k_matches_binomials(n: int, c: int, k: int) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(_exact(n, c, k), abs=1e-12)


def test_pass_at_k_known_values_and_stability() -> None:
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(5, 0, 5) == 0.0
    assert pass_at_k(5, 1, 5) == 1.0
    # Binomials this large overflow floats; the product form does not.
    assert pass_at_k(2000, 1, 1000) == pytest.approx(0.5)


@pytest.mark.parametrize(("n", "c", "k"), [(0, 0, 1), (5, 6, 1), (5, 2, 6), (5, 2, 0)])
def test_pass_at_k_rejects_impossible(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError, match="pass@k"):
        pass_at_k(n, c, k)


def test_aggregate_reports_only_possible_ks() -> None:
    result = aggregate({"a": [True, False, False, False, False], "b": [False] * 5})
    assert set(result) == {1, 5}
    assert result[1] == pytest.approx(0.1)
    assert result[5] == pytest.approx(0.5)


@pytest.mark.parametrize(
    "value",
    [None, True, 0, -(10**30), 1.5, float("inf"), "x\n", [1, (2, 3)], {"a": [1]}, {(1, 2): {3}},
     frozenset({1}), b"\x00", 1 + 2j],
)  # fmt: skip
def test_wire_round_trip(value: object) -> None:
    back = decode(encode(value))
    assert back == value
    assert type(back) is type(value)


def test_wire_opaque_and_malformed() -> None:
    thing = object()
    assert decode(encode(thing)) == Opaque("object", repr(thing))
    assert decode(encode(thing)) != repr(thing)
    for bad in [{"$": "list", "v": 3}, {"x": 1}, [1, 2], {"$": "nope"}, {"$": "dict", "v": [[1]]}]:
        with pytest.raises(ValueError, match="malformed"):
            decode(bad)


@pytest.mark.parametrize(
    ("expected", "actual", "equal"),
    [
        (1, 1, True),
        (1, True, False),
        (0.1 + 0.2, 0.3, True),
        (2.0, 2, True),
        (float("nan"), float("nan"), True),
        ([1, 2], (1, 2), False),
        ({"a": 1.0}, {"a": 1.0 + 1e-12}, True),
        ({"a": 1}, {"b": 1}, False),
        ([1, [2]], [1, [3]], False),
    ],
)
def test_same(expected: object, actual: object, equal: bool) -> None:
    assert same(expected, actual) is equal
