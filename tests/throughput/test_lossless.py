"""The numerics-aware lossless gate: first divergences classified, counted, and files."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_specdecode.throughput.lossless import (
    GreedyOutput,
    classify,
    first_difference,
    judge,
    load_baseline,
    save_baseline,
    top2_margins,
)

BOUND = 0.05


@pytest.mark.parametrize(
    ("a", "b", "index"),
    [([1, 2, 3], [1, 2, 3], None), ([1, 2, 3], [1, 9, 3], 1), ([1, 2], [1, 2, 3], 2), ("", "x", 0)],
)
def test_first_difference(a: list[int], b: list[int], index: int | None) -> None:
    assert first_difference(a, b) == index


def out(
    ids: tuple[int, ...], margins: tuple[float, ...] | None = None, pid: str = "p"
) -> GreedyOutput:
    text = "".join(f"w{i} " for i in ids)
    return GreedyOutput(pid, "q", text, ids, margins)


def test_a_flip_at_a_large_margin_is_a_defect_with_the_text_on_both_sides() -> None:
    base = out((1, 2, 3, 4), (3.0, 3.0, 3.0, 3.0))
    div = classify([base, base], out((1, 2, 9, 4)), BOUND)
    assert div is not None
    assert (div.unit, div.index, div.kind, div.margin) == ("token", 2, "defect", 3.0)
    assert (div.before, div.baseline, div.actual) == ("w1 w2 w", "3 w4 ", "9 w4 ")
    assert "after 'w1 w2 w' the baseline wrote '3 w4 ', this config '9 w4 '" in div.describe()


def test_a_flip_at_a_near_tie_is_numerics_from_either_sides_logprobs() -> None:
    base = out((1, 2, 3), (3.0, 0.01, 3.0))
    div = classify([base], out((1, 7, 3)), BOUND)
    assert div is not None
    assert (div.kind, div.why) == ("numerics", "top-2 margin 0.01 < 0.05")
    # The baseline sent none; the config's own margin at that position decides.
    div = classify([out((1, 2, 3))], out((1, 7, 3), (3.0, 0.02, 3.0)), BOUND)
    assert div is not None
    assert div.kind == "numerics"


def test_where_the_baseline_runs_part_a_divergence_is_numerics_without_logprobs() -> None:
    alone, batched = out((1, 2, 3, 4)), out((1, 2, 5, 4))
    div = classify([alone, batched], out((1, 2, 6, 4)), BOUND)
    assert div is not None
    assert (div.kind, div.why) == (
        "numerics",
        "the baseline's own runs part here",
    )
    # A config that took the other branch follows that run: no divergence at all.
    assert classify([alone, batched], out((1, 2, 5, 4)), BOUND) is None
    # Past the runs' own split the config follows one of them, and a flip there is a defect.
    div = classify([alone, batched], out((1, 2, 5, 8)), BOUND)
    assert div is not None
    assert (div.index, div.kind) == (3, "defect")


def test_text_is_compared_when_ids_are_missing() -> None:
    div = classify(
        [GreedyOutput("p", "q", "hello world")], GreedyOutput("p", "q", "hello there"), BOUND
    )
    assert div is not None
    assert (div.unit, div.index, div.kind) == ("char", 6, "defect")
    assert "no logprobs" in div.why


def test_the_gate_counts_defects_with_an_interval_and_fails_on_any() -> None:
    base = [out((1, 2, 3), (3.0, 0.01, 3.0), pid=f"p{i}") for i in range(40)]
    now = [out((1, 2, 3), pid=f"p{i}") for i in range(40)]
    now[:3] = [out((9, 2, 3), pid=f"p{i}") for i in range(3)]  # large margins: defects
    now[3:8] = [out((1, 7, 3), pid=f"p{i}") for i in range(3, 8)]  # near ties: numerics
    verdict = judge([base], now, BOUND)
    assert not verdict.passed
    assert verdict.line("DFLASH budget=8") == (
        "lossless gate FAILED: DFLASH budget=8: 3 drafter defects in 40 replies "
        "(7.5%, 95% interval 2.6%-19.9%), 5 divergences were numerics (top-2 margin < 0.05)"
    )
    clean = judge([base[3:]], now[3:], BOUND)
    assert clean.passed
    assert clean.line("X").startswith("lossless gate passed: X: 0 drafter defects in 37 replies")


def test_a_missing_reply_fails_the_gate() -> None:
    verdict = judge([[out((1,), pid="a"), out((1,), pid="b")]], [out((1,), pid="a")], BOUND)
    assert not verdict.passed
    assert verdict.missing == ["b"]
    assert verdict.line("X").endswith("no reply for 'b'")


def test_top2_margins_reads_sorted_pairs() -> None:
    first, second = top2_margins([[(-0.1, 5), (-0.4, 6)], [(-0.0, 1)]])
    assert first == pytest.approx(0.3)
    assert second == 99.0


ids = st.lists(st.integers(0, 3), min_size=1, max_size=12).map(tuple)
margins = st.floats(0, 10, allow_nan=False)


@given(ids, st.data())
def test_identical_outputs_have_no_divergence(seq: tuple[int, ...], data: st.DataObject) -> None:
    extra = data.draw(st.lists(ids, max_size=2))
    assert classify([*map(out, extra), out(seq)], out(seq), BOUND) is None


@given(ids, ids, st.data(), st.floats(0.001, 1))
def test_a_divergence_below_the_margin_bound_is_never_a_defect(
    base: tuple[int, ...], mine: tuple[int, ...], data: st.DataObject, bound: float
) -> None:
    index = first_difference(base, mine)
    if index is None:
        assert classify([out(base)], out(mine), bound) is None
        return
    # The margin at the divergence is below the bound on one side; any others anywhere.
    small = data.draw(st.floats(0, bound, exclude_max=True))
    side = data.draw(st.sampled_from(["baseline", "config"]))
    length = len(base) if side == "baseline" else len(mine)
    if index >= length:
        return  # the side ended there: it has no margin at that position
    found = [data.draw(margins) for _ in range(length)]
    found[index] = small
    a = out(base, tuple(found) if side == "baseline" else None)
    b = out(mine, tuple(found) if side == "config" else None)
    div = classify([a], b, bound)
    assert div is not None
    assert div.index == index
    assert div.kind == "numerics"


@pytest.mark.slow
@given(st.lists(st.tuples(ids, ids), min_size=1, max_size=8))
def test_defects_and_numerics_add_up_to_the_divergent_replies(
    pairs: list[tuple[tuple[int, ...], tuple[int, ...]]],
) -> None:
    base = [out(a, pid=str(i)) for i, (a, _) in enumerate(pairs)]
    now = [out(b, pid=str(i)) for i, (_, b) in enumerate(pairs)]
    verdict = judge([base], now, BOUND)
    assert verdict.replies == len(pairs)
    assert len(verdict.defects) + len(verdict.numerics) == sum(a != b for a, b in pairs)
    assert verdict.passed == all(a == b for a, b in pairs)


def test_baseline_round_trip(tmp_path: Path) -> None:
    runs = [
        [
            GreedyOutput("a", "def f():", "  return 1", (5, 6), (0.5, 2.0)),
            GreedyOutput("b", "x", "y"),
        ],
        [
            GreedyOutput("a", "def f():", "  return 2", (5, 7), (0.5, 0.01)),
            GreedyOutput("b", "x", "y"),
        ],
    ]
    path = tmp_path / "baseline.json"
    save_baseline(path, runs, meta={"config": "NONE", "max_new_tokens": 64})
    loaded, meta = load_baseline(path)
    assert loaded == runs
    assert meta == {"config": "NONE", "max_new_tokens": 64}


def test_bad_baseline_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_text('{"format": 99, "runs": []}')
    with pytest.raises(ValueError, match=r"cannot read lossless baseline .*format 99"):
        load_baseline(path)
