"""The client against the hostile server: every request ends within its bounds.

Tiny limits keep these fast: a stream that never ends, one byte at a time, a
huge SSE line, a huge body and a redirect each end with one line naming the
bound, never after it.
"""

from __future__ import annotations

import itertools
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_specdecode.client import sglang as client_module
from pytest_specdecode.client import wire
from pytest_specdecode.client.limits import MAX_SSE_LINE, Limits
from pytest_specdecode.client.sglang import LimitError, SGLangClient

from .conftest import Script, serve


def generate(url: str, limits: Limits) -> float:
    """Stream one /generate that must fail; the seconds it took."""
    start = time.monotonic()
    with SGLangClient(url, timeout=5, limits=limits) as c:
        c.generate("hi", max_new_tokens=4, stream=True)
    return time.monotonic() - start


def test_an_endless_stream_ends_at_its_whole_deadline() -> None:
    limits = Limits(base=0.4, per_token=0.05, stall=5.0)
    with serve(Script(endless=True)) as (url, _), pytest.raises(LimitError) as info:
        generate(url, limits)
    assert info.value.kind == "deadline"
    message = str(info.value)
    assert "whole deadline (0.6 s)" in message
    assert "\n" not in message


def test_slow_bytes_within_the_stall_limit_still_end_at_the_deadline() -> None:
    # One byte every 20 ms: no read waits long, but the request as a whole does.
    limits = Limits(base=0.3, per_token=0.0, stall=5.0)
    with serve(Script(slow_bytes=0.02)) as (url, _), pytest.raises(LimitError) as info:
        generate(url, limits)
    assert info.value.kind == "deadline"


def test_headers_sent_one_byte_at_a_time_end_at_the_deadline() -> None:
    # No socket read waits long, and requests reads the headers itself: the guard
    # shuts the socket at the whole deadline.
    limits = Limits(base=0.4, per_token=0.0, stall=5.0)
    start = time.monotonic()
    with (
        serve(Script(slow_headers=0.02)) as (url, _),
        SGLangClient(url, timeout=5, limits=limits) as c,
        pytest.raises(LimitError) as info,
    ):
        c.server_info()
    assert info.value.kind == "deadline"
    # The headers would take 1,200 s (60 kB at 20 ms a byte): a bound no load reaches.
    assert time.monotonic() - start < 120


def test_silence_past_the_stall_limit_is_a_stall() -> None:
    limits = Limits(base=30.0, per_token=0.0, stall=0.2)
    with serve(Script(slow_bytes=10.0)) as (url, _), pytest.raises(LimitError) as info:
        generate(url, limits)
    assert info.value.kind == "stall"
    assert "sent nothing for 0.2 s (stall limit)" in str(info.value)


def test_a_huge_sse_line_is_refused_at_the_line_cap() -> None:
    script = Script(huge_line=MAX_SSE_LINE * 2)
    with serve(script) as (url, _), pytest.raises(LimitError) as info:
        generate(url, Limits(base=30.0, stall=10.0))
    assert info.value.kind == "line"
    assert f"an SSE line over {MAX_SSE_LINE} bytes" in str(info.value)


def test_a_body_past_the_response_cap_is_refused(
    monkeypatch: pytest.MonkeyPatch, fake_server: tuple[str, Script]
) -> None:
    monkeypatch.setattr(client_module, "MAX_RESPONSE", 16)
    with SGLangClient(fake_server[0], timeout=5) as c, pytest.raises(LimitError) as info:
        c.metrics_text()
    assert info.value.kind == "response"
    assert "more than 16 bytes (response cap)" in str(info.value)


@pytest.mark.parametrize("path", ["/server_info", "/flush_cache"])
def test_a_redirect_is_an_error_naming_the_location_without_credentials(path: str) -> None:
    script = Script()
    with serve(script) as (url, _):
        script.redirects[path] = f"{url}/get_server_info?key=s3cret".replace(
            "http://", "http://user:pa55@"
        )
        with SGLangClient(url, timeout=5) as c:
            call = c.server_info if path == "/server_info" else c.flush_cache
            with pytest.raises(LimitError) as info:
                call()
    message = str(info.value)
    assert info.value.kind == "redirect"
    assert f"answered 302 redirecting to '{url}/get_server_info?...'" in message
    assert "s3cret" not in message
    assert "pa55" not in message
    assert "user" not in message
    # Not followed: the place it pointed to was never asked.
    assert [p for _, p, _ in script.requests] == [path]


def test_the_client_session_follows_no_redirect_at_all() -> None:
    with SGLangClient("http://127.0.0.1:1") as c:
        assert c.session.max_redirects == 0


@given(
    lines=st.lists(st.binary(max_size=40).filter(lambda b: b"\n" not in b), max_size=8),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=10),
)
def test_sse_lines_do_not_depend_on_how_the_reads_split_them(
    lines: list[bytes], cuts: list[int]
) -> None:
    stream = b"".join(b"data: " + line + b"\n" for line in lines)
    points = sorted({0, len(stream), *(c for c in cuts if c < len(stream))})
    reads = [(0.0, stream[a:b]) for a, b in itertools.pairwise(points) if b > a]
    got = [payload for _, payload in wire.sse_data(iter(reads), line_cap=1 << 20)]
    assert got == [line.strip() for line in lines]


def test_sse_line_cap_holds_however_the_line_arrives() -> None:
    reads = iter([(0.0, b"data: " + b"x" * 50) for _ in range(10)])
    with pytest.raises(wire.BoundExceeded) as info:
        list(wire.sse_data(reads, line_cap=100))
    assert info.value.kind == "line"


@pytest.mark.parametrize(
    ("location", "shown"),
    [
        ("http://u:p@10.1.2.200:8/x?token=abc", "'http://10.1.2.200:8/x?...'"),
        ("https://[::1]/a", "'https://[::1]/a'"),
        ("/relative\r\nSet-Cookie: x", "'/relative%0D%0ASet-Cookie: x'"),
    ],
)
def test_scrub_location(location: str, shown: str) -> None:
    assert wire.scrub_location(location) == shown
