"""Greedy output comparison and baseline files."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_specdecode.throughput.lossless import (
    GreedyOutput,
    compare_output,
    compare_outputs,
    first_difference,
    load_baseline,
    save_baseline,
)


@pytest.mark.parametrize(
    ("a", "b", "index"),
    [([1, 2, 3], [1, 2, 3], None), ([1, 2, 3], [1, 9, 3], 1), ([1, 2], [1, 2, 3], 2), ("", "x", 0)],
)
def test_first_difference(a: list[int], b: list[int], index: int | None) -> None:
    assert first_difference(a, b) == index


def test_token_divergence_shows_neighbourhood() -> None:
    base = GreedyOutput("p1", "q", "irrelevant", tuple(range(20)))
    got = GreedyOutput("p1", "q", "irrelevant too", (*range(10), 99, *range(11, 20)))
    div = compare_output(base, got)
    assert div is not None
    assert (div.unit, div.index) == ("token", 10)
    assert list(div.expected) == [6, 7, 8, 9, 10, 11, 12, 13, 14]
    assert list(div.actual) == [6, 7, 8, 9, 99, 11, 12, 13, 14]
    assert div.describe().startswith(
        "prompt 'p1': first differing token at index 10 (lengths 20 vs 20)"
    )


def test_text_is_compared_when_ids_are_missing() -> None:
    div = compare_output(
        GreedyOutput("p", "q", "hello world"), GreedyOutput("p", "q", "hello there")
    )
    assert div is not None
    assert (div.unit, div.index) == ("char", 6)
    assert compare_output(GreedyOutput("p", "q", "same"), GreedyOutput("p", "q", "same")) is None


def test_compare_outputs_reports_missing_and_differing() -> None:
    base = [GreedyOutput("a", "", "", (1, 2)), GreedyOutput("b", "", "", (3,))]
    now = [GreedyOutput("a", "", "", (1, 2, 5))]
    assert compare_outputs(base, now) == [
        "prompt 'a': first differing token at index 2 (lengths 2 vs 3); "
        "baseline[0:] [1, 2] vs this config [1, 2, 5]",
        "prompt 'b': no output from this config",
    ]


def test_baseline_round_trip(tmp_path: Path) -> None:
    outputs = [GreedyOutput("a", "def f():", "  return 1", (5, 6)), GreedyOutput("b", "x", "y")]
    path = tmp_path / "baseline.json"
    save_baseline(path, outputs, meta={"config": "NONE", "max_new_tokens": 64})
    loaded, meta = load_baseline(path)
    assert loaded == outputs
    assert meta == {"config": "NONE", "max_new_tokens": 64}


def test_bad_baseline_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_text('{"format": 99, "outputs": []}')
    with pytest.raises(ValueError, match=r"cannot read lossless baseline .*format 99"):
        load_baseline(path)
