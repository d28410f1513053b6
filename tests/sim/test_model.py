"""The speculative-decoding model moves the right way with each knob."""

from __future__ import annotations

import random

import pytest

from pytest_specdecode.sim.answers import CODE, FILLER, PROSE
from pytest_specdecode.sim.model import SpecModel, SpecSettings


def dflash(k: int = 8, window: int | None = 2048) -> SpecModel:
    return SpecModel(SpecSettings("DFLASH", k, 1, 1, window))


def ddtree(budget: int, topk: int) -> SpecModel:
    return SpecModel(SpecSettings("DDTREE", 16, topk, 1, 2048, budget))


def tok_s(model: SpecModel, content: int = PROSE, batch: int = 1, ctx: int = 600) -> float:
    length = model.expected_accept_length(content, ctx)
    return batch * length / model.step_seconds(batch, ctx * batch)


def test_accept_length_grows_with_budget_with_diminishing_returns() -> None:
    a4, a8, a16 = (dflash(k).expected_accept_length(PROSE, 600) for k in (4, 8, 16))
    assert 1 < a4 < a8 < a16
    assert a16 - a8 < a8 - a4


def test_a_middle_budget_wins_on_prose() -> None:
    t4, t8, t16 = (tok_s(dflash(k)) for k in (4, 8, 16))
    assert t8 > t4
    assert t8 > t16


def test_larger_budget_costs_more_per_step_and_batch_and_context_too() -> None:
    assert dflash(16).step_seconds(1, 600) > dflash(8).step_seconds(1, 600)
    assert dflash(8).step_seconds(8, 8 * 600) > dflash(8).step_seconds(1, 600)
    assert dflash(8).step_seconds(1, 8000) > dflash(8).step_seconds(1, 600)


def test_code_is_more_predictable_than_prose_than_filler() -> None:
    m = dflash()
    assert m.expected_accept_length(CODE, 600) > m.expected_accept_length(PROSE, 600)
    assert m.expected_accept_length(PROSE, 600) > m.expected_accept_length(FILLER, 600)


def test_window_below_trained_hurts_only_long_contexts() -> None:
    short, trained, full = dflash(window=1024), dflash(window=2048), dflash(window=None)
    assert short.expected_accept_length(PROSE, 500) == trained.expected_accept_length(PROSE, 500)
    assert short.expected_accept_length(PROSE, 4000) < trained.expected_accept_length(PROSE, 4000)
    assert full.expected_accept_length(PROSE, 6000) < trained.expected_accept_length(PROSE, 6000)


def test_ddtree_topk_raises_acceptance_and_cost() -> None:
    assert ddtree(16, 2).expected_accept_length(PROSE, 600) > ddtree(16, 1).expected_accept_length(
        PROSE, 600
    )
    assert ddtree(16, 2).step_seconds(1, 600) > ddtree(16, 1).step_seconds(1, 600)


def test_batching_raises_aggregate_and_lowers_per_request_rate() -> None:
    m = dflash()
    agg = [tok_s(m, batch=n) for n in (1, 8, 32)]
    assert agg[0] < agg[1] < agg[2]
    assert agg[2] / 32 < agg[0]


def test_none_accepts_one_token_per_step() -> None:
    m = SpecModel(SpecSettings())
    assert m.draw(random.Random(1), PROSE, 10) == 1
    assert m.expected_accept_length(CODE, 10) == 1


@pytest.mark.parametrize("k", [4, 8, 16])
def test_draws_stay_in_range_and_match_expectation(k: int) -> None:
    m, rng = dflash(k), random.Random(0)
    draws = [m.draw(rng, PROSE, 600) for _ in range(20000)]
    assert min(draws) >= 1
    assert max(draws) <= k
    assert sum(draws) / len(draws) == pytest.approx(m.expected_accept_length(PROSE, 600), rel=0.03)
