"""The client's reading of SGLang's ``output_top_logprobs``: hostile until checked."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_specdecode.client.sglang import ServerError, parse_top_logprobs

GOOD = [[[-0.1, 5, " a"], [-2.5, 6, None]], [[-0.3, 7, None], [-0.2, 8, "b"]]]


def test_rows_become_pairs_best_first() -> None:
    assert parse_top_logprobs(GOOD, 2, 2) == [[(-0.1, 5), (-2.5, 6)], [(-0.2, 8), (-0.3, 7)]]
    assert parse_top_logprobs(None, 2, 2) is None  # the server sent none: nothing to judge by


@pytest.mark.parametrize(
    ("rows", "what"),
    [
        ({"0": 1}, "must be a list of 2 rows"),
        (GOOD[:1], "must be a list of 2 rows (one per token), got 1"),
        ([GOOD[0], []], "row 1 must list 1..2 entries"),
        ([GOOD[0], [[-0.1, 1], [-0.2, 2], [-0.3, 3]]], "row 1 must list 1..2 entries"),
        ([GOOD[0], [[-0.1]]], "is not [logprob, token_id, text]"),
        ([GOOD[0], [[0.5, 1]]], "needs a logprob <= 0"),
        ([GOOD[0], [[float("nan"), 1]]], "needs a logprob <= 0"),
        ([GOOD[0], [[True, 1]]], "needs a logprob <= 0"),
        ([GOOD[0], [[-0.1, 1.0]]], "an id >= 0"),
        ([GOOD[0], [[-0.1, -4]]], "an id >= 0"),
        ([GOOD[0], [["-0.1", 1]]], "needs a logprob <= 0"),
    ],
)
def test_a_shape_no_server_sends_is_one_line(rows: Any, what: str) -> None:
    with pytest.raises(ServerError) as info:
        parse_top_logprobs(rows, 2, 2)
    assert what in str(info.value)
    assert "\n" not in str(info.value)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=2), inner),
    max_leaves=30,
)


@given(json_values, st.integers(0, 4), st.integers(1, 3))
def test_any_json_is_pairs_of_the_right_shape_or_a_server_error(
    rows: Any, tokens: int, top: int
) -> None:
    json.dumps(rows, allow_nan=True)  # what a reply could hold
    try:
        found = parse_top_logprobs(rows, tokens, top)
    except ServerError as exc:
        message = str(exc)
    else:
        message = ""
    if message:
        assert "\n" not in message
        assert len(message) < 600
        return
    if found is None:
        assert rows is None
        return
    assert len(found) == tokens
    for row in found:
        assert 0 < len(row) <= top
        assert [p[0] for p in row] == sorted((p[0] for p in row), reverse=True)
        assert all(type(p[1]) is int and p[1] >= 0 and p[0] <= 1e-6 for p in row)
