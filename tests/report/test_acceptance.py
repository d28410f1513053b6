"""Acceptance integrity: accept length across loads and past the window, per config."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_specdecode.config.settings import Settings
from pytest_specdecode.config.spec import SpecConfig
from pytest_specdecode.report import acceptance, gates
from pytest_specdecode.report.model import Metrics
from pytest_specdecode.report.results import RunResults

from .feed import NONE, throughput

W1024 = SpecConfig(budget=8, window=1024, draft_model="sim/dflash-drafter")
CLEAN = {"ctx60-c1-t64-chat": [3.2, 3.5, 2.9], "ctx60-c8-t64-chat": [3.1, 3.2, 3.0]}


def metrics(case: str, values: list[float], **more: Any) -> dict[str, Any]:
    context, load, tokens, domain = case.split("-")
    return {
        "context": int(context[3:]),
        "load": load,
        "domain": domain,
        "max_tokens": int(tokens[1:]),
        "accept_length": sum(values) / len(values),
        "intervals": {"accept_length": {"values": values}},
        **more,
    }


def run(cases: dict[str, list[float]], config: SpecConfig = W1024) -> RunResults:
    results = RunResults()
    for case, values in cases.items():
        throughput(results, config, case, metrics(case, values))
    return results


def verdicts(results: RunResults, **settings: Any) -> list[gates.Outcome]:
    found = gates.outcomes(Settings(**settings), results, [])
    return [o for o in found if o.gate == "acceptance"]


def test_a_collapse_past_the_window_fails_naming_config_context_and_figures() -> None:
    results = run({**CLEAN, "ctx4096-c1-t64-chat": [1.2, 1.3, 1.25]})
    (outcome,) = verdicts(results)
    assert not outcome.passed
    assert outcome.shown.startswith(
        "acceptance gate FAILED: DFLASH budget=8 window=1024: accept length 1.25 at ctx4096 "
        "(ctx4096-c1-t64-chat, past the window 1024) vs 3.20 at ctx60 within it (-61%, 95% "
        "interval "
    )
    assert outcome.line.startswith("acceptance: DFLASH budget=8 window=1024: accept length 1.25")
    assert "allowed drop 40%" in outcome.line
    assert gates.evaluate(Settings(), results, []) == [outcome.line]


def test_a_collapse_under_load_fails_naming_the_load() -> None:
    cases = {"ctx60-c1-t64-chat": [3.2, 3.5, 2.9], "ctx60-c8-t64-chat": [1.3, 1.4, 1.35]}
    (outcome,) = verdicts(run(cases))
    assert not outcome.passed
    assert "accept length 1.35 at c8 (ctx60-c8-t64-chat) vs 3.20 at c1 (-58%" in outcome.line


def test_the_per_position_figures_go_with_the_line() -> None:
    results = RunResults()
    throughput(results, W1024, "ctx60-c1-t64-chat", metrics(
        "ctx60-c1-t64-chat", [3.2, 3.3, 3.1], accept_rate_by_position=[0.78, 0.6]))  # fmt: skip
    throughput(results, W1024, "ctx60-c8-t64-chat", metrics(
        "ctx60-c8-t64-chat", [1.3, 1.3, 1.4], accept_rate_by_position=[0.23, 0.05]))  # fmt: skip
    (outcome,) = verdicts(results)
    assert outcome.line.endswith("draft position 1 accepted 23% vs 78%")


def test_the_natural_loss_past_a_short_window_passes() -> None:
    # The clean simulator with window 1024 at ctx4096: about -23%, noisy rounds.
    (outcome,) = verdicts(run({**CLEAN, "ctx4096-c1-t64-chat": [2.8, 2.5, 2.2]}))
    assert outcome.passed
    assert outcome.shown == (
        "acceptance gate passed: DFLASH budget=8 window=1024: 2 comparison(s) across contexts "
        "past the window and loads within the allowed drop 40% (largest change -22%, "
        "ctx4096-c1-t64-chat)"
    )


def test_a_drop_whose_interval_reaches_the_bound_does_not_fail() -> None:
    # -50% on the point, but three wild rounds: the interval reaches past -40%.
    cases = {"ctx60-c1-t64-chat": [3.0, 3.0, 3.0], "ctx60-c8-t64-chat": [0.5, 1.5, 2.5]}
    (outcome,) = verdicts(run(cases))
    assert outcome.passed


def test_one_round_each_the_point_decides() -> None:
    (fails,) = verdicts(run({"ctx60-c1-t64-chat": [3.0], "ctx60-c8-t64-chat": [1.5]}))
    assert not fails.passed
    assert "one round each: no interval" in fails.line
    (holds,) = verdicts(run({"ctx60-c1-t64-chat": [3.0], "ctx60-c8-t64-chat": [2.0]}))
    assert holds.passed


@pytest.mark.parametrize(
    "cases",
    [
        {"ctx60-c1-t64-chat": [3.2, 3.1]},  # one case
        {"ctx60-c1-t64-chat": [3.2], "ctx1024-c1-t64-chat": [1.1]},  # no context past 1024
        {"ctx60-c1-t64-chat": [3.2], "ctx4096-c8-t64-chat": [1.1]},  # neither pairs up
        {"ctx60-c1-t64-chat": [3.2], "ctx60-c8-t64-code": [1.1]},  # other prompts
        {"ctx60-c1-t64-chat": [3.2], "ctx60-c8-t128-chat": [1.1]},  # other output length
    ],
)
def test_nothing_to_compare_says_nothing(cases: dict[str, list[float]]) -> None:
    assert verdicts(run(cases)) == []


def test_a_config_without_a_window_compares_loads_only() -> None:
    cases = {**CLEAN, "ctx8192-c1-t64-chat": [1.2, 1.2, 1.3]}
    (outcome,) = verdicts(run(cases, replace(W1024, window=None)))
    assert outcome.passed
    assert "1 comparison(s) across loads" in outcome.detail


def test_the_baseline_and_hostile_figures_are_left_out() -> None:
    assert verdicts(run({"ctx60-c1-t64-chat": [3.0], "ctx60-c8-t64-chat": [1.0]}, NONE)) == []
    results = RunResults()
    throughput(results, W1024, "ctx60-c1-t64-chat", metrics("ctx60-c1-t64-chat", [3.0, 3.1]))
    hostile = metrics("ctx60-c8-t64-chat", [1.0])
    hostile.update(accept_length="x", intervals={"accept_length": {"values": ["x", -1, None]}})
    throughput(results, W1024, "ctx60-c8-t64-chat", hostile)
    assert verdicts(results) == []


def test_the_tolerance_is_the_option() -> None:
    cases = {"ctx60-c1-t64-chat": [3.2, 3.25, 3.15], "ctx60-c8-t64-chat": [2.3, 2.4, 2.35]}
    assert verdicts(run(cases))[0].passed
    (strict,) = verdicts(run(cases), max_accept_drop=0.1)
    assert not strict.passed
    assert "allowed drop 10%" in strict.line
    collapse = {"ctx60-c1-t64-chat": [3.2, 3.5, 2.9], "ctx60-c8-t64-chat": [1.0, 1.0, 1.0]}
    assert verdicts(run(collapse), max_accept_drop=1.0)[0].passed  # 1 turns it off


LEVEL = st.floats(1.5, 7.0)
NOISE = st.lists(st.floats(-0.05, 0.05), min_size=3, max_size=3)
WHERE = st.sampled_from(["ctx60-c8-t64-chat", "ctx4096-c1-t64-chat"])


@given(LEVEL, st.floats(0.0, 1.0), NOISE, NOISE, st.floats(0.2, 0.6), WHERE)
def test_clean_rounds_within_5_percent_never_fail(
    level: float, trend: float, base: list[float], now: list[float], tol: float, where: str
) -> None:
    # Any natural trend down to just inside the allowed drop, noise within +-5% a round.
    factor = (1 - tol) * 1.11 + trend * 0.3
    cases = {
        "ctx60-c1-t64-chat": [level * (1 + e) for e in base],
        where: [level * factor * (1 + e) for e in now],
    }
    (outcome,) = verdicts(run(cases), max_accept_drop=tol)
    assert outcome.passed, outcome.line


@given(LEVEL, st.floats(0.0, 1.0), NOISE, NOISE, st.floats(0.2, 0.6), WHERE)
def test_a_collapse_past_the_bound_always_fails(
    level: float, depth: float, base: list[float], now: list[float], tol: float, where: str
) -> None:
    # To 70% of the allowed level or below (but never under 1 token a step at level 1.5).
    factor = (1 - tol) * (0.7 - 0.3 * depth)
    cases = {
        "ctx60-c1-t64-chat": [level * (1 + e) for e in base],
        where: [level * factor * (1 + e) for e in now],
    }
    (outcome,) = verdicts(run(cases), max_accept_drop=tol)
    assert not outcome.passed
    assert where in outcome.line


def test_points_read_the_rounds_or_the_one_figure() -> None:
    found = acceptance.point("ctx60-c1-t64-chat", Metrics(accept_length=2.5, load="c1"))
    assert found is not None
    assert (found.context, found.load, found.values) == (60, "c1", (2.5,))
    assert acceptance.point("ctx60-c1-t64-chat", Metrics(accept_length=None)) is None
