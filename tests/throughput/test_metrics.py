"""The metric formulas of docs/metrics.md on synthetic timings."""

from __future__ import annotations

import json

import msgspec
import pytest

from pytest_specdecode.client.sglang import GenerateResult
from pytest_specdecode.throughput.load import RequestRecord, RoundResult
from pytest_specdecode.throughput.metrics import (
    RUNNER_FIELDS,
    Metrics,
    Percentiles,
    case_metrics,
    extra_info,
    percentile,
    request_itls,
    request_tpot,
)
from pytest_specdecode.throughput.workload import ThroughputCase


def result(
    send: float,
    chunks: list[tuple[float, int]],
    *,
    verify: int | None = None,
    end: float | None = None,
) -> GenerateResult:
    times = [t for t, _ in chunks]
    counts = [n for _, n in chunks]
    return GenerateResult(
        text="",
        completion_tokens=sum(counts),
        prompt_tokens=100,
        finish_reason="length",
        send_time=send,
        end_time=end if end is not None else times[-1],
        chunk_times=times,
        chunk_tokens=counts,
        spec_verify_ct=verify,
    )


def one_round(start: float, end: float, *results: GenerateResult) -> RoundResult:
    return RoundResult(start, end, [RequestRecord(r) for r in results])


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([5.0], 50, 5.0),
        ([1.0, 2.0, 3.0, 4.0], 50, 2.5),
        ([1.0, 2.0, 3.0, 4.0, 5.0], 90, 4.6),
        (list(map(float, range(1, 101))), 99, 99.01),
        ([3.0, 1.0, 2.0], 0, 1.0),
        ([3.0, 1.0, 2.0], 100, 3.0),
    ],
)
def test_percentile_interpolates_linearly(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == pytest.approx(expected)


def test_percentile_of_nothing_is_none_and_bad_q_raises() -> None:
    assert percentile([], 50) is None
    with pytest.raises(ValueError, match=r"0\.\.100"):
        percentile([1.0], 101)


def test_tpot_uses_completion_tokens_not_chunk_count() -> None:
    # 2 chunks carrying 1 and 9 tokens: TPOT spreads the decode time over 9
    # tokens after the first, not over 1 chunk gap.
    r = result(10.0, [(10.2, 1), (11.1, 9)])
    assert r.ttft == pytest.approx(0.2)
    assert request_tpot(r) == pytest.approx((1.1 - 0.2) / 9)
    assert request_itls(r) == [pytest.approx(0.9)]


def test_tpot_undefined_for_single_token() -> None:
    assert request_tpot(result(0.0, [(0.5, 1)])) is None


def test_case_metrics_aggregate_over_rounds() -> None:
    case = ThroughputCase(1024, 2, 8)
    r1 = one_round(
        0.0,
        2.0,
        result(0.0, [(0.5, 1), (1.0, 3), (2.0, 4)], verify=3),
        result(0.0, [(0.25, 2), (1.0, 6)], verify=2),
    )
    r2 = one_round(10.0, 12.0, result(10.0, [(11.0, 4), (12.0, 4)], verify=2))
    m = case_metrics(case, [r1, r2])
    assert m.case == "ctx1024-c2-t8-chat"
    assert (m.domain, m.load, m.rate) == ("chat", "c2", None)
    assert m.completion_tokens == 24
    assert m.wall_time_s == pytest.approx(4.0)
    assert m.tok_s == pytest.approx(24 / 4.0)
    assert m.tok_s_round_min == pytest.approx(4.0)
    assert m.tok_s_round_max == pytest.approx(8.0)
    # accept length over the case's own requests: 24 tokens / 7 verify steps
    assert m.accept_length == pytest.approx(24 / 7)
    assert m.spec_verify_ct == 7
    assert m.requests == 3
    assert m.errors == 0
    assert m.ttft_ms_p50 == pytest.approx(500.0)
    tpots = [(2.0 - 0.5) / 7, (1.0 - 0.25) / 7, (2.0 - 1.0) / 7]
    assert m.tpot_ms_p50 == pytest.approx(sorted(tpots)[1] * 1000)
    itls = [0.5, 1.0, 0.75, 1.0]
    assert m.itl_ms_p50 == pytest.approx(percentile(itls, 50) * 1000)  # type: ignore[operator]
    assert m.tokens_per_chunk_mean == pytest.approx(24 / 7)
    assert m.e2e_ms_p99 == pytest.approx(2000.0)
    assert m.req_tok_s_p50 == pytest.approx(4.0)


def test_accept_length_absent_without_spec_counts() -> None:
    m = case_metrics(ThroughputCase(60, 1), [one_round(0, 1, result(0.0, [(1.0, 5)]))])
    assert m.accept_length is None
    assert m.spec_verify_ct is None


def test_errors_are_counted_not_hidden() -> None:
    rnd = one_round(0.0, 1.0, result(0.0, [(1.0, 5)]))
    rnd.requests.append(RequestRecord(None, "POST /generate returned 500: boom"))
    m = case_metrics(ThroughputCase(60, 2), [rnd])
    assert m.errors == 1
    assert m.requests == 2
    assert m.tok_s == pytest.approx(5.0)


def test_extra_info_is_json_with_flat_percentiles_and_round_trips() -> None:
    m = case_metrics(
        ThroughputCase(60, 1), [one_round(0, 1, result(0.0, [(0.1, 1), (1.0, 4)], verify=2))]
    )
    info = extra_info(m)
    assert not any(isinstance(v, (list, tuple)) for k, v in info.items() if "_p" in k)
    assert info["ttft_ms_p50"] == pytest.approx(100.0)
    assert info["tok_s"] == pytest.approx(5.0)
    assert msgspec.convert(json.loads(json.dumps(info)), Metrics) == m


def test_extra_info_leaves_the_runners_fields_out_until_it_sets_them() -> None:
    m = case_metrics(ThroughputCase(60, 1), [one_round(0, 1, result(0.0, [(1.0, 5)]))])
    assert set(extra_info(m)) == set(Metrics.__struct_fields__) - set(RUNNER_FIELDS)
    m.repetition_baseline = 0.25
    assert extra_info(m)["repetition_baseline"] == 0.25


def test_percentiles_scaled_keeps_none() -> None:
    assert Percentiles(1.0, None, 2.0).scaled(1000) == Percentiles(1000.0, None, 2000.0)


def with_histogram(res: GenerateResult, hist: object, name: str = "spec_correct_drafts_histogram"):  # type: ignore[no-untyped-def]
    res.meta_info[name] = hist
    return res


def test_intervals_over_rounds_keep_their_values() -> None:
    rounds = [
        one_round(0.0, 1.0, result(0.0, [(0.1, 1), (1.0, 9)], verify=4)),
        one_round(0.0, 2.0, result(0.0, [(0.1, 1), (2.0, 9)], verify=5)),
        one_round(0.0, 1.0, result(0.0, [(0.1, 1), (1.0, 9)], verify=4)),
    ]
    m = case_metrics(ThroughputCase(60, 1, 10), rounds)
    assert m.intervals is not None
    intervals = msgspec.to_builtins(m.intervals)  # as extra_info writes them
    tok = intervals["tok_s"]
    assert tok["values"] == [10.0, 5.0, 10.0]
    assert tok["mean"] == pytest.approx(25 / 3)
    assert tok["low"] < 25 / 3 < tok["high"]
    assert tok["n"] == 3
    assert intervals["tpot_ms"]["values"] == pytest.approx([100.0, 211.111, 100.0], abs=1e-3)
    assert intervals["accept_length"]["values"] == [2.5, 2.0, 2.5]


def test_acceptance_histogram_and_rate_per_position() -> None:
    # Steps by correct drafts: 1 step with 0, 2 with 1, 1 with 3 (SGLang's shape).
    a = with_histogram(result(0.0, [(1.0, 9)], verify=4), [1, 2, 0, 1])
    b = with_histogram(result(0.0, [(1.0, 2)], verify=2), [2], name="spec_accept_histogram")
    hostile = with_histogram(result(0.0, [(1.0, 3)], verify=1), ["x", -1])
    huge = with_histogram(result(0.0, [(1.0, 3)], verify=1), [1] * 100_000)
    m = case_metrics(ThroughputCase(60, 4), [one_round(0.0, 1.0, a, b, hostile, huge)])
    assert m.accept_histogram == [3, 2, 0, 1]
    assert m.accept_rate_by_position == pytest.approx([3 / 6, 1 / 6, 1 / 6])
    # The histogram agrees with the token count it summarises: 1 + correct drafts per step.
    assert sum((i + 1) * n for i, n in enumerate([1, 2, 0, 1])) == 9
    none = case_metrics(ThroughputCase(60, 1), [one_round(0, 1, result(0.0, [(1.0, 5)]))])
    assert (none.accept_histogram, none.accept_rate_by_position) == (None, None)


def test_goodput_counts_requests_meeting_every_slo() -> None:
    fast = result(0.0, [(0.1, 1), (1.0, 10)])  # TTFT 100 ms, TPOT 90 ms
    slow_start = result(0.0, [(0.6, 1), (1.0, 10)])  # TTFT 600 ms
    slow_tokens = result(0.0, [(0.1, 1), (2.0, 10)])  # TPOT ~190 ms
    rnd = one_round(0.0, 2.0, fast, slow_start, slow_tokens)
    m = case_metrics(ThroughputCase(60, 3), [rnd], slo=(("ttft", 0.5), ("tpot", 0.1)))
    assert m.slo == "ttft:500ms,tpot:100ms"
    assert m.slo_attainment == pytest.approx(1 / 3)
    assert m.goodput == pytest.approx(1 / 2.0)
    assert case_metrics(ThroughputCase(60, 3), [rnd]).goodput is None
