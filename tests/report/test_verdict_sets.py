"""The verdict's answer per load and domain is a set, with each member's coverage.

Synthetic reports: each config has one case per context with its TPOT speedup
(and tok/s ratio) interval given directly, so the tests state the intervals the
verdict compares.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_specdecode.config.settings import Settings
from pytest_specdecode.report import html_sections, summary, tables, verdict
from pytest_specdecode.report.model import Report, VerdictGroup
from pytest_specdecode.report.outputs import RunOutputs
from pytest_specdecode.report.results import RunResults
from pytest_specdecode.throughput.comparison import CaseRow

from .feed import B8, throughput

Interval = tuple[float, float, float]


def ratio(value: float, low: float, high: float) -> dict[str, Any]:
    return {"value": value, "low": low, "high": high}


def case(
    context: int, tpot: Interval, tok: Interval | None = None, tpot_ms: float = 5.0
) -> dict[str, Any]:
    name = f"ctx{context}-c1-t128-chat"
    metrics = {
        "case": name,
        "context": context,
        "load": "c1",
        "domain": "chat",
        "tok_s": 100.0,
        "tpot_ms_p50": tpot_ms,
        "intervals": {"tpot_ms": {"values": [tpot_ms] * 3}},
    }
    speedup = {"tpot": ratio(*tpot), "tok_s": ratio(*(tok or tpot)), "baseline": "NONE"}
    return {"case": name, "metrics": metrics, "speedup": speedup}


def config(
    budget: int, *cases: dict[str, Any], coding: int = 0, lossless: bool | None = None
) -> dict[str, Any]:
    passed = {"rate": 1.0, "passed": coding, "total": coding} if coding else None
    return {
        "label": f"DFLASH budget={budget} window=2048",
        "config": {"algorithm": "DFLASH", "budget": budget, "window": 2048},
        "throughput": list(cases),
        "coding": [{"problem": f"p{i}", "passed": True} for i in range(coding)],
        "pass_rate": passed,
        "accept_length": 3.0,
        "lossless": [] if lossless is None else [{"nodeid": "t::l", "passed": lossless}],
    }


def none() -> dict[str, Any]:
    base = case(60, (1.0, 1.0, 1.0))
    base.pop("speedup")
    return {"label": "NONE", "config": {"algorithm": "NONE"}, "throughput": [base]}


def decided(*configs: dict[str, Any]) -> Report:
    report = Report.from_dict({"configs": [none(), *configs], "gates": {"min_accept_length": 2.0}})
    report.verdict = verdict.decide(report, {})
    return report


def only_group(report: Report) -> VerdictGroup:
    assert report.verdict is not None
    (group,) = report.verdict.groups
    return group


def row(report: Report) -> dict[str, str]:
    header, (cells,) = tables.verdict(report)
    return dict(zip(header, cells, strict=True))


def test_overlapping_intervals_are_a_tie_named_in_full() -> None:
    report = decided(
        config(8, case(60, (2.0, 1.6, 2.4)), coding=4, lossless=True),
        config(16, case(60, (2.1, 1.7, 2.5)), coding=4, lossless=True),
        config(4, case(60, (1.3, 1.2, 1.4)), coding=4, lossless=True),
    )
    group = only_group(report)
    assert group.best_set == ["DFLASH budget=16 window=2048", "DFLASH budget=8 window=2048"]
    assert group.margin == "tie within noise"
    assert group.best == "DFLASH budget=16 window=2048"
    assert group.runner_up == "DFLASH budget=4 window=2048", "the first config outside it"
    assert row(report)["best config"] == "tie within noise: budget=16, budget=8"
    assert Report.from_json(report.to_json()) == report  # the JSON report holds the fields


def test_clear_only_when_the_top_lies_above_every_other() -> None:
    report = decided(
        config(8, case(60, (2.0, 1.9, 2.1)), case(1024, (1.8, 1.7, 1.9)), coding=4),
        config(16, case(60, (1.5, 1.4, 1.6)), case(1024, (1.5, 1.4, 1.65)), coding=4),
    )
    group = only_group(report)
    assert group.best_set == ["DFLASH budget=8 window=2048"]
    assert group.margin == "clear"
    assert row(report)["best config"] == "clear: budget=8"
    # Above in one context only: the other context's overlap makes it a tie.
    tied = decided(
        config(8, case(60, (2.0, 1.9, 2.1)), case(1024, (1.8, 1.7, 1.9)), coding=4),
        config(16, case(60, (1.5, 1.4, 1.6)), case(1024, (1.8, 1.6, 2.0)), coding=4),
    )
    assert only_group(tied).margin == "tie within noise"
    assert len(only_group(tied).best_set) == 2


BOUNDS = st.tuples(st.floats(0.5, 3.0, allow_nan=False), st.floats(0.0, 0.6, allow_nan=False)).map(
    lambda t: (t[0], t[0] - t[1], t[0] + t[1])
)


@given(
    st.lists(st.tuples(BOUNDS, BOUNDS), min_size=2, max_size=6),
    st.randoms(use_true_random=False),
)
def test_any_order_of_the_configs_gives_the_same_sets(
    figures: list[tuple[Interval, Interval]], rng: Any
) -> None:
    configs = [
        config(budget, case(60, a), case(1024, b), coding=1)
        for budget, (a, b) in zip(range(2, 40), figures, strict=False)
    ]
    first = only_group(decided(*configs))
    shuffled = list(configs)
    rng.shuffle(shuffled)
    again = only_group(decided(*shuffled))
    assert again.best_set == first.best_set
    assert [m.config for m in again.members] == [m.config for m in first.members]
    assert again.margin == first.margin
    # The set is what it says: every other config lies below the top in every context.
    top = {c["case"]: c["speedup"]["tpot"] for c in next(
        c for c in configs if c["label"] == first.best)["throughput"]}  # fmt: skip
    for c in configs:
        below = all(top[k["case"]]["low"] > k["speedup"]["tpot"]["high"] for k in c["throughput"])
        assert (c["label"] in first.best_set) == (not below) or c["label"] == first.best


def test_a_config_never_checked_is_named_not_checked() -> None:
    report = decided(
        config(16, case(60, (3.0, 2.9, 3.1))),  # the fastest: no coding, no lossless test
        config(8, case(60, (2.0, 1.9, 2.1)), coding=4, lossless=True),
    )
    group = only_group(report)
    assert group.best_set == ["DFLASH budget=16 window=2048"]
    shown = row(report)
    assert shown["best config"] == "clear: budget=16 (correctness not checked)"
    assert shown["correctness"] == "not checked (no coding or lossless result)"
    lines = "\n".join(summary.render(report))
    assert "clear: budget=16 (correctness not checked)" in lines
    card = html_sections.gate_rows(report, report.configs[1])
    assert ["verdict eligible", "not checked",
            "fastest, correctness not checked: no coding or lossless result"] in card  # fmt: skip
    checked = html_sections.gate_rows(report, report.configs[2])
    assert checked[-1] == ["verdict eligible", "yes", "-"]
    member = next(m for m in group.members if m.config.endswith("budget=8 window=2048"))
    assert tables.coverage_text(member) == "pass rate 4/4, lossless pass, accept floor held"


def test_figures_that_contradict_each_other_are_not_ranked() -> None:
    report = decided(
        # Faster by TPOT, slower by tok/s beyond both intervals: a loaded client.
        config(16, case(60, (1.8, 1.6, 2.0), tok=(0.54, 0.5, 0.6)), coding=1),
        config(4, case(60, (2.5, 2.4, 2.6), tpot_ms=0.0), coding=1),  # TPOT 0.00
        config(8, case(60, (1.3, 1.2, 1.4)), coding=1),
    )
    group = only_group(report)
    assert group.best_set == ["DFLASH budget=8 window=2048"]
    assert {u.config: u.reason for u in group.unranked} == {
        "DFLASH budget=16 window=2048": "inconsistent figures",
        "DFLASH budget=4 window=2048": "inconsistent figures",
    }
    shown = row(report)["not ranked"]
    assert "budget=16: inconsistent figures (ctx60-c1-t128-chat: TPOT speedup 1.80x" in shown
    assert "budget=4: inconsistent figures (ctx60-c1-t128-chat: TPOT is 0)" in shown
    # Within their intervals the two figures may differ: that is noise, still ranked.
    noisy = decided(config(16, case(60, (1.8, 1.6, 2.0), tok=(0.9, 0.7, 1.1)), coding=1))
    assert only_group(noisy).best_set == ["DFLASH budget=16 window=2048"]


def saved_row(label: str, tpot: float) -> CaseRow:
    name = "ctx60-c1-t128-chat"
    info = {
        "case": name,
        "context": 60,
        "load": "c1",
        "domain": "chat",
        "algorithm": label.split()[0],
        "tok_s": 1000 / tpot,
        "intervals": {
            "tpot_ms": {"values": [tpot * 0.99, tpot, tpot * 1.01]},
            "tok_s": {"values": [1000 / tpot * 1.01, 1000 / tpot, 1000 / tpot * 0.99]},
        },
    }
    return CaseRow(name, name, name, label, info["tok_s"], None, info)  # type: ignore[arg-type]


def test_a_compared_runs_configs_join_the_ranking() -> None:
    now = config(8, case(60, (1.2, 1.15, 1.25)), coding=4, lossless=True)
    report = Report.from_dict({"configs": [none(), now]})
    rows = [saved_row("DFLASH budget=16 window=2048", 2.5), saved_row("NONE", 5.0)]
    saved = verdict.saved_configs(report, rows, "0007_b16")
    report.verdict = verdict.decide(report, {}, saved, "0007_b16")
    group = only_group(report)
    assert group.best_set == ["DFLASH budget=16 window=2048 (saved run 0007_b16)"]
    (member,) = [m for m in group.members if m.saved]
    assert member.saved == "0007_b16"
    assert member.score == pytest.approx(2.0, rel=1e-3), (
        "this run's NONE TPOT (5.0 ms) over the saved run's (2.5)"
    )
    assert not member.coverage.checked
    assert row(report)["best config"] == (
        "clear: DFLASH budget=16 window=2048 (saved run 0007_b16) (correctness not checked)"
    )


def test_the_run_ranks_the_compared_run_beside_its_own(tmp_path: Path) -> None:
    name = "ctx60-c1"
    tok_s = {"values": [39800.0, 40000.0, 40200.0], "low": 39500.0, "high": 40500.0}
    faster = {"case": name, "config": "DFLASH budget=16", "tok_s": 40000.0,
              "intervals": {"tok_s": tok_s}}  # fmt: skip
    bench = {"name": f"test_throughput[{name}]",
             "fullname": f"test_t.py::test_throughput[{name}]", "extra_info": faster}  # fmt: skip
    saved = tmp_path / "0003_b16.json"
    saved.write_text(json.dumps({"benchmarks": [bench]}))
    results = RunResults()
    rounds = {"values": [30300.0, 30500.0, 30700.0], "low": 30000.0, "high": 31000.0}
    throughput(results, B8, name, {"tok_s": 30500.0, "intervals": {"tok_s": rounds}})
    outputs = RunOutputs(Settings(report="r.json", compare=str(saved)), results, tmp_path)
    outputs.finish(0)
    report = json.loads((tmp_path / "r.json").read_text())
    (group,) = report["verdict"]["groups"]
    assert group["best_set"] == ["DFLASH budget=16 (saved run 0003_b16)"]
    assert group["runner_up"] == "DFLASH budget=8 window=2048"
    lines = summary.render(Report.from_dict(report))
    assert any("clear: DFLASH budget=16 (saved run 0003_b16)" in line for line in lines)
