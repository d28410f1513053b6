"""The search by time (``budget_seconds``), its successive halving and its warm-state order."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_specdecode.config.parsers import duration
from pytest_specdecode.report.model import Report
from pytest_specdecode.report.search_summary import markdown_lines, summary_lines
from pytest_specdecode.search.objective import seconds_of
from pytest_specdecode.search.optimizer import GridSearch, Measured
from pytest_specdecode.search.record import section
from pytest_specdecode.search.space import warm_state

from .test_optimizer import POINTS, fake

# Wide intervals: the plausibility stop never fires, only the budget stops the search.
WIDE = Measured(100.0, 1.0, 1e9)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("2h", 7200.0), ("90m", 5400.0), ("30s", 30.0), ("1h30m", 5400.0), (" 1m0.5s ", 60.5)],
)
def test_a_duration_reads_hours_minutes_and_seconds(text: str, seconds: float) -> None:
    assert duration(text) == seconds


@pytest.mark.parametrize("text", ["", "90", "2 h", "2H", "30m2h", "2h2h", "1.5h", "-3m", "0s", "h"])
def test_anything_else_is_refused_with_what_is_expected(text: str) -> None:
    with pytest.raises(ValueError, match="expected a duration like 2h, 90m, 30s or 1h30m"):
        duration(text)


@settings(max_examples=40, deadline=None)
@given(
    costs=st.lists(st.floats(1.0, 500.0), min_size=24, max_size=24),
    budget=st.floats(1.0, 5000.0),
)
def test_no_config_starts_once_it_would_overrun_what_the_costliest_so_far_took(
    costs: list[float], budget: float
) -> None:
    found = GridSearch(POINTS, len(POINTS), seed=0, budget_seconds=budget)
    taken: list[float] = []
    while batch := found.ask(1):
        (index,) = batch
        if taken:
            # Started only when the costliest visit's seconds still fit in what is left.
            assert sum(taken) + max(taken) <= budget
        taken.append(costs[index])
        found.tell(index, WIDE, seconds=costs[index])
    assert found.spent == pytest.approx(sum(taken))
    if len(taken) < len(POINTS):
        assert sum(taken) + max(taken) > budget
        reason = found.stop_reason()
        assert reason is not None
        assert reason.startswith("time budget spent")


def test_a_config_that_costs_more_to_start_counts_more() -> None:
    def visits(start: float) -> int:
        found = GridSearch(POINTS, len(POINTS), seed=0, budget_seconds=1000.0)
        while batch := found.ask(1):
            found.tell(batch[0], WIDE, seconds=start + 20.0)
        return len(found.visits)

    assert (visits(30.0), visits(80.0), visits(230.0)) == (20, 10, 4)


def test_pending_configs_are_charged_what_the_costliest_took() -> None:
    found = GridSearch(POINTS, len(POINTS), seed=0, budget_seconds=300.0)
    (first,) = found.ask(1)
    found.tell(first, WIDE, seconds=100.0)
    # 100 s spent; each pending one is charged 100 s too: two more fit in 300 s, not three.
    assert len(found.ask(3)) == 2


def test_a_config_clearly_worse_after_one_round_is_stopped_there() -> None:
    found = GridSearch(POINTS, len(POINTS), seed=0)
    first, second, third = found.ask(3)
    assert not found.report(first, 1, 500.0)
    found.tell(first, Measured(500.0, 490.0, 510.0), seconds=60.0)
    assert not found.report(second, 1, 600.0)  # better than what reached round 1
    assert found.report(third, 1, 100.0)  # the worse half of round 1: stop
    found.tell(third, Measured(100.0), seconds=20.0, pruned=True)
    assert found.visits[-1].pruned
    assert [t.state.name for t in found.study.trials].count("PRUNED") == 1
    found.tell(second, Measured(90.0, 80.0, 100.0), seconds=60.0)
    best = found.best()
    assert best is not None
    assert best.index == first  # a pruned config never counts as the best
    data = section(found, [str(p) for p in POINTS], "tok_s", None, 0)
    assert data["visited"][1]["pruned"] is True
    assert data["visited"][1]["seconds"] == 20.0
    assert data["spent_seconds"] == 140.0


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), drafters=st.integers(2, 4), batch=st.integers(2, 8))
def test_configs_sharing_weights_start_one_after_another(
    seed: int, drafters: int, batch: int
) -> None:
    points = [{"drafter": d, **p} for d in range(drafters) for p in POINTS]
    groups = [p["drafter"] for p in points]
    found = GridSearch(points, len(points), seed=seed, groups=groups)
    asked = [groups[i] for i in found.ask(batch)]
    # Each warm state's configs are next to each other: a state never comes back.
    changes = [a for a, b in pairwise(asked) if a != b]
    assert len(changes) == len(set(asked)) - 1


def test_a_config_warm_state_is_its_weights_not_its_runtime_flags() -> None:
    a = {"budget": 4, "draft_model": "d", "extra": [["mem-fraction-static", "0.8"]]}
    b = {"budget": 8, "draft_model": "d", "extra": [["cuda-graph-max-bs", "8"]]}
    c = {"budget": 4, "draft_model": "d", "extra": [["quantization", "fp8"]]}
    d = {"budget": 4, "draft_model": "e", "extra": []}
    assert warm_state(a) == warm_state(b)
    assert len({warm_state(a), warm_state(c), warm_state(d)}) == 3


def test_a_config_seconds_are_its_restart_and_its_measurement() -> None:
    service: dict[str, object] = {"restarted": True, "ready_seconds": 40.0}
    test = {"nodeid": "t", "outcome": "passed"}
    report = Report.from_dict({
        "configs": [{"label": "K", "key": "k", "service": service}],
        "tests": [
            {**test, "config_key": "k", "when": "call", "duration": 12.5},
            {**test, "config_key": "k", "when": "call", "duration": 7.5},
            {**test, "config_key": "j", "when": "call", "duration": 99.0},
            # The restart, counted once.
            {**test, "config_key": "k", "when": "setup", "duration": 40.0},
        ],
    })  # fmt: skip
    assert seconds_of(report, "k") == 60.0
    report.configs[0].service["restarted"] = False  # a live server: no start of ours
    assert seconds_of(report, "k") == 20.0
    assert seconds_of(report, "absent") is None


def test_the_summary_says_the_time_budget() -> None:
    found = GridSearch(POINTS, len(POINTS), seed=0, budget_seconds=250.0)
    while batch := found.ask(1):
        found.tell(batch[0], fake(POINTS[batch[0]]), seconds=100.0)
    data = section(found, [str(p) for p in POINTS], "tok_s", found.stop_reason(), 0)
    assert data["budget_seconds"] == 250.0
    assert summary_lines(Report(search=data))[0].startswith(
        "search (tok_s): 2 of 24 configs started (time budget 250 s, 200 s taken)"
    )
    assert "2 of 24 configs started (time budget 250 s, 200 s taken)" in "\n".join(
        markdown_lines(Report(search=data))
    )


def test_a_host_next_config_is_nearest_among_the_weights_it_has_warm() -> None:
    points = [{"drafter": d, "budget": b} for d in ("a", "b", "c") for b in (2, 4, 8)]
    groups = [p["drafter"] for p in points]
    for host, expected in (
        ("c", {"drafter": "c", "budget": 4}),
        ("b", {"drafter": "b", "budget": 4}),
    ):
        found = GridSearch(points, len(points), seed=0, startup=0, groups=groups)
        for index in range(3):  # every drafter-a point measured
            found.tell(index, WIDE)
        # A proposal of a measured point: b4 and c4 are the nearest free points, as near
        # as each other; the one whose weights the host loaded last is started.
        found.study.enqueue_trial({"drafter": 0, "budget": 1})
        (index,) = found.ask(1, after=host)
        assert points[index] == expected
