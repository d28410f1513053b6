"""Rounds and cases against the scripted server, with a fake benchmark fixture."""

from __future__ import annotations

import itertools
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from pytest_specdecode.client import SGLangClient
from pytest_specdecode.throughput.load import (
    REMEASURES,
    RoundResult,
    ThroughputError,
    run_case,
    run_round,
)
from pytest_specdecode.throughput.workload import PromptBuilder, ThroughputCase

from .conftest import Script, fake_token_count


class FakeBenchmark:
    """Records pedantic calls and runs them like pytest-benchmark does (setup untimed)."""

    def __init__(self) -> None:
        self.extra_info: dict[str, Any] = {}
        self.calls: list[dict[str, Any]] = []

    def pedantic(
        self,
        target: Callable[..., Any],
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
        setup: Callable[[], Any] | None = None,
        teardown: Callable[..., Any] | None = None,
        rounds: int = 1,
        warmup_rounds: int = 0,
        iterations: int = 1,
    ) -> Any:
        self.calls.append({"rounds": rounds, "iterations": iterations})
        out = None
        for _ in range(rounds):
            a, k = setup() if setup else (args, kwargs or {})
            out = target(*a, **k)
        return out


CORPUS = " ".join(f"word{i}" for i in range(20_000))


def generate_bodies(script: Script) -> list[dict[str, Any]]:
    return [b for m, p, b in script.requests if p == "/generate" and b["stream"]]


def test_run_round_sends_all_prompts_at_once(fake_server: tuple[str, Script]) -> None:
    url, script = fake_server
    result = run_round(SGLangClient(url, timeout=5), ["a" * 40, "b" * 40, "c" * 40], 10)
    assert len(result.results) == 3
    assert result.errors == []
    assert all(r.completion_tokens == 10 for r in result.results)
    assert result.start <= min(r.send_time for r in result.results)
    assert result.end == max(r.end_time for r in result.results)
    assert sorted(b["text"][0] for b in generate_bodies(script)) == ["a", "b", "c"]


def test_the_client_blocks_on_its_sockets_while_a_slow_server_thinks(
    fake_server: tuple[str, Script],
) -> None:
    # A server that waits before each event (SGLang on a CPU it shares with the client):
    # the client has nothing to do meanwhile, so it must not use the CPU the server
    # needs. The bound is CPU seconds per wall second, which a loaded machine can only
    # lower (a polling loop gets less of a core there), never raise.
    url, script = fake_server
    script.chunk_gap = 0.05
    script.chunk_tokens = [1] * 8
    began_cpu, began = time.thread_time(), time.perf_counter()
    result = run_round(SGLangClient(url, timeout=5), ["a" * 40] * 4, 8, max_concurrency=2)
    cpu, wall = time.thread_time() - began_cpu, time.perf_counter() - began
    assert result.errors == []
    assert cpu / wall < 0.1, f"the client spent {cpu:.3f} CPU s in {wall:.3f} s of waiting"
    # The round records its own cost: the loop's CPU time, within what this thread spent.
    assert result.cpu_s is not None
    assert 0 <= result.cpu_s <= cpu


def test_dflash_client_wait_poll_polls_even_for_a_server_on_this_machine(
    fake_server: tuple[str, Script],
) -> None:
    # 'poll' is the loop a server on another machine gets, here on a loopback address:
    # a polled round records no CPU share (its CPU time is its waiting, not its work).
    url, script = fake_server
    script.chunk_tokens = [1] * 4
    result = run_round(SGLangClient(url, timeout=5), ["a" * 40] * 2, 4, wait="poll")
    assert result.errors == []
    assert result.cpu_s is None
    slept = run_round(SGLangClient(url, timeout=5), ["a" * 40] * 2, 4, wait="auto")
    assert slept.cpu_s is not None


def test_run_case_through_pedantic(fake_server: tuple[str, Script]) -> None:
    url, script = fake_server
    bench = FakeBenchmark()
    builder = PromptBuilder(fake_token_count, CORPUS)
    with SGLangClient(url, timeout=5) as client:
        metrics = run_case(client, ThroughputCase(50, 2, 10), 3, bench,
                           prompt_builder=builder, config="DFLASH budget=8")  # fmt: skip
    assert bench.calls == [{"rounds": 3, "iterations": 1}]
    assert metrics.rounds == 3
    assert metrics.requests == 6
    assert metrics.completion_tokens == 60
    assert metrics.accept_length == pytest.approx(10 / 4)
    assert bench.extra_info["case"] == "ctx50-c2-t10-chat"
    assert bench.extra_info["config"] == "DFLASH budget=8"
    assert bench.extra_info["tok_s"] == pytest.approx(metrics.tok_s)
    # flush first; 4 rounds x 2 requests (one warm-up) with 8 distinct prompts
    paths = [p for _, p, _ in script.requests]
    assert "/flush_cache" in paths
    assert paths.index("/flush_cache") < len(paths) - 8
    texts = [b["text"] for b in generate_bodies(script)]
    assert len(texts) == 8
    assert len(set(texts)) == 8
    assert all(abs(fake_token_count(t) - 50) <= 1 for t in texts)


def test_run_case_without_benchmark_times_rounds_itself(fake_server: tuple[str, Script]) -> None:
    url, _ = fake_server
    with SGLangClient(url, timeout=5) as client:
        builder = PromptBuilder(fake_token_count, CORPUS)
        metrics = run_case(
            client, ThroughputCase(20, 1, 10), 2, prompt_builder=builder, warmup=False
        )
    assert metrics.rounds == 2
    assert metrics.wall_time_s is not None
    assert metrics.wall_time_s > 0
    assert metrics.tok_s == pytest.approx(20 / metrics.wall_time_s)


def test_failed_request_fails_the_case_with_server_text(fake_server: tuple[str, Script]) -> None:
    url, script = fake_server
    builder = PromptBuilder(fake_token_count, CORPUS)
    script.fail_generate = (503, "Server is overloaded")
    with SGLangClient(url, timeout=5) as client, pytest.raises(ThroughputError) as info:
        run_case(client, ThroughputCase(20, 2, 10), 1, FakeBenchmark(), prompt_builder=builder)
    assert str(info.value) == (
        "2/2 requests failed in ctx20-c2-t10-chat (warm-up round): "
        "POST /generate returned 503: Server is overloaded"
    )


def test_zero_tokens_is_an_error_not_a_zero(fake_server: tuple[str, Script]) -> None:
    url, script = fake_server
    script.chunk_tokens = [0]
    result = run_round(SGLangClient(url, timeout=5), ["x" * 8], 10)
    assert result.errors == [
        "POST /generate returned 0 completion tokens (finish_reason 'length'); "
        "the server produced nothing"
    ]
    script.chunk_tokens = []
    result = run_round(SGLangClient(url, timeout=5), ["x" * 8], 10)
    assert result.errors == ["POST /generate returned 200: stream ended without any event"]


def test_arrivals_are_seeded_poisson() -> None:
    from pytest_specdecode.throughput.load import arrival_offsets

    offsets = arrival_offsets(8.0, 4000, "ctx60-r8-chat:round1")
    assert offsets == arrival_offsets(8.0, 4000, "ctx60-r8-chat:round1")
    assert offsets != arrival_offsets(8.0, 4000, "ctx60-r8-chat:round2")
    assert offsets[0] == 0.0
    assert offsets == sorted(offsets)
    assert offsets[-1] / (len(offsets) - 1) == pytest.approx(1 / 8.0, rel=0.05)


def recorder(slept: list[float]) -> Callable[[float], Awaitable[None]]:
    """An async sleep that records the arrival waits instead of sleeping."""

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    return sleep


def test_rate_round_releases_requests_at_their_arrivals_under_the_cap(
    fake_server: tuple[str, Script], in_flight: list[int]
) -> None:
    url, _ = fake_server
    slept: list[float] = []
    result = run_round(
        SGLangClient(url, timeout=5),
        ["a" * 40] * 6,
        10,
        arrivals=[0.0, 0.0, 0.0, 0.0, 0.0, 5.0],
        max_concurrency=2,
        sleep=recorder(slept),
    )
    assert len(result.results) == 6
    assert in_flight[1] == 2
    assert len(slept) == 1
    assert 4.9 < slept[0] <= 5.0
    with pytest.raises(ValueError, match="2 arrival times for 6 prompts"):
        run_round(SGLangClient(url), ["a"] * 6, 10, arrivals=[0.0, 1.0])


def test_rate_case_warms_up_at_once_then_counts_poisson_rounds(
    fake_server: tuple[str, Script],
) -> None:
    url, script = fake_server
    slept: list[float] = []
    case = ThroughputCase(20, 0, 10, rate=50.0, requests=4)
    with SGLangClient(url, timeout=5) as client:
        metrics = run_case(
            client, case, 2, FakeBenchmark(),
            prompt_builder=PromptBuilder(fake_token_count, CORPUS), sleep=recorder(slept),
        )  # fmt: skip
    assert metrics.case == "ctx20-r50-n4-t10-chat"
    assert (metrics.rate, metrics.load, metrics.requests) == (50.0, "r50", 8)
    assert len(generate_bodies(script)) == 12  # 4 warm-up + 2 rounds of 4
    assert len(slept) <= 6, "only counted rounds wait for arrivals; the first goes at once"


@pytest.mark.parametrize(
    ("busy", "sends"),
    [(0, [1, 1, 1]), (1, [2, 1, 1]), (3, [3, 2, 1]), (100, [1 + REMEASURES] * 3)],
)
def test_a_round_on_a_loaded_machine_is_measured_again_with_its_prompts(
    fake_server: tuple[str, Script], busy: int, sends: list[int]
) -> None:
    # The first `busy` rounds sent the calibration would find disturbed: each is sent
    # again (same prompt, cache flushed) until it is not, at most REMEASURES times.
    url, script = fake_server
    judged: list[RoundResult] = []

    def disturbed(rnd: RoundResult) -> bool:
        judged.append(rnd)
        return len(judged) <= busy

    builder = PromptBuilder(fake_token_count, CORPUS)
    with SGLangClient(url, timeout=5) as client:
        metrics = run_case(client, ThroughputCase(20, 1, 10), 3, FakeBenchmark(),
                           prompt_builder=builder, warmup=False, disturbed=disturbed)  # fmt: skip
    texts = [b["text"] for b in generate_bodies(script)]
    assert [len(list(same)) for _, same in itertools.groupby(texts)] == sends
    assert len(set(texts)) == 3, "a round measured again sends its own prompts again"
    assert metrics.rounds == 3
    assert metrics.remeasured == sum(sends) - 3
    paths = [p for _, p, _ in script.requests]
    assert paths.count("/flush_cache") == 1 + sum(sends) - 3
