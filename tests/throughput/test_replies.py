"""Reply plausibility (pytest_specdecode.replies), over arbitrary replies, and where it runs.

Properties: every reply a server running the config could have sent is
accepted; every accepted reply, however arbitrary, satisfies the invariants;
a reply broken in one field is refused naming that field and both values.
Then the check where replies become figures: a throughput case, the lossless
check and a coding answer against the hostile server's impossible counts.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_specdecode import replies
from pytest_specdecode.client.sglang import GenerateResult, SGLangClient
from pytest_specdecode.config.spec import SpecConfig
from pytest_specdecode.replies import DraftBounds, ImplausibleReply
from pytest_specdecode.throughput import lossless
from pytest_specdecode.throughput.load import run_case
from pytest_specdecode.throughput.workload import ThroughputCase

from .conftest import Script, serve

bounds_st = st.one_of(
    st.builds(DraftBounds, st.integers(1, 32), st.just(True)),
    st.just(DraftBounds(0, False)),
    st.just(DraftBounds()),
)


@st.composite
def plausible(draw: st.DrawFn) -> tuple[GenerateResult, int, DraftBounds]:
    """A reply a server running ``bounds`` could send for ``asked`` tokens."""
    bounds = draw(bounds_st)
    asked = draw(st.integers(0, 4096))
    tokens = draw(st.integers(0, asked))
    per_step = 1 if bounds.speculative is False else (bounds.positions or 64) + 1
    verify: int | None
    if bounds.speculative is False:
        verify = draw(st.sampled_from([None, 0, tokens]))
    elif tokens == 0:
        verify = draw(st.sampled_from([None, 0]))
    else:
        verify = draw(st.one_of(st.none(), st.integers(math.ceil(tokens / per_step), tokens)))
    accept = None if not verify else draw(st.floats(0, per_step))
    hist_len = 1 if bounds.speculative is False else per_step
    hist = draw(
        st.lists(st.integers(0, 3), max_size=hist_len).filter(lambda h: sum(h) <= (verify or 0))
    )
    send = draw(st.floats(0, 1e6))
    gaps = draw(st.lists(st.floats(0, 10), max_size=6))
    times = list(itertools.accumulate(gaps, initial=send))[1:]
    end = (times[-1] if times else send) + draw(st.floats(0, 10))
    chunk_tokens = [0] * len(times)
    if times:
        for i in range(tokens):
            chunk_tokens[i % len(times)] += 1
    result = GenerateResult(
        text="",
        completion_tokens=tokens,
        prompt_tokens=draw(st.integers(0, 10_000)),
        finish_reason="length",
        send_time=send,
        end_time=end,
        chunk_times=times,
        chunk_tokens=chunk_tokens,
        spec_verify_ct=verify,
        spec_accept_length=accept,
        server_e2e_latency=draw(st.one_of(st.none(), st.floats(0, 100))),
        meta_info={"spec_correct_drafts_histogram": hist} if hist else {},
    )
    return result, asked, bounds


@given(plausible())
def test_every_reply_the_server_could_send_is_accepted(
    case: tuple[GenerateResult, int, DraftBounds],
) -> None:
    result, asked, bounds = case
    assert replies.problems(result, asked, bounds) == []


number = st.one_of(st.integers(-5, 5000), st.floats(allow_nan=True, allow_infinity=True))


@given(
    tokens=st.integers(-10, 5000),
    asked=st.integers(0, 1000),
    verify=st.one_of(st.none(), st.integers(-5, 5000)),
    accept=st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
    hist=st.one_of(st.none(), st.lists(st.integers(0, 5), max_size=40)),
    times=st.lists(st.floats(-10, 10), max_size=5),
    send=st.floats(-10, 10),
    end=st.floats(-10, 10),
    e2e=st.one_of(st.none(), st.floats(allow_nan=True)),
    bounds=bounds_st,
)
def test_every_accepted_reply_satisfies_the_invariants(
    tokens: int,
    asked: int,
    verify: int | None,
    accept: float | None,
    hist: list[int] | None,
    times: list[float],
    send: float,
    end: float,
    e2e: float | None,
    bounds: DraftBounds,
) -> None:
    result = GenerateResult(
        text="",
        completion_tokens=tokens,
        prompt_tokens=0,
        finish_reason=None,
        send_time=send,
        end_time=end,
        chunk_times=times,
        chunk_tokens=[1] * len(times),
        spec_verify_ct=verify,
        spec_accept_length=accept,
        server_e2e_latency=e2e,
        meta_info={"spec_correct_drafts_histogram": hist} if hist is not None else {},
    )
    if replies.problems(result, asked, bounds):
        with pytest.raises(ImplausibleReply, match=r"^implausible reply from the server: "):
            replies.check(result, asked, bounds)
        return
    limit = 1 if bounds.speculative is False else (bounds.positions or math.inf) + 1
    assert 0 <= tokens <= asked
    assert verify is None or 0 <= verify <= tokens
    assert not verify or tokens / verify <= limit
    assert accept is None or 0 <= accept <= limit
    if bounds.speculative is not None and hist:
        assert len(hist) <= limit
        assert sum(hist) <= (verify if verify is not None else math.inf)
    assert send <= end
    assert all(send <= t <= end for t in times)
    assert times == sorted(times)
    assert len(times) <= max(tokens, 0)
    assert e2e is None or e2e >= 0


def base_reply() -> GenerateResult:
    return GenerateResult(
        text="",
        completion_tokens=64,
        prompt_tokens=10,
        finish_reason="length",
        send_time=1.0,
        end_time=3.0,
        chunk_times=[1.5, 2.0],
        chunk_tokens=[32, 32],
        spec_verify_ct=16,
        spec_accept_length=4.0,
        server_e2e_latency=1.9,
        meta_info={"spec_correct_drafts_histogram": [1, 2, 3, 4, 6]},
    )


B8 = DraftBounds(8, True)

BROKEN: dict[str, tuple[dict[str, Any], str]] = {
    "tokens": (
        {"completion_tokens": 100_000},
        "completion_tokens 100000 > max_new_tokens 512 asked",
    ),
    "negative": ({"completion_tokens": -1, "chunk_tokens": [0, 0]}, "completion_tokens -1 < 0"),
    "verify": ({"spec_verify_ct": 65}, "spec_verify_ct 65 > completion_tokens 64"),
    "no verify": ({"spec_verify_ct": 0}, "spec_verify_ct 0 < 1 with completion_tokens 64"),
    "accept": (
        {"spec_verify_ct": 4},
        "accept length 16 (completion_tokens 64 / spec_verify_ct 4) > 9",
    ),
    "accept sent": ({"spec_accept_length": 16.0}, "spec_accept_length 16 > 9 (draft positions 8)"),
    "histogram": (
        {"meta_info": {"spec_correct_drafts_histogram": [1] * 16}},
        "spec_correct_drafts_histogram has 16 positions > 9",
    ),
    "early chunk": ({"chunk_times": [0.5, 2.0]}, "first chunk at 0.500000 < send time 1.000000"),
    "late chunk": ({"chunk_times": [1.5, 4.0]}, "last chunk at 4.000000 > end time 3.000000"),
    "e2e": ({"server_e2e_latency": -0.5}, "server e2e_latency -0.5 < 0"),
}


@pytest.mark.parametrize("name", BROKEN)
def test_a_reply_broken_in_one_field_is_refused_naming_it_and_both_values(name: str) -> None:
    assert replies.problems(base_reply(), 512, B8) == []
    change, line = BROKEN[name]
    with pytest.raises(ImplausibleReply) as info:
        replies.check(replace(base_reply(), **change), 512, B8)
    assert line in str(info.value)


def test_without_speculation_verify_and_accept_fields_are_trivial() -> None:
    none = DraftBounds.of(SpecConfig(algorithm="NONE"))
    plain = replace(base_reply(), spec_verify_ct=None, spec_accept_length=None, meta_info={})
    assert replies.problems(plain, 512, none) == []
    assert replies.problems(replace(plain, spec_verify_ct=64), 512, none) == []
    with pytest.raises(ImplausibleReply, match=r"spec_verify_ct 16 != completion_tokens 64"):
        replies.check(replace(plain, spec_verify_ct=16), 512, none)


def test_draft_positions_come_from_the_config_else_the_server() -> None:
    assert DraftBounds.of(SpecConfig(budget=8)) == DraftBounds(8, True)
    info = {"speculative_num_draft_tokens": 16}
    assert DraftBounds.of(SpecConfig(), info) == DraftBounds(16, True)
    assert DraftBounds.of(SpecConfig()) == DraftBounds(None, True)


# --- where replies become figures -----------------------------------------------------


def test_impossible_counts_fail_the_throughput_case_and_make_no_figure() -> None:
    script = Script(meta_overrides={"completion_tokens": 100_000})
    case = ThroughputCase(60, 2, 16)
    with (
        serve(script) as (url, _),
        SGLangClient(url, timeout=5) as client,
        pytest.raises(ImplausibleReply) as info,
    ):
        run_case(client, case, 1, warmup=False, bounds=B8)
    assert "completion_tokens 100000 > max_new_tokens 16 asked" in str(info.value)


def test_a_histogram_longer_than_the_budget_fails_the_case() -> None:
    script = Script(meta_overrides={"spec_correct_drafts_histogram": [1] * 16})
    with (
        serve(script) as (url, _),
        SGLangClient(url, timeout=5) as client,
        pytest.raises(ImplausibleReply, match="has 16 positions > 9"),
    ):
        run_case(client, ThroughputCase(60, 1, 16), 1, warmup=False, bounds=B8)


def test_the_lossless_check_refuses_impossible_counts() -> None:
    script = Script(meta_overrides={"spec_verify_ct": 1000})
    with (
        serve(script) as (url, _),
        SGLangClient(url, timeout=5) as client,
        pytest.raises(ImplausibleReply, match="spec_verify_ct 1000 > completion_tokens 10"),
    ):
        lossless.collect_greedy(client, {"p": "hello"}, 16, bounds=B8)
