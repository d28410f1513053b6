"""The simulator's HTTP protocol stamps a request as it is read and parses it later."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

uvicorn = pytest.importorskip("uvicorn")
pytest.importorskip("httptools")

from pytest_specdecode.sim import arrival  # noqa: E402

WORK = 0.01  # seconds each request's parsing takes here (made measurable)
BURST = 20


async def _stamp_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    body = repr(scope["state"][arrival.RECEIVED]).encode()
    headers = [(b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture
def served() -> Iterator[tuple[int, threading.Event]]:
    """A uvicorn server on the stamping protocol whose parsing of a request takes WORK;
    the event is set as the first request's parsing begins."""
    base = arrival.protocol_class()
    assert base is not None
    parsing = threading.Event()

    class SlowParsing(base):  # type: ignore[misc, valid-type]
        def on_message_begin(self) -> None:
            parsing.set()
            time.sleep(WORK)  # the parsing's work, not a wait for anything
            super().on_message_begin()

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)  # connections queue here until the server accepts them
    config = uvicorn.Config(
        _stamp_app, http=SlowParsing, lifespan="off", log_config=None, access_log=False
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])))
    thread.start()
    try:
        yield sock.getsockname()[1], parsing
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def _request() -> bytes:
    return b"GET / HTTP/1.1\r\nHost: sim\r\nConnection: close\r\n\r\n"


def _stamp(conn: socket.socket) -> float:
    reply = b""
    while chunk := conn.recv(65536):
        reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    return float(body)


def test_a_request_read_while_others_are_parsed_is_stamped_at_its_read(
    served: tuple[int, threading.Event],
) -> None:
    # A burst of BURST requests, then one more once the server is parsing the burst.
    # Parsed as read, the burst would hold the loop for BURST * WORK before the last
    # one's socket was read again; stamped at its read, it waits about one parse. The
    # bound is half the old wait: the rest is room for a machine busy with other work.
    port, parsing = served
    conns = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(BURST + 1)]
    try:
        sent = []
        for conn in conns[:BURST]:
            sent.append(time.monotonic())
            conn.sendall(_request())
        assert parsing.wait(30)
        last_sent = time.monotonic()
        conns[-1].sendall(_request())
        stamps = [_stamp(c) for c in conns]
    finally:
        for conn in conns:
            conn.close()
    # Never before its bytes were sent (one clock: CLOCK_MONOTONIC on both sides).
    assert all(at >= t for at, t in zip(stamps, [*sent, last_sent], strict=True))
    assert stamps[-1] - last_sent < BURST * WORK / 2, (stamps[-1] - last_sent, BURST * WORK)
