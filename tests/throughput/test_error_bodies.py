"""An error object answered with HTTP 200 is the request's error, in every reply shape.

SGLang answers some failures with status 200 and an error object: streamed as
an event (native ``{"error": ...}``, OpenAI ``{"object": "error", ...}``) or as
the whole body. Each shape, streamed or not, on native ``/generate`` and both
OpenAI endpoints, through the ``requests`` client and the load generator, is an
error carrying the server's message, never a result of 0 tokens.
"""

from __future__ import annotations

import json
import time
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_specdecode.client.sglang import (
    MESSAGE_CAP,
    ServerError,
    SGLangClient,
    _generate_result,
    _openai_result,
    error_message,
)
from pytest_specdecode.throughput.aioload import (
    Request,
    Target,
    _Stream,
    body_bytes,
    drive,
    run_sync,
)

from .conftest import Script

MESSAGE = "KV cache pool is full, retry later"

SHAPES: dict[str, Any] = {
    "native": {"error": {"message": MESSAGE}},
    "native-string": {"error": MESSAGE},
    "openai": {"object": "error", "message": MESSAGE, "type": "BadRequestError", "code": 400},
    "fastapi": {"detail": MESSAGE},
    "fastapi-list": {"detail": [{"loc": ["body"], "msg": MESSAGE, "type": "value_error"}]},
}


def _call(client: SGLangClient, endpoint: str, stream: bool) -> Any:
    if endpoint == "/generate":
        return client.generate("hello there", max_new_tokens=10, stream=stream)
    if endpoint == "/v1/completions":
        return client.completions("hello there", max_tokens=10, stream=stream)
    return client.chat([{"role": "user", "content": "hi"}], max_tokens=10, stream=stream)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("endpoint", ["/generate", "/v1/completions", "/v1/chat/completions"])
def test_the_requests_client_raises_the_servers_message(
    fake_server: tuple[str, Script], shape: str, stream: bool, endpoint: str
) -> None:
    url, script = fake_server
    script.error_body = SHAPES[shape]
    with SGLangClient(url) as client, pytest.raises(ServerError) as info:
        _call(client, endpoint, stream)
    said = "streamed an error" if stream else "returned 200"
    assert str(info.value) == f"POST {endpoint} {said}: {MESSAGE}"


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("after", [0, 1, 3], ids=["first", "second", "after-cumulative"])
def test_the_load_generator_records_the_servers_message(
    fake_server: tuple[str, Script], shape: str, after: int
) -> None:
    # After two whole events a cumulative stream is read for meta_info alone.
    url, script = fake_server
    script.error_body, script.error_after = SHAPES[shape], after
    req = Request(body_bytes("a" * 8, 10, temperature=0.0, ignore_eos=True), 10)
    run_sync(drive(Target(url), [req], clock=time.perf_counter))
    assert req.result is None
    assert req.error == f"POST /generate streamed an error: {MESSAGE}"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)
error_fields = st.one_of(
    st.fixed_dictionaries({"error": json_values.filter(lambda v: v is not None)}),
    st.fixed_dictionaries({"object": st.just("error")}, optional={"message": json_values}),
    st.fixed_dictionaries({"detail": json_values.filter(lambda v: v is not None)}),
)
replies = st.builds(
    lambda extra, err: {**extra, **err},
    st.dictionaries(
        st.sampled_from(["text", "meta_info", "choices", "usage", "message", "type", "code"]),
        json_values,
        max_size=4,
    ),
    error_fields,
)


@pytest.mark.slow
@settings(max_examples=100, deadline=None)  # a busy machine is no reason to fail
@given(replies)
def test_any_object_recognised_as_an_error_becomes_an_error_result(reply: dict[str, Any]) -> None:
    message = error_message(reply)
    if message is None:  # a detail beside meta_info or choices: a result's own field
        assert "detail" in reply
        return
    assert message
    assert "\n" not in message
    assert len(message) <= MESSAGE_CAP
    with pytest.raises(ServerError, match=r"^POST /generate returned 200") as native:
        _generate_result(reply, 0.0)
    assert str(native.value).endswith(f": {message}")
    for chat in (False, True):
        with pytest.raises(ServerError) as openai:
            _openai_result(reply, 0.0, 1.0, chat=chat, path="/v1/completions")
        assert str(openai.value) == f"POST /v1/completions returned 200: {message}"
    stream = _Stream(0.0)
    with pytest.raises(ServerError) as streamed:
        stream.event(1.0, orjson.dumps(reply))
    assert str(streamed.value) == f"POST /generate streamed an error: {message}"


def test_a_long_message_is_one_capped_line() -> None:
    message = error_message({"error": {"message": "line one\nline two " + "x" * 2000}})
    assert message is not None
    assert message.startswith("line one line two x")
    assert len(message) == MESSAGE_CAP


def test_an_error_object_without_a_message_shows_the_object() -> None:
    assert error_message({"object": "error", "code": 500}) == json.dumps(
        {"object": "error", "code": 500}, separators=(",", ":")
    )
