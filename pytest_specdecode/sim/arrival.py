"""When a request arrived: stamped as its bytes are read, parsed in a later turn.

``meta_info.e2e_latency`` counts from the request's arrival. SGLang stamps it
in its handler; on a GPU host its HTTP process has little else to do, so the
handler starts microseconds after the bytes are read. The simulator shares the
machine (two cores, here) with the client it is measured by, and one turn of
its loop can read a hundred requests. Parsed as they are read (uvicorn's way:
its callbacks, the scope, the app's task, about 60 microseconds each), that
turn took 6-8 ms, and the requests arriving meanwhile waited in the kernel,
unread: their wait showed as the client's overhead, though it was the server's.

So the simulator's HTTP protocol (uvicorn's httptools protocol, a few methods
more) only keeps what a read brings, with the time, and parses it later, first
come first served, for :data:`PARSE_BUDGET` per turn: the loop reads its sockets
again within a turn's work. The time goes into the request's ASGI ``state``
and the handlers count from there (:func:`received_at`). A read's first byte
was in before the poll that reported its socket returned, so a request that
begins a read gets the first reading of the loop's turn
(:class:`~pytest_specdecode.eventloop.TurnClock`): never before its bytes came.
A request that begins later in a read (pipelined behind another) may have come
in since, and gets the read's own reading. A connection holding more than
:data:`MAX_UNPARSED` bytes unparsed (a large body) is parsed at once, so
uvicorn's flow control bounds what is held. Without httptools uvicorn parses
with h11 and the handler's own time is used.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any

from starlette.requests import Request

from pytest_specdecode.eventloop import TurnClock

RECEIVED = "specdecode_received"


PARSE_BUDGET = 0.0002  # seconds of parsing per turn of the loop before it reads again
MAX_UNPARSED = 64 << 10  # bytes a connection may hold unparsed; more is parsed at once


def protocol_class() -> type[Any] | None:
    """uvicorn's httptools protocol that stamps each request's arrival as it is read
    and parses it in a later turn, or None when httptools (or that protocol) is not
    there."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        return None

    first_of_turn = TurnClock(time.monotonic)
    # Connections with data read and not yet parsed, in the order of their reads.
    unparsed: deque[StampingHttpToolsProtocol] = deque()
    draining = False

    def drain() -> None:
        """Parse what was read, first come first served, for PARSE_BUDGET; the rest
        in the next turn."""
        nonlocal draining
        until = time.monotonic() + PARSE_BUDGET
        while unparsed and time.monotonic() < until:
            unparsed.popleft()._parse_one()
        draining = bool(unparsed)
        if draining:
            asyncio.get_running_loop().call_soon(drain)

    class StampingHttpToolsProtocol(HttpToolsProtocol):
        # Each read is kept with two readings: its turn's first (its first byte was in
        # when the poll that reported the socket returned) and its own (everything in
        # it was in by then). A request that begins a read gets the first; one that
        # begins later in a read (pipelined) may have come in since, and gets the second.
        _between = True  # no request half-parsed on this connection
        _starts_read = False
        _at: tuple[float, float] = (0.0, 0.0)  # the readings of the read being parsed
        _reads: deque[tuple[bytes, float, float]] | None = None
        _held = 0  # bytes read, not yet parsed

        def data_received(self, data: bytes) -> None:
            nonlocal draining
            reads = self._reads
            if reads is None:
                reads = self._reads = deque()
            reads.append((data, first_of_turn(), time.monotonic()))
            self._held += len(data)
            if self._held > MAX_UNPARSED:
                # A large body: parsed now, so uvicorn's flow control applies to it.
                while self._reads:
                    self._parse_one()
                return
            unparsed.append(self)
            if not draining:
                draining = True
                asyncio.get_running_loop().call_soon(drain)

        def _parse_one(self) -> None:
            reads = self._reads
            if not reads or self.parser is None:  # parsed already, or connection lost
                return
            data, turn_at, read_at = reads.popleft()
            self._held -= len(data)
            self._at = (turn_at, read_at)
            self._starts_read = self._between
            super().data_received(data)

        def connection_lost(self, exc: Exception | None) -> None:
            if self._reads:
                self._reads.clear()  # requests never whole: there is no one to answer
                self._held = 0
            super().connection_lost(exc)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            at = self._at[0] if self._starts_read else self._at[1]
            self._starts_read = self._between = False
            self.scope["state"][RECEIVED] = at

        def on_message_complete(self) -> None:
            self._between = True
            super().on_message_complete()

    return StampingHttpToolsProtocol


def received_at(request: Request) -> float:
    """When ``request`` arrived: the parser's stamp, else now (the handler's start)."""
    stamp = request.scope.get("state", {}).get(RECEIVED)
    return stamp if isinstance(stamp, float) else time.monotonic()
