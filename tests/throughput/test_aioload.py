"""The asyncio load generator: SSE splitting, bounds, modes, figures, fd limits."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_specdecode.client.limits import MAX_SSE_LINE, Limits
from pytest_specdecode.client.sglang import GenerateResult, SGLangClient
from pytest_specdecode.client.wire import LINE, RESPONSE, BoundExceeded, SSESplitter
from pytest_specdecode.throughput import fdlimit
from pytest_specdecode.throughput.accuracy import GENERATION_TOKENS
from pytest_specdecode.throughput.aioload import Request, Target, body_bytes, drive, run_sync
from pytest_specdecode.throughput.load import RequestRecord, RoundResult, run_case, run_round
from pytest_specdecode.throughput.metrics import case_metrics, extra_info
from pytest_specdecode.throughput.workload import PromptBuilder, ThroughputCase

from .conftest import Script, fake_token_count

CORPUS = " ".join(f"word{i}" for i in range(20_000))

# -- the SSE splitter ---------------------------------------------------------

payloads = st.lists(
    st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"").replace(b"\r", b"")),
    max_size=12,
)


def _stream(events: list[bytes]) -> bytes:
    # A comment line and a blank line between events, as servers send them.
    return b"".join(b"data: " + e + b"\n\n" + b": ping\n" for e in events) + b"data: [DONE]\n\n"


@given(payloads, st.lists(st.integers(min_value=0, max_value=2000), max_size=20))
@settings(max_examples=200, deadline=None)
def test_any_split_of_a_stream_gives_the_same_events(events: list[bytes], cuts: list[int]) -> None:
    raw = _stream(events)
    points = sorted({c % (len(raw) + 1) for c in cuts})
    splitter = SSESplitter(max_line=MAX_SSE_LINE)
    out: list[bytes] = []
    for a, b in zip([0, *points], [*points, len(raw)], strict=True):
        out += splitter.feed(raw[a:b])
    out += splitter.close()
    assert out == [e.strip() for e in events] + [b"[DONE]"]
    assert splitter.examined <= len(raw)


@given(
    payloads, st.integers(min_value=0, max_value=11), st.lists(st.integers(0, 4000), max_size=20)
)
@settings(max_examples=200, deadline=None)
def test_a_line_over_the_cap_stops_any_split_of_a_stream_at_it(
    events: list[bytes], at: int, cuts: list[int]
) -> None:
    # One event over the 100-byte line cap: whatever the reads, the splitter refuses
    # at it, having given only events before it (those of the refused read are not).
    at = min(at, len(events))
    events = [e[:50] for e in events]
    raw = _stream([*events[:at], b"z" * 120, *events[at:]])
    points = sorted({c % (len(raw) + 1) for c in cuts})
    splitter = SSESplitter(max_line=100)
    out: list[bytes] = []

    def feed_all() -> None:
        for a, b in zip([0, *points], [*points, len(raw)], strict=True):
            out.extend(splitter.feed(raw[a:b]))

    with pytest.raises(BoundExceeded) as info:
        feed_all()
    assert info.value.kind == LINE
    assert out == [e.strip() for e in events[: len(out)]]
    assert len(out) <= at


def test_a_last_line_without_newline_is_kept_at_close() -> None:
    splitter = SSESplitter(max_line=MAX_SSE_LINE)
    assert splitter.feed(b"data: 1\ndata: 2") == [b"1"]
    assert splitter.close() == [b"2"]


def test_a_line_over_the_cap_is_an_error_before_it_ends() -> None:
    splitter = SSESplitter(max_line=100)
    splitter.feed(b"data: " + b"x" * 90)
    with pytest.raises(
        BoundExceeded, match=r"^sent an SSE line over 100 bytes \(line cap\)$"
    ) as info:
        splitter.feed(b"x" * 20)  # no newline yet: the cap holds without one
    assert info.value.kind == LINE


def test_a_body_over_the_cap_is_an_error() -> None:
    splitter = SSESplitter(max_line=MAX_SSE_LINE, max_total=1000)
    for _ in range(62):
        splitter.feed(b"data: 123456789\n")  # 992 bytes
    with pytest.raises(
        BoundExceeded, match=r"^sent more than 1000 bytes \(response cap\)$"
    ) as info:
        splitter.feed(b"data: 123456789\n")
    assert info.value.kind == RESPONSE


def test_a_long_line_in_small_reads_is_scanned_once() -> None:
    # The quadratic habit (buffer += data; split) would search 8 MiB x 2048 reads / 2.
    splitter = SSESplitter(max_line=16 << 20)
    line = b"data: " + b"y" * (8 << 20) + b"\n"
    out: list[bytes] = []
    for i in range(0, len(line), 4096):
        out += splitter.feed(line[i : i + 4096])
    assert out == [b"y" * (8 << 20)]
    assert splitter.examined == len(line)


# -- rounds against the scripted server ------------------------------------------


def test_the_api_key_is_sent_as_a_bearer_header(fake_server: tuple[str, Script]) -> None:
    url, script = fake_server
    result = run_round(SGLangClient(url, api_key="s3cret"), ["a" * 8, "b" * 8], 10)
    assert result.errors == []
    assert script.auth == ["Bearer s3cret", "Bearer s3cret"]
    assert "s3cret" not in repr(Target(url, {"Authorization": "Bearer s3cret"}))


def test_records_match_the_requests_client(fake_server: tuple[str, Script]) -> None:
    url, script = fake_server
    script.chunk_tokens = [1, 3, 2, 4]
    (async_result,) = run_round(SGLangClient(url), ["z" * 40], 10).results
    with SGLangClient(url) as client:
        sync_result = client.generate("z" * 40, max_new_tokens=10, ignore_eos=True, stream=True)
    for name in ("text", "completion_tokens", "prompt_tokens", "finish_reason", "output_ids",
                 "chunk_tokens", "spec_verify_ct", "spec_accept_length", "server_e2e_latency",
                 "meta_info"):  # fmt: skip
        assert getattr(async_result, name) == getattr(sync_result, name), name
    assert async_result.chunk_tokens == [1, 3, 2, 4]
    assert len(async_result.chunk_times) == 4
    assert async_result.send_time < async_result.chunk_times[0] <= async_result.end_time


def test_incremental_text_is_joined(fake_server: tuple[str, Script]) -> None:
    url, script = fake_server
    script.incremental = True
    (result,) = run_round(SGLangClient(url), ["q" * 8], 10).results
    assert result.output_ids == list(range(10))
    with SGLangClient(url) as client:  # the same text rule as the requests client
        assert result.text == client.generate("q" * 8, max_new_tokens=10, stream=True).text


def test_a_redirect_is_refused_and_not_followed(fake_server: tuple[str, Script]) -> None:
    url, script = fake_server
    script.redirect = url + "/elsewhere"
    result = run_round(SGLangClient(url), ["a" * 8], 10)
    assert result.errors == [
        f"POST /generate returned 307: redirect to {url + '/elsewhere'!r} refused "
        "(redirects are never followed)"
    ]
    assert not [p for _, p, _ in script.requests if p == "/elsewhere"]


def test_an_event_over_the_line_cap_fails_the_request(fake_server: tuple[str, Script]) -> None:
    url, _ = fake_server
    req = Request(body_bytes("a" * 8, 10, temperature=0.0, ignore_eos=True), 10)
    run_sync(drive(Target(url, max_line=64), [req], clock=__import__("time").perf_counter))
    assert req.result is None
    assert req.error is not None
    assert req.error == f"POST {url}/generate sent an SSE line over 64 bytes (line cap); refused"


def test_continuous_mode_keeps_c_in_flight(
    fake_server: tuple[str, Script], in_flight: list[int]
) -> None:
    url, script = fake_server
    # Each stream waits until three are in flight: a client keeping fewer never finishes.
    script.barrier = threading.Barrier(3)
    result = run_round(SGLangClient(url), [f"p{i}" * 8 for i in range(9)], 10, max_concurrency=3)
    assert result.errors == []
    assert len(result.results) == 9
    assert in_flight[1] == 3


def test_a_continuous_case_sends_n_requests_per_round(
    fake_server: tuple[str, Script], in_flight: list[int]
) -> None:
    url, script = fake_server
    builder = PromptBuilder(fake_token_count, CORPUS)
    with SGLangClient(url) as client:
        metrics = run_case(client, ThroughputCase(20, 2, 10), 2, prompt_builder=builder,
                           continuous=6)  # fmt: skip
    assert (metrics.requests, metrics.load_mode) == (12, "continuous")
    assert in_flight[1] == 2
    bodies = [b for m, p, b in script.requests if p == "/generate" and b["stream"]]
    assert len(bodies) == 2 + 12  # a synchronized warm-up of C, then 2 rounds of 6


def test_overhead_is_client_e2e_minus_server_e2e(fake_server: tuple[str, Script]) -> None:
    url, _ = fake_server
    with SGLangClient(url) as client:
        metrics = run_case(client, ThroughputCase(20, 2, 10), 1,
                           prompt_builder=PromptBuilder(fake_token_count, CORPUS))  # fmt: skip
    assert metrics.client_overhead_ms_p50 is not None
    assert metrics.client_overhead_ms_p99 is not None
    assert metrics.e2e_ms_p50 is not None
    assert metrics.client_overhead_ms_p50 == pytest.approx(metrics.e2e_ms_p50 - 10.0, abs=1e-6)
    info = extra_info(metrics)
    assert info["client_overhead_ms_p99"] == metrics.client_overhead_ms_p99


def _result(e2e: float, server: float | None) -> GenerateResult:
    return GenerateResult("t", 4, 1, "length", 0.0, e2e, [e2e], [4], server_e2e_latency=server)


def test_overhead_percentiles_and_null_without_server_figures() -> None:
    case = ThroughputCase(20, 3, 4)
    results = [_result(1.0, 0.99), _result(1.0, 0.98), _result(1.0, 0.97)]
    rnd = RoundResult(0.0, 1.0, [RequestRecord(r) for r in results])
    m = case_metrics(case, [rnd])
    assert m.client_overhead_ms_p50 == pytest.approx(20.0)
    assert m.client_overhead_ms_p99 == pytest.approx(29.8)
    bare = RoundResult(0.0, 1.0, [RequestRecord(_result(1.0, None))])
    m = case_metrics(case, [bare])
    assert (m.client_overhead_ms_p50, m.client_overhead_ms_p99) == (None, None)


# -- deadlines against a raw socket server ------------------------------------------


@pytest.fixture
def raw_server() -> Iterator[tuple[str, list[str]]]:
    """A loopback server that answers 200 SSE headers, then stalls or streams
    comments forever, as ``mode[0]`` says ("stall" or "endless")."""
    mode = ["stall"]
    stop = threading.Event()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.05)

    def serve(conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            while not stop.is_set():
                if mode[0] == "endless":
                    try:
                        conn.sendall(b"9\r\n: ping\n\n\n\r\n")
                    except OSError:
                        return
                stop.wait(0.01)

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", mode
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def test_a_stalled_stream_ends_at_the_stall_limit(raw_server: tuple[str, list[str]]) -> None:
    url, _ = raw_server
    limits = Limits(base=5.0, per_token=0.0, stall=0.2)
    result = run_round(SGLangClient(url), ["a"], 10, limits=limits)
    (error,) = result.errors
    assert error == f"POST {url}/generate sent nothing for 0.2 s (stall limit); is the server hung?"


def test_an_endless_stream_ends_at_its_whole_deadline(raw_server: tuple[str, list[str]]) -> None:
    url, mode = raw_server
    mode[0] = "endless"
    limits = Limits(base=0.3, per_token=0.01, stall=5.0)
    result = run_round(SGLangClient(url), ["a"], 10, limits=limits)
    (error,) = result.errors
    assert error.startswith(
        f"POST {url}/generate did not finish within its whole deadline of 0.4 s for 10 tokens"
    )


# -- against the real simulator -------------------------------------------------------


def test_a_round_counts_what_the_simulator_generated(sim_fast: str) -> None:
    with SGLangClient(sim_fast) as client:
        prompts = PromptBuilder(client.count_tokens).build(60, 8)
        before = client.metric_value(GENERATION_TOKENS)
        result = run_round(client, prompts, 64)
        after = client.metric_value(GENERATION_TOKENS)
    assert result.errors == []
    assert before is not None
    assert after is not None
    assert sum(r.completion_tokens for r in result.results) == after - before == 8 * 64
    assert all(r.server_e2e_latency is not None for r in result.results)


def test_no_request_is_sent_after_the_server_received_it(sim_timed: str) -> None:
    # Both clocks are CLOCK_MONOTONIC: the client's e2e (send to last byte) holds the
    # server's (handler to last event) for every request of a burst, so the send stamp
    # is never taken after the request reached the server, nor the end before its event.
    with SGLangClient(sim_timed) as client:
        prompts = PromptBuilder(client.count_tokens).build(200, 64)
        result = run_round(client, prompts, 16)
    assert result.errors == []
    for r in result.results:
        assert r.server_e2e_latency is not None
        assert r.e2e_latency >= r.server_e2e_latency, (r.e2e_latency, r.server_e2e_latency)


# -- file descriptors -------------------------------------------------------------------


class FakeResource:
    RLIMIT_NOFILE = 7
    RLIM_INFINITY = -1

    def __init__(self, soft: int, hard: int) -> None:
        self.limits = (soft, hard)
        self.set: list[tuple[int, int]] = []

    def getrlimit(self, which: int) -> tuple[int, int]:
        return self.limits

    def setrlimit(self, which: int, value: tuple[int, int]) -> None:
        self.set.append(value)


@pytest.mark.parametrize(
    ("soft", "hard", "wanted", "expected"),
    [(1024, 4096, 1024, [(1152, 4096)]), (4096, 8192, 1024, []), (256, -1, 1024, [(1152, -1)])],
)
def test_the_soft_fd_limit_is_raised_toward_the_hard_one(
    monkeypatch: pytest.MonkeyPatch, soft: int, hard: int, wanted: int, expected: list[Any]
) -> None:
    fake = FakeResource(soft, hard)
    monkeypatch.setitem(__import__("sys").modules, "resource", fake)
    fdlimit.ensure_fds(wanted)
    assert fake.set == expected


def test_a_hard_fd_limit_too_low_is_one_line_saying_what_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(__import__("sys").modules, "resource", FakeResource(1024, 1024))
    with pytest.raises(fdlimit.FdLimitError) as info:
        fdlimit.ensure_fds(1024)
    assert str(info.value) == (
        "1024 requests in flight need about 1152 open files but the hard limit is 1024 "
        "(ulimit -Hn); raise it (ulimit -Hn 1152, or LimitNOFILE= / limits.conf nofile) "
        "or lower --dflash-concurrency"
    )


@pytest.mark.parametrize(
    ("url", "here"),
    [
        ("http://127.0.0.1:30000", True),
        ("http://127.3.4.5:30000", True),  # all of 127/8 is this machine
        ("http://[::1]:30000", True),
        ("http://localhost:30000", True),
        ("http://10.1.2.200:30000", False),
        ("http://[fe80::1]:30000", False),
        ("http://gpu1:30000", False),  # a name: the client cannot tell, it is a GPU box
    ],
)
def test_the_loop_polls_only_for_a_server_on_another_machine(url: str, here: bool) -> None:
    # Nothing is connected: the address alone decides whether a polling loop would
    # take a core from the server.
    assert Target(url).on_this_machine is here


@pytest.mark.parametrize(
    ("url", "wait", "polls"),
    [
        ("http://127.0.0.1:30000", "auto", False),
        ("http://10.1.2.200:30000", "auto", True),
        ("http://127.0.0.1:30000", "poll", True),
        ("http://10.1.2.200:30000", "sleep", False),
    ],
)
def test_dflash_client_wait_overrides_the_address(url: str, wait: str, polls: bool) -> None:
    assert Target(url, wait=wait).polls is polls
