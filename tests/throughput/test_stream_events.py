"""Folding ``/generate`` events: a cumulative stream is decoded whole only at its end."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_specdecode.client.sglang import ServerError
from pytest_specdecode.throughput.aioload import Request, _meta_count, _Read, _Stream, finish

WORDS = [f" w{i}" for i in range(40)]


def _events(steps: list[int], *, cumulative: bool) -> list[bytes]:
    out: list[bytes] = []
    done = 0
    for n in steps:
        start, done = done, done + n
        lo = 0 if cumulative else start
        meta = {"completion_tokens": done, "e2e_latency": 0.5, "spec_verify_ct": len(out) + 1}
        body = {
            "text": "".join(WORDS[lo:done]),
            "output_ids": list(range(lo, done)),
            "meta_info": meta,
        }
        out.append(orjson.dumps(body))
    return out


def _fold(events: list[bytes]) -> _Stream:
    stream = _Stream(0.0)
    for i, e in enumerate(events):
        stream.event(float(i + 1), e)
    return stream


steps = st.lists(st.integers(min_value=1, max_value=4), min_size=1, max_size=10)


@given(steps, st.booleans())
def test_cumulative_and_incremental_streams_give_the_whole_answer(
    chunks: list[int], cumulative: bool
) -> None:
    stream = _fold(_events(chunks, cumulative=cumulative))
    result = stream.result(99.0)
    total = sum(chunks)
    assert result.text == "".join(WORDS[:total])
    assert result.output_ids == list(range(total))
    assert result.completion_tokens == total
    assert result.chunk_tokens == chunks
    assert result.chunk_times == [float(i + 1) for i in range(len(chunks))]
    assert result.spec_verify_ct == len(chunks)


def test_a_cumulative_stream_decodes_two_events_and_the_last_whole() -> None:
    stream = _fold(_events([2] * 10, cumulative=True))
    assert stream.decoded == 2  # the other eight were read for their meta_info alone
    stream.result(1.0)
    assert stream.decoded == 3


def test_an_incremental_stream_decodes_every_event() -> None:
    stream = _fold(_events([2] * 10, cumulative=False))
    assert stream.decoded == 10


def test_an_error_event_after_the_cumulative_start_is_the_requests_error() -> None:
    events = _events([1, 1, 1], cumulative=True)
    events.append(b'{"error":{"message":"out of memory"},"meta_info":{"completion_tokens":4}}')
    with pytest.raises(ServerError, match="out of memory"):
        _fold(events)


def test_a_count_that_is_no_integer_after_the_start_is_an_error() -> None:
    events = _events([1, 1, 1], cumulative=True)
    events.append(b'{"text":"x","meta_info":{"completion_tokens":"4"}}')
    with pytest.raises(ServerError, match="completion_tokens is not an integer"):
        _fold(events)


@pytest.mark.parametrize(
    ("payload", "count"),
    [
        (b'{"text":"a","meta_info":{"completion_tokens":3}}', 3),
        (b'{"text":"\\"meta_info\\":{}","meta_info":{"completion_tokens":3}}', 3),
        (b'{"meta_info":{"completion_tokens":3},"text":"a"}', None),  # not last: decode whole
        (b'{"text":"a","meta_info":{"completion_tokens":true}}', None),
        (b'{"text":"a","meta_info":[1]}', None),
        (b'{"text":"a","meta_info":{"completion_tokens":3}', None),
        (b'{"error":"x","meta_info":{"completion_tokens":3}}', None),
    ],
)
def test_the_meta_only_read_falls_back_whenever_in_doubt(payload: bytes, count: int | None) -> None:
    assert _meta_count(payload) == count


# Any JSON a server could send as a stream's events: objects with the keys the fold
# reads, holding values of any type.
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(width=32)
    | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=2)
    ),
    max_leaves=6,
)
_META_KEYS = ("completion_tokens", "prompt_tokens", "e2e_latency", "spec_verify_ct",
              "spec_accept_length", "finish_reason")  # fmt: skip
hostile_meta = st.fixed_dictionaries({}, optional=dict.fromkeys(_META_KEYS, json_values))
hostile_events = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "text": json_values,
            "output_ids": json_values,
            "meta_info": json_values | hostile_meta,
        },
    ).map(orjson.dumps),
    min_size=1,
    max_size=4,
)


@pytest.mark.slow
@given(hostile_events)
def test_whatever_a_stream_holds_finishing_it_is_a_result_or_a_recorded_error(
    events: list[bytes],
) -> None:
    # The reading already refuses what it can see (a count that is no integer); what
    # it lets through is made a result after the round, and nothing may escape there.
    request = Request(b"{}", 8)
    stream = _Stream(0.0)
    try:
        for i, e in enumerate(events):
            stream.event(float(i + 1), e)
    except ServerError:
        return
    request.read = _Read(stream, 9.0)
    finish(request)
    assert request.read is None
    assert (request.result is None) != (request.error is None) or (
        request.result is not None and request.result.completion_tokens <= 0
    )
    if request.error is not None:
        assert request.error.startswith("POST /generate ")
        assert "\n" not in request.error
