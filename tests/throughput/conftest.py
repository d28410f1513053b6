"""Fixtures for the throughput tests: a tiny scripted HTTP server, the real simulator.

The scripted server is also the hostile SGLang server of the I/O tests: its
``Script`` can make it stream forever, send one byte at a time, send one huge
SSE line, report impossible counts, redirect, answer health slowly, or show
another identity (``/server_info`` and ``/metrics``) from a given request on.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from pytest_specdecode.throughput import aioload

from ..conftest import DFLASH, run_sim, sim_timing


@dataclass
class Script:
    """What the fake server answers; tests change it before sending requests."""

    chunk_tokens: list[int] = field(default_factory=lambda: [1, 3, 2, 4])
    verify_per_chunk: bool = True
    fail_generate: tuple[int, str] | None = None
    stream_error_after: int | None = None
    old_endpoints: bool = False
    incremental: bool = False
    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    in_flight: int = 0  # streaming /generate requests being answered now
    peak: int = 0  # the most of them at once
    lock: threading.Lock = field(default_factory=threading.Lock)
    barrier: threading.Barrier | None = None  # streams wait here until enough are in flight
    redirect: str | None = None  # /generate answers 307 to this Location
    auth: list[str | None] = field(default_factory=list)  # Authorization of each /generate
    # -- hostile modes ---------------------------------------------------
    endless: bool = False  # /generate streams events and never ends
    slow_bytes: float | None = None  # /generate body: one byte every this many seconds
    huge_line: int | None = None  # /generate streams one SSE line of this many bytes
    meta_overrides: dict[str, Any] = field(default_factory=dict)  # impossible counts
    # /generate and the OpenAI endpoints answer 200 with this error object (streamed:
    # as the event after error_after good ones).
    error_body: Any = None
    error_after: int = 0
    redirects: dict[str, str] = field(default_factory=dict)  # path -> Location (302)
    health_delay: float = 0.0  # /health_generate answers after this many seconds
    # /metrics: "gzip" gzips it when the request accepts gzip (prometheus_client, so
    # SGLang); another coding is only named in its Content-Encoding, the body plain.
    metrics_coding: str | None = None
    chars_per_token: int = 4  # the tokenizer: one token per this many characters
    context_length: int | None = None  # /generate refuses a prompt + output reaching it
    chunk_gap: float = 0.002  # /generate waits this long (on `stop`) before each event
    slow_info: float | None = None  # /server_info body: one byte every this many seconds
    slow_headers: float | None = None  # every answer's headers: one byte every this many s
    info: dict[str, Any] = field(
        default_factory=lambda: {"speculative_algorithm": "DFLASH", "launch_command": "sglang a"}
    )
    generation_tokens: float = 42.0  # sglang:generation_tokens_total
    swap_after: int | None = None  # from this /server_info request on, another server
    swapped_info: dict[str, Any] = field(
        default_factory=lambda: {"speculative_algorithm": "DFLASH", "launch_command": "sglang b"}
    )
    info_requests: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    @property
    def swapped(self) -> bool:
        return self.swap_after is not None and self.info_requests >= self.swap_after


def fake_token_count(text: str) -> int:
    """The fake server's tokenizer: one token per 4 characters, at least one."""
    return max(1, len(text) // 4)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    script: Script

    def log_message(self, format: str, *args: Any) -> None:  # quiet test output
        pass

    def _send_json(self, status: int, data: Any) -> None:
        body = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _sse(self, events: list[Any]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in events:
            self._chunk(b"data: " + json.dumps(event).encode() + b"\n\n")
            if self.script.stop.wait(self.script.chunk_gap):
                return
        self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"")

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw) if raw else None

    def _dribble(self, body: bytes, gap: float) -> None:
        """A JSON answer sent one byte every ``gap`` seconds."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        for i in range(len(body)):
            if self.script.stop.wait(gap):
                return
            self.wfile.write(body[i : i + 1])
            self.wfile.flush()

    def _redirect(self) -> bool:
        location = self.script.redirects.get(self.path)
        if location is None:
            return False
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()
        return True

    def _dribble_headers(self) -> bool:
        gap = self.script.slow_headers
        if gap is None:
            return False
        self.wfile.write(b"HTTP/1.1 200 OK\r\n")
        self.wfile.flush()
        for byte in b"X-Slow: " + b"x" * 60_000:
            if self.script.stop.wait(gap):
                break
            self.wfile.write(bytes([byte]))
            self.wfile.flush()
        return True

    def do_GET(self) -> None:
        s = self.script
        s.requests.append(("GET", self.path, None))
        if self._dribble_headers() or self._redirect():
            return
        if self.path == "/server_info" and s.old_endpoints:
            self._send_json(404, {"detail": "Not Found"})
        elif self.path in ("/server_info", "/get_server_info"):
            s.info_requests += 1
            info = s.swapped_info if s.swapped else s.info
            if s.slow_info is not None:
                self._dribble(json.dumps({**info, "pad": "x" * 100_000}).encode(), s.slow_info)
                return
            self._send_json(200, {**info, "path": self.path})
        elif self.path == "/model_info":
            self._send_json(200, {"model_path": "fake"})
        elif self.path == "/health_generate":
            if s.health_delay:
                s.stop.wait(s.health_delay)  # a server busy generating its health token
            self._send_json(200, {})
        elif self.path == "/metrics":
            # A restarted server counts from zero again.
            count = 3.0 if s.swapped else s.generation_tokens
            body = f"sglang:generation_tokens_total {count}\n".encode()
            self.send_response(200)
            accepted = (self.headers.get("Accept-Encoding") or "").lower()
            if s.metrics_coding == "gzip" and "gzip" in accepted:
                body = gzip.compress(body)  # what SGLang's exporter does when asked
            if s.metrics_coding is not None:
                self.send_header("Content-Encoding", s.metrics_coding)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self._send_json(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        s = self.script
        body = self._body()
        s.requests.append(("POST", self.path, body))
        if self._redirect():
            return
        if self.path == "/_swap":  # the test's own control: another server from now on
            s.swap_after = 0
            self._send_json(200, {})
        elif self.path == "/flush_cache":
            self._send_json(200, {"ok": True})
        elif self.path == "/generate":
            self._generate(body)
        elif self.path in ("/v1/chat/completions", "/v1/completions"):
            self._openai(body, chat=self.path.endswith("chat/completions"))
        else:
            self._send_json(404, {"detail": "Not Found"})

    def _stream_head(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _hostile_stream(self) -> bool:
        """The hostile /generate streams; False when the script asks for none."""
        s = self.script
        if s.endless:
            self._stream_head()
            n = 0
            while not s.stop.is_set():  # ends when the client hangs up (a write fails)
                n += 1
                meta = {"completion_tokens": n, "prompt_tokens": 1}
                self._chunk(
                    b"data: " + json.dumps({"text": "t", "meta_info": meta}).encode() + b"\n\n"
                )
                s.stop.wait(0.005)
            return True
        if s.slow_bytes is not None:
            self._stream_head()
            for byte in b"data: " + b"x" * 100_000:
                if s.stop.wait(s.slow_bytes):
                    break
                self._chunk(bytes([byte]))
            return True
        if s.huge_line is not None:
            self._stream_head()
            piece = b"x" * (1 << 16)
            self._chunk(b"data: ")
            for _ in range(s.huge_line // len(piece)):
                self._chunk(piece)
            return True
        return False

    def _generate(self, body: dict[str, Any]) -> None:
        s = self.script
        s.auth.append(self.headers.get("Authorization"))
        if s.redirect is not None:
            self.send_response(307)
            self.send_header("Location", s.redirect)
            self.send_header("Content-Length", "0")
            self.end_headers()
        if self._hostile_stream():
            return
        if s.fail_generate is not None:
            status, message = s.fail_generate
            self._send_json(status, {"error": {"message": message}})
            return
        prompt_tokens = max(1, len(body.get("text") or "") // s.chars_per_token)
        params = body["sampling_params"]
        total_asked = prompt_tokens + params["max_new_tokens"]
        if s.context_length is not None and total_asked >= s.context_length - 1:
            # SGLang's words and status for a request past the model's context.
            self._send_json(
                400,
                {
                    "error": {
                        "message": "Requested token count exceeds the model's maximum context "
                        f"length of {s.context_length} tokens. You requested a total of "
                        f"{total_asked} tokens"
                    }
                },
            )
            return
        if params["max_new_tokens"] == 0:
            self._send_json(
                200,
                {"text": "", "meta_info": {"prompt_tokens": prompt_tokens, "completion_tokens": 0}},
            )
            return
        events: list[dict[str, Any]] = []
        total, ids = 0, []
        for n, step in enumerate(s.chunk_tokens):
            if s.stream_error_after is not None and n == s.stream_error_after:
                events.append({"error": {"message": "scheduler died"}})
                break
            new_ids = list(range(total, total + step))
            total += step
            ids += new_ids
            events.append(
                {
                    "text": ("t" * step) if s.incremental else ("t" * total),
                    "output_ids": new_ids if s.incremental else list(ids),
                    "meta_info": {
                        "prompt_tokens": prompt_tokens,
                        "completion_tokens": total,
                        "spec_verify_ct": n + 1 if s.verify_per_chunk else 0,
                        "spec_accept_length": total / (n + 1),
                        "finish_reason": None
                        if n + 1 < len(s.chunk_tokens)
                        else {"type": "length", "length": total},
                        "e2e_latency": 0.01,
                        **s.meta_overrides,
                    },
                }
            )
        if s.error_body is not None:
            events = [*events[: s.error_after], s.error_body]
        if body.get("stream"):
            with s.lock:
                s.in_flight += 1
                s.peak = max(s.peak, s.in_flight)
            try:
                if s.barrier is not None:
                    s.barrier.wait(timeout=10)
                self._sse(events)
            finally:
                with s.lock:
                    s.in_flight -= 1
        else:
            self._send_json(200, events[-1])

    def _openai(self, body: dict[str, Any], *, chat: bool) -> None:
        pieces = ["Hel", "lo", " world"]
        usage = {"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9}
        if self.script.error_body is not None:
            if body.get("stream"):
                self._sse([self.script.error_body])
            else:
                self._send_json(200, self.script.error_body)
            return
        if not body.get("stream"):
            choice: dict[str, Any] = {"index": 0, "finish_reason": "stop"}
            if chat:
                choice["message"] = {"role": "assistant", "content": "".join(pieces)}
            else:
                choice["text"] = "".join(pieces)
            self._send_json(200, {"choices": [choice], "usage": usage})
            return
        events: list[Any] = []
        for i, piece in enumerate(pieces):
            last = i == len(pieces) - 1
            choice = {"index": 0, "finish_reason": "stop" if last else None}
            if chat:
                choice["delta"] = {"content": piece}
            else:
                choice["text"] = piece
            events.append({"choices": [choice], "usage": None})
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append({"choices": [], "usage": usage})
        self._sse(events)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hung up (a timeout test does on purpose) is no error of the
        # server's; socketserver would print a traceback between '-' rules into the
        # test run's output, outside any test's capture.
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


@contextlib.contextmanager
def serve(script: Script | None = None) -> Iterator[tuple[str, Script]]:
    """Run the scripted server on a free loopback port: ``(base_url, script)``."""
    script = script or Script()
    handler = type("Handler", (_Handler,), {"script": script})
    server = _Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", script
    finally:
        script.stop.set()  # hostile streams end at once
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def fake_server() -> Iterator[tuple[str, Script]]:
    """A scripted SGLang-like server on loopback: ``(base_url, script)``."""
    with serve() as served:
        yield served


def _simulator(tmp_path_factory: pytest.TempPathFactory, scale: float) -> Iterator[str]:
    """The simulator (DFLASH block 8, window 2048, metrics on) ready to generate."""
    args = (*DFLASH, *sim_timing(scale=scale), "--enable-metrics")
    with run_sim(
        tmp_path_factory.mktemp("sim"), *args, fast=False, healthy="/health_generate"
    ) as sim:
        yield sim.url


@pytest.fixture(scope="session")
def sim_fast(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real simulator at time scale 0 (as fast as it can)."""
    yield from _simulator(tmp_path_factory, 0)


@pytest.fixture(scope="session")
def sim_timed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real simulator at a modest time scale, so intervals are meaningful."""
    yield from _simulator(tmp_path_factory, 0.3)


@pytest.fixture
def in_flight(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """``[now, peak]``: requests the load generator has in flight, counted client-side."""
    counts = [0, 0]
    original = aioload.stream_one

    async def counted(*args: Any) -> None:
        counts[0] += 1
        counts[1] = max(counts[1], counts[0])
        try:
            await original(*args)
        finally:
            counts[0] -= 1

    monkeypatch.setattr(aioload, "stream_one", counted)
    return counts
