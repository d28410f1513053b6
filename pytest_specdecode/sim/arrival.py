"""When a request arrived: stamped by the HTTP parser as the request begins.

``meta_info.e2e_latency`` counts from the request's arrival. SGLang stamps it
in its handler; on a GPU host its HTTP process has little else to do, so the
handler starts microseconds after the bytes are read. The simulator shares the
machine (two cores, here) with the client it is measured by, and one read of
its sockets can bring a hundred requests, which uvicorn parses one after
another (tens of microseconds each: its callbacks, the scope, the app's task)
before any handler runs. Stamped in the handler, or as the parser reaches it,
the last of them would carry the parsing of all the others as the client's
overhead.

So the simulator's HTTP protocol (uvicorn's httptools protocol, three methods
more) notes the time in the request's ASGI ``state`` and the handlers count
from there (:func:`received_at`). Each read's first byte was in before the
first was parsed (the poll that reported them had returned), so a request that
begins a read gets the first reading of the loop's turn
(:class:`~pytest_specdecode.eventloop.TurnClock`): never before its bytes came,
and within a turn's work of them. A request that begins later in a read
(pipelined behind another) may have come in since, and is stamped as its
parser reaches it. Without httptools uvicorn parses with h11 and the handler's
own time is used.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request

from pytest_specdecode.eventloop import TurnClock

RECEIVED = "specdecode_received"


def protocol_class() -> type[Any] | None:
    """uvicorn's httptools protocol that stamps each request's arrival, or None
    when httptools (or that protocol) is not there."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        return None

    first_of_turn = TurnClock(time.monotonic)

    class StampingHttpToolsProtocol(HttpToolsProtocol):
        # A read's first byte was in when the poll that reported its socket returned,
        # so a request that begins a read gets the turn's reading; one that begins
        # later in a read (pipelined) may have come in since, and gets its own.
        _between = True  # no request half-read on this connection
        _starts_read = False

        def data_received(self, data: bytes) -> None:
            self._starts_read = self._between
            super().data_received(data)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            at = first_of_turn() if self._starts_read else time.monotonic()
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
