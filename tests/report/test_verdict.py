"""Speedup against the baseline, the verdict per load and domain, the Pareto front."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from pytest_specdecode.config.settings import Settings
from pytest_specdecode.report import gates, verdict
from pytest_specdecode.report.results import LosslessRecord, RunResults
from pytest_specdecode.throughput.comparison import CaseRow

from .conftest import config_dict, config_entry, interval, judged, make_report, sweep_report
from .feed import B4, B8, NONE, coding, errored, throughput


def case(report: dict[str, Any], label: str, name: str) -> dict[str, Any]:
    config = next(c for c in report["configs"] if c["label"] == label)
    return next(t for t in config["throughput"] if t["case"] == name)


def test_speedup_is_baseline_tpot_over_config_tpot_round_by_round() -> None:
    report = judged(sweep_report())
    found = case(report, "DFLASH budget=8 window=2048", "ctx60-c8-t128-chat")
    base = case(report, "NONE", "ctx60-c8-t128-chat")
    ratio = (
        base["metrics"]["intervals"]["tpot_ms"]["mean"]
        / found["metrics"]["intervals"]["tpot_ms"]["mean"]
    )
    assert found["speedup"]["tpot"]["value"] == pytest.approx(ratio)
    # The fixture's rounds move together (1% apart on both sides): paired, no spread.
    assert found["speedup"]["tpot"]["low"] == pytest.approx(ratio)
    assert found["speedup"]["baseline"] == "NONE (this run)"
    tok = found["metrics"]["tok_s"] / base["metrics"]["tok_s"]
    assert found["speedup"]["tok_s"]["value"] == pytest.approx(tok)
    assert "speedup" not in base, "the baseline is the reference"
    assert report["speedup"]["missing"] is None


def test_without_a_baseline_one_line_says_how_to_get_one() -> None:
    report = make_report([config_entry(config_dict("DFLASH", 8, 2048))])
    verdict.annotate_speedups(report)
    assert report["speedup"]["missing"] == verdict.NO_BASELINE
    assert "\n" not in verdict.NO_BASELINE
    assert all("speedup" not in t for t in report["configs"][0]["throughput"])
    decided = verdict.decide(report, {})
    assert decided["ranked_by"] == "tok_s"


def test_a_saved_run_of_algorithm_none_is_a_baseline_too() -> None:
    report = make_report([config_entry(config_dict("DFLASH", 8, 2048))])
    first = report["configs"][0]["throughput"][0]
    metrics = {**first["metrics"], "intervals": {"tpot_ms": interval(90.0)}, "algorithm": "NONE"}
    row = CaseRow("k", "k", first["case"], "NONE", 1.0, None, metrics)
    other = CaseRow(
        "k", "k", first["case"], "DFLASH budget=4", 1.0, None, metrics | {"algorithm": "DFLASH"}
    )
    verdict.annotate_speedups(report, [other, row], "0003_none.json")
    assert first["speedup"]["baseline"] == "NONE (saved run 0003_none.json)"
    tpot = first["metrics"]["intervals"]["tpot_ms"]["mean"]
    assert first["speedup"]["tpot"]["value"] == pytest.approx(90.0 / tpot)
    assert report["speedup"]["missing"] is None


def test_the_verdict_skips_configs_that_failed_a_gate_and_says_why() -> None:
    report = judged(sweep_report())
    groups = {(g["load"], g["domain"]): g for g in report["verdict"]["groups"]}
    assert set(groups) == {("c1", "chat"), ("c8", "chat"), ("c32", "chat")}
    best = groups[("c1", "chat")]["best"]
    assert best != "NONE"
    assert groups[("c1", "chat")]["contexts"] == [60, 1024]
    barred = judged(sweep_report(), excluded={best: ["not lossless"]})
    again = {(g["load"], g["domain"]): g for g in barred["verdict"]["groups"]}
    assert again[("c1", "chat")]["best"] != best
    assert barred["verdict"]["excluded"] == [{"config": best, "reasons": ["not lossless"]}]
    assert all(
        not p["front"]
        for g in barred["verdict"]["pareto"]
        for p in g["points"]
        if p["config"] == best
    )


def test_the_best_speedup_is_the_geometric_mean_over_contexts() -> None:
    report = judged(sweep_report())
    group = next(g for g in report["verdict"]["groups"] if g["load"] == "c8")
    speedups = [
        case(report, group["best"], f"ctx{ctx}-c8-t128-chat")["speedup"]["tpot"]["value"]
        for ctx in (60, 1024)
    ]
    assert group["score"] == pytest.approx((speedups[0] * speedups[1]) ** 0.5)
    assert group["range"] == pytest.approx(sorted(speedups))
    assert group["margin"] in ("clear", "tie within noise")


def test_an_errored_case_keeps_its_config_out_of_that_group() -> None:
    report = sweep_report()
    verdict.annotate_speedups(report)
    first = verdict.decide(report, {})
    best = first["groups"][0]["best"]
    damaged = copy.deepcopy(report)
    case(damaged, best, "ctx60-c1-t128-chat")["metrics"]["errors"] = 2
    assert verdict.decide(damaged, {})["groups"][0]["best"] != best


def test_pareto_front_holds_exactly_the_undominated_points() -> None:
    report = judged(sweep_report())
    for group in report["verdict"]["pareto"]:
        points = group["points"]
        for p in points:
            dominated = any(
                q["req_tok_s"] >= p["req_tok_s"] and q["tok_s"] >= p["tok_s"] and q is not p
                and (q["req_tok_s"] > p["req_tok_s"] or q["tok_s"] > p["tok_s"])
                for q in points
            )  # fmt: skip
            assert p["front"] == (not dominated)
        assert any(p["front"] for p in points)


def test_config_failures_name_each_gate() -> None:
    results = RunResults()
    coding(results, B8, "fib", passed=False, accept=1.5, tokens=30)
    coding(results, B4, "fib", passed=True, accept=3.0, tokens=30)
    throughput(results, NONE, "ctx60-c1-chat", {"tok_s": 1.0})
    results.configs[B4.key()].lossless["t::l"] = LosslessRecord(False, "differs")
    errored(results, B4, "t::x")
    found = gates.config_failures(Settings(min_pass_rate=0.8, min_accept_length=2.0), results)
    assert found == {
        "NONE": [],
        "DFLASH budget=4 window=2048": ["not lossless", "server not ready"],
        "DFLASH budget=8 window=2048": ["pass rate 0% < 80%", "accept length 1.50 < 2"],
    }


def test_the_latency_table_answers_its_own_question_case_by_case() -> None:
    from pytest_specdecode.report import summary

    lines = summary.render(sweep_report())
    start = lines.index("latency per case (p50 over requests)")
    header = lines[start + 1].split()
    assert header[:2] == ["case", "config"]
    assert "TPOT" not in header  # the throughput table's figure, not repeated here
    cases = [line.split()[0] for line in lines[start + 3 :] if line.strip()]
    cases = cases[: cases.index("acceptance")] if "acceptance" in cases else cases
    first = list(dict.fromkeys(cases))
    assert cases == sorted(cases, key=first.index)  # each case's configs side by side
    assert len(cases) > len(first) > 1
