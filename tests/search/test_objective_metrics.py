"""The search's objective reads what a measured case produces, not a name of its own.

The case goes the run's whole way: fake rounds through the metrics producer
(:func:`case_metrics`), onto a test report as the runner files it, into the
report the search reads (:meth:`RunOutputs.report`). A metric the objective
spells differently from the producer reads nothing there, and the search
would call every config infeasible ("no tok_s measured"), whatever its speed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_specdecode.client.sglang import GenerateResult
from pytest_specdecode.config.options import SEARCH_METRICS
from pytest_specdecode.config.settings import Settings
from pytest_specdecode.report.model import Report
from pytest_specdecode.report.outputs import RunOutputs
from pytest_specdecode.report.results import RunResults
from pytest_specdecode.search.objective import READERS, measure
from pytest_specdecode.throughput.load import RequestRecord, RoundResult
from pytest_specdecode.throughput.metrics import (
    ROUND_FIGURES,
    Metrics,
    case_metrics,
    extra_info,
    single_key,
)
from pytest_specdecode.throughput.workload import ThroughputCase

from ..report.feed import B8, NONE, throughput

CASE = ThroughputCase(context=1024, concurrency=2, max_tokens=8)
TTFT = 0.05


def rounds(gap: float, count: int = 3) -> list[RoundResult]:
    """``count`` rounds of CASE.concurrency requests, one token every ``gap`` seconds."""
    out = []
    for n in range(count):
        start = 10.0 * n
        times = [start + TTFT + i * gap for i in range(CASE.max_tokens)]
        result = GenerateResult(
            text="word " * CASE.max_tokens,
            completion_tokens=CASE.max_tokens,
            prompt_tokens=100,
            finish_reason="length",
            send_time=start,
            end_time=times[-1],
            chunk_times=times,
            chunk_tokens=[1] * CASE.max_tokens,
            spec_verify_ct=CASE.max_tokens // 2,
        )
        records = [RequestRecord(result) for _ in range(CASE.concurrency)]
        out.append(RoundResult(start, times[-1], records))
    return out


def report(tmp_path: Path, none_gap: float, gap: float) -> Report:
    results = RunResults()
    for config, each in ((NONE, none_gap), (B8, gap)):
        throughput(results, config, CASE.id, extra_info(case_metrics(CASE, rounds(each))))
    return RunOutputs(Settings(report="r.json"), results, tmp_path).report()


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(none_gap=st.floats(0.005, 0.05), gap=st.floats(0.005, 0.05))
def test_every_search_metric_reads_a_value_from_a_measured_case(
    tmp_path: Path, none_gap: float, gap: float
) -> None:
    data = report(tmp_path, none_gap, gap)
    wall = TTFT + (CASE.max_tokens - 1) * gap
    expected = {
        "tok_s": CASE.concurrency * CASE.max_tokens / wall,  # every round alike
        "speedup": none_gap / gap,  # baseline TPOT / config TPOT
    }
    for metric in SEARCH_METRICS:
        found = measure(data, B8.key(), metric, {})
        assert found.reasons == (), (metric, found.reasons)
        assert found.feasible
        assert found.objective == pytest.approx(expected[metric], rel=1e-6), metric


def test_the_objective_reads_each_search_metric_and_nothing_else() -> None:
    assert set(READERS) == set(SEARCH_METRICS)
    with pytest.raises(ValueError, match="no search metric 'tpot'"):
        measure(Report(), "k", "tpot", {})


def test_every_per_round_figure_is_a_field_and_a_flat_value_of_a_measured_case() -> None:
    info = extra_info(case_metrics(CASE, rounds(0.01)))
    names = set(Metrics.__struct_fields__)
    for name in ROUND_FIGURES:
        assert single_key(name) in names
        assert isinstance(info[single_key(name)], float), name
        assert info["intervals"][name]["values"], name
