"""When a request arrived: stamped by the HTTP parser as the request begins.

``meta_info.e2e_latency`` counts from the request's arrival. SGLang stamps it
in its handler; on a GPU host its HTTP process has little else to do, so the
handler starts microseconds after the bytes are read. The simulator shares
the machine (two cores, here) with the client it is measured by, and a burst
of 256 requests is parsed in one turn of its loop before the first handler
runs: stamped in the handler, the last request of the burst would carry the
parsing of all the others as the client's overhead. So the simulator's HTTP
protocol (uvicorn's httptools protocol, one method more) notes the time in the
request's ASGI ``state`` when its parser meets the request's first bytes, and
the handlers count from there (:func:`received_at`). Without httptools uvicorn
parses with h11 and the handler's own time is used.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request

RECEIVED = "specdecode_received"


def protocol_class() -> type[Any] | None:
    """uvicorn's httptools protocol that stamps each request's arrival, or None
    when httptools (or that protocol) is not there."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        return None

    class StampingHttpToolsProtocol(HttpToolsProtocol):
        def on_message_begin(self) -> None:
            super().on_message_begin()
            self.scope["state"][RECEIVED] = time.monotonic()

    return StampingHttpToolsProtocol


def received_at(request: Request) -> float:
    """When ``request`` arrived: the parser's stamp, else now (the handler's start)."""
    stamp = request.scope.get("state", {}).get(RECEIVED)
    return stamp if isinstance(stamp, float) else time.monotonic()
