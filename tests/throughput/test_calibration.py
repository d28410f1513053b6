"""The load client's calibration against a null server: within its budget, never the run's error."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from pytest_specdecode.client.sglang import GenerateResult
from pytest_specdecode.throughput import calibration


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@contextlib.contextmanager
def fake_server(deadline: float) -> Iterator[str]:
    yield "http://127.0.0.1:1"


def test_each_concurrency_gets_its_best_round_and_the_budget_stops_the_rest() -> None:
    clock = Clock()
    seen: list[int] = []

    def one_round(url: str, concurrency: int, max_tokens: int) -> tuple[float, list[float]]:
        seen.append(concurrency)
        clock.now += 0.4  # two rounds per concurrency: 0.8 s each
        return 100.0 * concurrency + len(seen), [0.001 * len(seen)]

    found = calibration.calibrate(
        [8, 1, 1, 32, 0, 100_000],
        64,
        budget=1.0,
        server=fake_server,
        one_round=one_round,
        clock=clock,
    )
    assert seen == [1, 1, 8, 8]
    assert sorted(found.ceilings) == [1, 8]
    assert found.ceilings[1].tok_s == 102.0
    assert found.ceilings[8].tok_s == 804.0
    assert found.skipped == [32]
    assert found.error is None
    assert found.to_json()["ceilings"][0]["concurrency"] == 1


def test_a_failing_calibration_is_one_line_not_an_error() -> None:
    def one_round(url: str, concurrency: int, max_tokens: int) -> tuple[float, list[float]]:
        raise OSError("connection refused\nmore")

    found = calibration.calibrate([1], 64, server=fake_server, one_round=one_round)
    assert found.error == "OSError: connection refused"
    assert not found.ceilings
    assert "calibration failed (OSError: connection refused)" in calibration.summary_line(found)


def result(e2e: float, server_e2e: float | None) -> GenerateResult:
    return GenerateResult(
        text="x", completion_tokens=8, prompt_tokens=4, finish_reason="length",
        send_time=100.0, end_time=100.0 + e2e, server_e2e_latency=server_e2e,
    )  # fmt: skip


@given(
    overhead_ms=st.floats(0, 500),
    e2e_ms=st.floats(1, 2000),
    null_ms=st.floats(0.01, 50),
)
def test_a_round_is_disturbed_exactly_when_its_overhead_says_the_machine_was_loaded(
    overhead_ms: float, e2e_ms: float, null_ms: float
) -> None:
    share = overhead_ms / (e2e_ms + overhead_ms)
    # Away from the thresholds by more than the float error of the round trip in seconds.
    assume(abs(share - calibration.LOADED_SHARE) > 1e-6)
    assume(abs(overhead_ms - calibration.OVERHEAD_FACTOR * null_ms) > 1e-6)
    found = calibration.Calibration(ceilings={4: calibration.Ceiling(4, 1000.0, null_ms)})
    rnd = [result((e2e_ms + overhead_ms) / 1000, e2e_ms / 1000)] * 4
    loaded = (
        share > calibration.LOADED_SHARE and overhead_ms > calibration.OVERHEAD_FACTOR * null_ms
    )
    assert found.disturbed(4, rnd) == loaded
    # Nothing to judge against: no ceiling at the concurrency, no server figure.
    assert not found.disturbed(8, rnd)
    assert not found.disturbed(4, [result(1.0, None)])


def test_a_slow_null_server_start_leaves_the_rounds_their_budget() -> None:
    # A loaded machine: the null server takes longer to start than the rounds' budget.
    clock = Clock()

    @contextlib.contextmanager
    def slow_server(deadline: float) -> Iterator[str]:
        assert deadline - clock.now >= calibration.START_S
        clock.now += 5.0
        yield "http://127.0.0.1:1"

    def one_round(url: str, concurrency: int, max_tokens: int) -> tuple[float, list[float]]:
        clock.now += 0.2
        return 100.0, [0.001]

    found = calibration.calibrate(
        [1, 8], 64, budget=1.0, server=slow_server, one_round=one_round, clock=clock
    )
    assert sorted(found.ceilings) == [1, 8]
    assert found.skipped == []
    assert found.seconds == pytest.approx(5.8)
