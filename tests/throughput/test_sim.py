"""The client and the load generator against the real simulator (a subprocess)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pytest_specdecode.client.sglang import ServerError, SGLangClient, prometheus_value
from pytest_specdecode.throughput.accuracy import GENERATION_TOKENS, measure_round
from pytest_specdecode.throughput.load import run_case
from pytest_specdecode.throughput.workload import PromptBuilder, ThroughputCase

from .test_load import FakeBenchmark


@pytest.fixture
def fast(sim_fast: str) -> Iterator[SGLangClient]:
    with SGLangClient(sim_fast, timeout=30) as client:
        yield client


def test_info_endpoints(fast: SGLangClient) -> None:
    info = fast.server_info()
    assert info["speculative_algorithm"] == "DFLASH"
    assert info["speculative_num_draft_tokens"] == 8
    assert info["speculative_draft_window_size"] == 2048
    assert isinstance(fast.model_info(), dict)
    fast.flush_cache()
    assert prometheus_value(fast.metrics_text(), GENERATION_TOKENS) is not None


def test_streamed_512_tokens_with_ignore_eos(fast: SGLangClient) -> None:
    r = fast.generate("def parse(text):\n", max_new_tokens=512, ignore_eos=True, stream=True)
    assert r.completion_tokens == 512
    assert sum(r.chunk_tokens) == 512
    assert r.output_ids is not None
    assert len(r.output_ids) == 512
    assert r.finish_reason == "length"
    # Speculative decoding: chunks carry several tokens, so the chunk count is
    # not the token count, and accept length follows from the verify steps.
    assert max(r.chunk_tokens) > 1
    assert len(r.chunk_times) < 512
    assert r.spec_verify_ct is not None
    assert 1 < 512 / r.spec_verify_ct <= 8
    assert r.ttft is not None
    assert 0 < r.ttft <= r.e2e_latency


def test_stream_and_plain_agree_on_greedy_output(fast: SGLangClient) -> None:
    a = fast.generate("import os\n", max_new_tokens=64, stream=True)
    b = fast.generate("import os\n", max_new_tokens=64)
    assert a.output_ids == b.output_ids
    assert a.text == b.text


def test_openai_endpoints(fast: SGLangClient) -> None:
    for stream in (False, True):
        chat = fast.chat([{"role": "user", "content": "Say hi"}], max_tokens=16, stream=stream)
        assert chat.completion_tokens > 0
        assert chat.text
        comp = fast.completions("def f():", max_tokens=16, stream=stream)
        assert 0 < comp.completion_tokens <= 16


def test_bad_request_shows_server_text(fast: SGLangClient) -> None:
    with pytest.raises(ServerError) as info:
        fast.generate("x", max_new_tokens=-1)
    assert str(info.value).startswith("POST /generate returned 400: max_new_tokens must be")


def test_prompts_are_cut_to_server_token_counts(fast: SGLangClient) -> None:
    prompts = PromptBuilder(fast.count_tokens).build(1024, 4)
    for p in prompts:
        assert abs(p.tokens - 1024) <= 21
        assert fast.generate(p.text, max_new_tokens=0).prompt_tokens == p.tokens
    assert len({p.text[:200] for p in prompts}) == 4


def test_run_case_end_to_end(fast: SGLangClient) -> None:
    bench = FakeBenchmark()
    m = run_case(fast, ThroughputCase(60, 4, 64), 2, bench, config="DFLASH budget=8")
    assert m.requests == 8
    assert m.errors == 0
    assert m.completion_tokens == 8 * 64
    assert m.accept_length is not None
    assert m.accept_length > 1
    assert bench.extra_info["tokens_per_chunk_mean"] > 1


@pytest.mark.parametrize("concurrency", [1, 8, 32])
def test_reported_rate_counts_what_the_simulator_counted(sim_timed: str, concurrency: int) -> None:
    # What holds on any machine: the same tokens on both sides, and the client's round
    # inside the interval the two /metrics scrapes bracket (the same clock), so its rate
    # is never below the server's. How close the two are (within 3%) is a speed figure:
    # benchmarks/client_throughput.py holds that requirement.
    with SGLangClient(sim_timed, timeout=30) as client:
        builder = PromptBuilder(client.count_tokens)
        s = measure_round(client, ThroughputCase(60, concurrency, 512), builder)
    assert s.server_tokens == s.client_tokens == 512 * concurrency
    assert s.client_tok_s >= s.server_tok_s > 0, s
