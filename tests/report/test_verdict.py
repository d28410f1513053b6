"""Speedup against the baseline, the verdict per load and domain, the Pareto front."""

from __future__ import annotations

import msgspec
import pytest

from pytest_specdecode.config.settings import Settings
from pytest_specdecode.report import gates, verdict
from pytest_specdecode.report.model import (
    Excluded,
    LosslessRecord,
    Metrics,
    Report,
    RoundSummary,
    ThroughputRecord,
)
from pytest_specdecode.report.results import RunResults
from pytest_specdecode.throughput.comparison import CaseRow

from .conftest import (
    config_dict,
    config_entry,
    interval,
    judged,
    make_report,
    sweep_report,
    typed,
    with_speedups,
)
from .feed import B4, B8, NONE, coding, errored, throughput


def case(report: Report, label: str, name: str) -> ThroughputRecord:
    config = next(c for c in report.configs if c.label == label)
    return next(t for t in config.throughput if t.case == name)


def tpot_mean(metrics: Metrics) -> float:
    found = metrics.interval("tpot_ms")
    assert found is not None
    assert found.mean is not None
    return found.mean


def test_speedup_is_baseline_tpot_over_config_tpot_round_by_round() -> None:
    report = judged(sweep_report())
    found = case(report, "DFLASH budget=8 window=2048", "ctx60-c8-t128-chat")
    base = case(report, "NONE", "ctx60-c8-t128-chat")
    ratio = tpot_mean(base.metrics) / tpot_mean(found.metrics)
    assert found.speedup is not None
    assert found.speedup.tpot is not None
    assert found.speedup.tpot.value == pytest.approx(ratio)
    # The fixture's rounds move together (1% apart on both sides): paired, no spread.
    assert found.speedup.tpot.low == pytest.approx(ratio)
    assert found.speedup.baseline == "NONE (this run)"
    assert found.metrics.tok_s is not None
    assert base.metrics.tok_s is not None
    tok = found.metrics.tok_s / base.metrics.tok_s
    assert found.speedup.tok_s is not None
    assert found.speedup.tok_s.value == pytest.approx(tok)
    assert base.speedup is None, "the baseline is the reference"
    assert report.speedup is not None
    assert report.speedup.missing is None


def test_without_a_baseline_one_line_says_how_to_get_one() -> None:
    report = with_speedups(typed(make_report([config_entry(config_dict("DFLASH", 8, 2048))])))
    assert report.speedup is not None
    assert report.speedup.missing == verdict.NO_BASELINE
    assert "\n" not in verdict.NO_BASELINE
    assert all(t.speedup is None for t in report.configs[0].throughput)
    decided = verdict.decide(report, {})
    assert decided.ranked_by == "tok_s"


def test_a_saved_run_of_algorithm_none_is_a_baseline_too() -> None:
    report = typed(make_report([config_entry(config_dict("DFLASH", 8, 2048))]))
    first = report.configs[0].throughput[0]
    metrics = {
        **msgspec.to_builtins(first.metrics),
        "intervals": {"tpot_ms": interval(90.0)},
        "algorithm": "NONE",
    }
    row = CaseRow("k", "k", first.case, "NONE", 1.0, None, metrics)
    other = CaseRow(
        "k", "k", first.case, "DFLASH budget=4", 1.0, None, metrics | {"algorithm": "DFLASH"}
    )
    found = verdict.speedups(report, [other, row], "0003_none.json")
    assert found[0] is not None
    assert found[0].tpot is not None
    assert found[0].baseline == "NONE (saved run 0003_none.json)"
    assert found[0].tpot.value == pytest.approx(90.0 / tpot_mean(first.metrics))
    assert verdict.speedup_method(report, found).missing is None


def test_a_saved_figure_of_the_wrong_type_is_left_out_not_fatal() -> None:
    # A saved run's extra_info may hold anything: the figure is dropped, the rest kept.
    found = verdict.metrics_of({"tok_s": "fast", "tpot_ms_p50": 4.0, "intervals": 3})
    assert found == Metrics(tpot_ms_p50=4.0)


def test_the_verdict_skips_configs_that_failed_a_gate_and_says_why() -> None:
    report = judged(sweep_report())
    assert report.verdict is not None
    groups = {(g.load, g.domain): g for g in report.verdict.groups}
    assert set(groups) == {("c1", "chat"), ("c8", "chat"), ("c32", "chat")}
    best = groups[("c1", "chat")].best
    assert best is not None
    assert best != "NONE"
    assert groups[("c1", "chat")].contexts == [60, 1024]
    barred = judged(sweep_report(), excluded={best: ["not lossless"]})
    assert barred.verdict is not None
    again = {(g.load, g.domain): g for g in barred.verdict.groups}
    assert again[("c1", "chat")].best != best
    assert barred.verdict.excluded == [Excluded(config=best, reasons=["not lossless"])]
    assert all(not p.front for g in barred.verdict.pareto for p in g.points if p.config == best)


def test_the_best_speedup_is_the_geometric_mean_over_contexts() -> None:
    report = judged(sweep_report())
    assert report.verdict is not None
    group = next(g for g in report.verdict.groups if g.load == "c8")
    assert group.best is not None
    speedups: list[float] = []
    for ctx in (60, 1024):
        found = case(report, group.best, f"ctx{ctx}-c8-t128-chat").speedup
        assert found is not None
        assert found.tpot is not None
        assert found.tpot.value is not None
        speedups.append(found.tpot.value)
    assert group.score == pytest.approx((speedups[0] * speedups[1]) ** 0.5)
    assert group.range == pytest.approx(sorted(speedups))
    assert group.margin in ("clear", "tie within noise")


def test_an_errored_case_keeps_its_config_out_of_that_group() -> None:
    report = with_speedups(typed(sweep_report()))
    first = verdict.decide(report, {})
    best = first.groups[0].best
    assert best is not None
    damaged = msgspec.convert(msgspec.to_builtins(report), Report)
    case(damaged, best, "ctx60-c1-t128-chat").metrics.errors = 2
    assert verdict.decide(damaged, {}).groups[0].best != best


def test_pareto_front_holds_exactly_the_undominated_points() -> None:
    report = judged(sweep_report())
    assert report.verdict is not None
    for group in report.verdict.pareto:
        points = [(p.req_tok_s or 0.0, p.tok_s or 0.0, p) for p in group.points]
        for x, y, p in points:
            dominated = any(
                qx >= x and qy >= y and q is not p and (qx > x or qy > y) for qx, qy, q in points
            )
            assert p.front == (not dominated)
        assert any(p.front for p in group.points)


def test_samples_fall_back_to_the_one_value_of_a_report_from_before_intervals() -> None:
    with_rounds = Metrics(tok_s=5.0, intervals={"tok_s": RoundSummary(values=[4.0, 6.0, 8.0])})
    assert verdict.samples(with_rounds, "tok_s") == [4.0, 6.0, 8.0]
    assert verdict.mean(with_rounds, "tok_s") == 6.0
    assert verdict.samples(Metrics(tok_s=5.0), "tok_s") == [5.0]
    assert verdict.samples(Metrics(tpot_ms_p50=3.0), "tpot_ms") == [3.0]
    assert verdict.mean(Metrics(), "tok_s") is None


def test_a_case_shape_comes_from_its_metrics_else_its_id() -> None:
    shaped = Metrics(context=60, load="c8", domain="code")
    assert verdict.case_shape("anything", shaped) == (60, "c8", "code")
    assert verdict.case_shape("ctx1024-c8-t128-chat", Metrics()) == (1024, "c8", "chat")
    assert verdict.case_shape("ctx1024-c8", Metrics()) == (1024, "c8", "-")  # before domains
    assert verdict.case_shape("odd", Metrics(context=60)) == (60, "odd", "-")


def test_config_failures_name_each_gate() -> None:
    results = RunResults()
    coding(results, B8, "fib", passed=False, accept=1.5, tokens=30)
    coding(results, B4, "fib", passed=True, accept=3.0, tokens=30)
    throughput(results, NONE, "ctx60-c1-chat", {"tok_s": 1.0})
    results.configs[B4.key()].lossless["t::l"] = LosslessRecord(
        nodeid="t::l", passed=False, detail="differs"
    )
    errored(results, B4, "t::x")
    found = gates.config_failures(Settings(min_pass_rate=0.8, min_accept_length=2.0), results)
    assert found == {
        "NONE": [],
        "DFLASH budget=4 window=2048": ["not lossless", "server not ready"],
        "DFLASH budget=8 window=2048": ["pass rate 0% < 80%", "accept length 1.50 < 2"],
    }


def test_the_latency_table_answers_its_own_question_case_by_case() -> None:
    from pytest_specdecode.report import summary

    lines = summary.render(typed(sweep_report()))
    start = lines.index("latency per case (p50 over requests)")
    header = lines[start + 1].split()
    assert header[:2] == ["case", "config"]
    assert "TPOT" not in header  # the throughput table's figure, not repeated here
    cases = [line.split()[0] for line in lines[start + 3 :] if line.strip()]
    cases = cases[: cases.index("acceptance")] if "acceptance" in cases else cases
    first = list(dict.fromkeys(cases))
    assert cases == sorted(cases, key=first.index)  # each case's configs side by side
    assert len(cases) > len(first) > 1
