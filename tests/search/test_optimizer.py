"""The search loop against a fake objective: seeded, deterministic, no server."""

from __future__ import annotations

from collections.abc import Mapping, Set

import pytest

from pytest_specdecode.report.model import Report
from pytest_specdecode.report.search_summary import markdown_lines, summary_lines
from pytest_specdecode.search.objective import measure
from pytest_specdecode.search.optimizer import GridSearch, Measured, default_restarts
from pytest_specdecode.search.record import section, skip_reason

# tok/s of the simulator's full grid (ctx4096, c8, 128 tokens, time scale 1), by (budget, window).
GRID = {
    (2, 512): 486.8, (2, 1024): 492.9, (2, 2048): 504.5, (2, 4096): 477.6,
    (4, 512): 531.5, (4, 1024): 548.8, (4, 2048): 584.2, (4, 4096): 536.0,
    (6, 512): 461.2, (6, 1024): 533.9, (6, 2048): 594.4, (6, 4096): 543.2,
    (8, 512): 489.5, (8, 1024): 522.3, (8, 2048): 590.3, (8, 4096): 522.8,
    (12, 512): 438.6, (12, 1024): 471.0, (12, 2048): 541.3, (12, 4096): 475.4,
    (16, 512): 393.0, (16, 1024): 426.6, (16, 2048): 507.0, (16, 4096): 432.2,
}  # fmt: skip
POINTS = [{"budget": b, "window": w} for b, w in GRID]


def fake(point: Mapping[str, int], infeasible: Set[tuple[int, int]] = frozenset()) -> Measured:
    key = (point["budget"], point["window"])
    value = GRID[key]
    return Measured(value, value * 0.97, value * 1.03, feasible=key not in infeasible)


def search(seed: int, restarts: int = 8, **kw: object) -> GridSearch:
    found = GridSearch(POINTS, restarts, seed=seed)
    while batch := found.ask(1):
        (index,) = batch
        found.tell(index, fake(POINTS[index], **kw))  # type: ignore[arg-type]
    return found


def test_the_default_budget_is_a_third_of_the_space_at_least_three() -> None:
    assert [default_restarts(n) for n in (1, 2, 5, 9, 24, 25)] == [1, 2, 3, 3, 8, 9]


@pytest.mark.parametrize("seed", range(5))
def test_eight_restarts_find_a_config_within_3_percent_of_the_grid_best(seed: int) -> None:
    found = search(seed)
    assert len(found.visits) == 8
    visited = [v.index for v in found.visits]
    assert len(set(visited)) == len(visited), "a config was started twice"
    best = found.best()
    assert best is not None
    assert GRID[tuple(POINTS[best.index].values())] >= 0.97 * max(GRID.values())  # type: ignore[index]


def test_the_same_seed_makes_the_same_choices() -> None:
    assert [v.index for v in search(3).visits] == [v.index for v in search(3).visits]


def test_the_whole_grid_is_visited_once_when_the_budget_allows() -> None:
    found = search(0, restarts=len(POINTS))
    assert sorted(v.index for v in found.visits) == list(range(len(POINTS)))
    assert found.stop_reason() == f"restart budget spent ({len(POINTS)} configs started)"


def test_an_infeasible_config_is_never_the_best() -> None:
    top = {(6, 2048), (8, 2048), (4, 2048)}
    found = search(1, restarts=24, infeasible=top)
    best = found.best()
    assert best is not None
    assert tuple(POINTS[best.index].values()) == (4, 1024)  # the best feasible one


def test_it_stops_when_no_unvisited_config_can_plausibly_beat_the_best() -> None:
    points = [{"budget": b} for b in (1, 2, 3, 4)]
    found = GridSearch(points, 4, seed=0)
    for index, value in ((0, 100.0), (1, 90.0), (2, 80.0)):
        found.tell(index, Measured(value, value - 1, value + 1))
    # Budget 4's only neighbour scored 80 (<= 81): at the steepest step seen (1/8), <= 91.1.
    assert found.optimistic(3) == pytest.approx(81 * (1 + 10 / 80))
    reason = found.stop_reason()
    assert reason is not None
    assert reason.startswith("no unvisited config can plausibly beat the best")
    assert found.ask(1) == []


def test_it_goes_on_while_an_unvisited_config_has_no_measured_neighbour() -> None:
    points = [{"budget": b} for b in (1, 2, 3, 4)]
    found = GridSearch(points, 4, seed=0)
    found.tell(0, Measured(100.0, 99.0, 101.0))
    assert found.optimistic(3) is None
    assert found.stop_reason() is None


def test_a_config_given_back_is_asked_again_first() -> None:
    found = GridSearch(POINTS, 8, seed=2)
    first, second = found.ask(2)
    found.give_back(first)
    assert found.ask(1) == [first]
    assert second in found.pending


def test_carried_results_count_against_the_budget_and_are_not_asked() -> None:
    found = GridSearch(POINTS, 3, seed=0)
    found.tell(5, fake(POINTS[5]), carried=True)
    asked = found.ask(5)
    assert len(asked) == 2
    assert 5 not in asked


def typed(data: dict[str, object]) -> Report:
    """The report dict as the report the objective reads (converted once)."""
    return Report.from_dict(data)


def report(tok_s: float, errors: int = 0, **config: object) -> dict[str, object]:
    metrics = {"tok_s": tok_s, "errors": errors,
               "intervals": {"tok_s": {"values": [tok_s * 0.9, tok_s * 1.1], "low": tok_s * 0.8,
                                       "high": tok_s * 1.2}}}  # fmt: skip
    return {"label": "L", "key": "k", "throughput": [{"case": "c1", "metrics": metrics}], **config}


def test_the_objective_is_the_geometric_mean_over_the_cases() -> None:
    config = report(100.0)
    config["throughput"].append(  # type: ignore[attr-defined]
        {"case": "c2", "metrics": {"tok_s": 400.0, "intervals": {"tok_s": {"values": [400.0]}}}}
    )
    found = measure(typed({"configs": [config]}), "k", "tok_s", {})
    assert found.objective == pytest.approx(200.0)
    assert found.low is None  # c2 has no interval: the geometric mean's is open
    assert found.feasible


@pytest.mark.parametrize(
    ("data", "excluded", "reason"),
    [
        ({"configs": [report(100.0)]}, {"L": ["not lossless"]}, "not lossless"),
        ({"configs": [report(100.0, errors=2)]}, {}, "request errors in c1"),
        (
            {"configs": [report(100.0, server_died={"reason": "x", "after_tests": 0})]},
            {},
            "server died",
        ),
        (
            {
                "configs": [report(100.0)],
                "tests": [{"nodeid": "t", "when": "call", "config_key": "k", "outcome": "failed"}],
            },
            {},
            "1 failed test(s)",
        ),
        ({"configs": []}, {}, "no results"),
    ],
)
def test_a_config_failing_a_gate_is_infeasible(
    data: dict[str, object], excluded: dict[str, list[str]], reason: str
) -> None:
    found = measure(typed(data), "k", "tok_s", excluded)
    assert not found.usable
    assert reason in found.reasons


def test_the_speedup_objective_reads_the_cases_speedup() -> None:
    config = report(100.0)
    config["throughput"][0]["speedup"] = {"tpot": {"value": 1.5, "low": 1.4, "high": 1.6}}  # type: ignore[index]
    found = measure(typed({"configs": [config]}), "k", "speedup", {})
    assert (found.objective, found.low, found.high) == (1.5, 1.4, 1.6)


def test_the_report_section_and_its_text() -> None:
    found = search(0)
    labels = [f"DFLASH budget={p['budget']} window={p['window']}" for p in POINTS]
    data = section(found, labels, "tok_s", found.stop_reason(), 0)
    assert data["space_size"] == 24
    assert [v["label"] for v in data["visited"]] == [labels[v.index] for v in found.visits]
    assert data["best"]["objective"] == max(v["objective"] for v in data["visited"])
    assert data["restarts_saved"] == 16
    assert data["stopped"] == "restart budget spent (8 configs started)"
    text = summary_lines(Report(search=data))
    assert text[0].startswith("search (tok_s): 8 of 24 configs started (budget 8), 16 restarts")
    assert text[-1] == f"search best: {data['best']['label']} {data['best']['objective']:.4g}"
    assert any(data["best"]["label"] in line for line in markdown_lines(Report(search=data)))
    unvisited = next(i for i in range(24) if i not in found.visited)
    assert skip_reason(found, labels)(unvisited).startswith(
        f"not visited by the search (best so far: {data['best']['label']} "
    )
