"""SGLangClient against a scripted loopback server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests

from pytest_specdecode.client.sglang import (
    ConnectError,
    LimitError,
    ServerError,
    SGLangClient,
    prometheus_value,
)
from pytest_specdecode.processes.children import free_port

from .conftest import Script


@pytest.fixture
def client(fake_server: tuple[str, Script]) -> Iterator[SGLangClient]:
    with SGLangClient(fake_server[0], timeout=5) as c:
        yield c


def test_streamed_generate_counts_tokens_from_meta_not_chunks(
    client: SGLangClient, fake_server: tuple[str, Script]
) -> None:
    result = client.generate("x" * 40, max_new_tokens=10, ignore_eos=True, stream=True)
    assert result.completion_tokens == 10
    assert result.chunk_tokens == [1, 3, 2, 4]
    assert len(result.chunk_times) == 4
    assert result.chunk_times == sorted(result.chunk_times)
    assert result.send_time < result.chunk_times[0] <= result.end_time
    assert result.ttft == pytest.approx(result.chunk_times[0] - result.send_time)
    assert result.text == "t" * 10
    assert result.output_ids == list(range(10))
    assert result.prompt_tokens == 10
    assert result.spec_verify_ct == 4
    assert result.finish_reason == "length"
    sent = fake_server[1].requests[-1][2]
    assert sent["sampling_params"] == {"max_new_tokens": 10, "temperature": 0.0, "ignore_eos": True}
    assert sent["stream"] is True


def test_incremental_stream_is_concatenated(
    client: SGLangClient, fake_server: tuple[str, Script]
) -> None:
    fake_server[1].incremental = True
    fake_server[1].chunk_tokens = [2, 2, 1]
    result = client.generate("abcd", max_new_tokens=5, stream=True)
    assert result.output_ids == [0, 1, 2, 3, 4]
    assert result.completion_tokens == 5


def test_stream_generate_yields_each_event_with_arrival(client: SGLangClient) -> None:
    chunks = list(client.stream_generate("abcd", max_new_tokens=10))
    assert [c.new_tokens for c in chunks] == [1, 3, 2, 4]
    assert [c.completion_tokens for c in chunks] == [1, 4, 6, 10]
    assert all(c.arrival > c.send_time for c in chunks)


def test_non_streamed_generate_is_one_chunk(client: SGLangClient) -> None:
    result = client.generate(input_ids=[1, 2, 3], max_new_tokens=10)
    assert result.completion_tokens == 10
    assert result.chunk_tokens == [10]
    assert result.e2e_latency > 0


def test_error_status_is_one_line_with_server_text(
    client: SGLangClient, fake_server: tuple[str, Script]
) -> None:
    fake_server[1].fail_generate = (
        400,
        "The input (9000 tokens) is longer than the model's context",
    )
    with pytest.raises(ServerError) as info:
        client.generate("hi", stream=True)
    assert str(info.value) == (
        "POST /generate returned 400: The input (9000 tokens) is longer than the model's context"
    )
    assert info.value.status == 400


def test_error_event_inside_stream_raises(
    client: SGLangClient, fake_server: tuple[str, Script]
) -> None:
    fake_server[1].stream_error_after = 2
    with pytest.raises(ServerError, match="POST /generate streamed an error: scheduler died"):
        client.generate("hi", stream=True)


def test_server_info_falls_back_to_old_name(
    client: SGLangClient, fake_server: tuple[str, Script]
) -> None:
    assert client.server_info()["path"] == "/server_info"
    fake_server[1].old_endpoints = True
    assert client.server_info()["path"] == "/get_server_info"


def test_info_flush_and_metrics(client: SGLangClient, fake_server: tuple[str, Script]) -> None:
    assert client.model_info() == {"model_path": "fake"}
    client.flush_cache()
    assert ("POST", "/flush_cache", None) in fake_server[1].requests
    assert "sglang:generation_tokens_total 42.0" in client.metrics_text()


def test_gzipped_metrics_are_read_decoded(
    client: SGLangClient, fake_server: tuple[str, Script]
) -> None:
    fake_server[1].metrics_coding = "gzip"
    assert client.metric_value("sglang:generation_tokens_total") == 42.0


def test_metrics_in_a_coding_the_client_cannot_decode_are_one_line(
    client: SGLangClient, fake_server: tuple[str, Script]
) -> None:
    fake_server[1].metrics_coding = "br"
    with pytest.raises(LimitError) as caught:
        client.metric_value("sglang:generation_tokens_total")
    assert str(caught.value) == (
        f"GET {fake_server[0]}/metrics sent Content-Encoding 'br', which the plugin does not "
        "decode (it asks for gzip, deflate or identity); refused"
    )


def test_count_tokens_uses_zero_token_generate(
    client: SGLangClient, fake_server: tuple[str, Script]
) -> None:
    assert client.count_tokens("x" * 400) == 100
    assert fake_server[1].requests[-1][2]["sampling_params"]["max_new_tokens"] == 0


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("chat", [False, True])
def test_openai_endpoints_take_counts_from_usage(
    client: SGLangClient, stream: bool, chat: bool
) -> None:
    if chat:
        result = client.chat([{"role": "user", "content": "hi"}], max_tokens=8, stream=stream)
    else:
        result = client.completions("hi", max_tokens=8, stream=stream)
    assert result.text == "Hello world"
    assert result.completion_tokens == 4
    assert result.prompt_tokens == 5
    assert result.usage["total_tokens"] == 9
    assert sum(result.chunk_tokens) == 4
    assert len(result.chunk_times) == (3 if stream else 1)
    assert result.finish_reason == "stop"


def test_stream_without_usage_is_an_error(client: SGLangClient) -> None:
    with pytest.raises(ServerError, match="no usage"):
        client.chat(
            [{"role": "user", "content": "hi"}],
            stream=True,
            extra={"stream_options": {"include_usage": False}},
        )


def test_refused_connection_names_the_url() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with SGLangClient(url, timeout=2) as c, pytest.raises(ConnectError) as info:
        c.server_info()
    assert f"GET {url}/server_info failed (ConnectionError)" in str(info.value)
    assert "\n" not in str(info.value)


def test_api_key_is_sent_and_given_session_is_not_closed(
    fake_server: tuple[str, Script],
) -> None:
    with requests.Session() as session:
        seen: list[str | None] = []
        session.hooks["response"].append(
            lambda r, *a, **k: seen.append(r.request.headers.get("Authorization"))
        )
        client = SGLangClient(fake_server[0], api_key="k1", session=session, timeout=5)
        client.server_info()
        client.close()
        client.close()
        assert seen == ["Bearer k1"]
        # The session still works: the client did not close what it does not own.
        assert session.get(fake_server[0] + "/model_info", timeout=5).status_code == 200


def test_prometheus_value_sums_label_sets_and_skips_prefixes() -> None:
    text = (
        "# TYPE sglang:generation_tokens_total counter\n"
        'sglang:generation_tokens_total{model_name="a"} 10.0\n'
        'sglang:generation_tokens_total{model_name="b}x"} 5 1700000000\n'
        "sglang:generation_tokens_total_created 99.0\n"
    )
    assert prometheus_value(text, "sglang:generation_tokens_total") == 15.0
    assert prometheus_value(text, "sglang:missing") is None
