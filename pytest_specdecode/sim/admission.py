"""Admission: requests enter one per turn of the loop, and are prepared one at a time,
sockets read in between.

A request's arrival is stamped by the HTTP parser as it begins (``sim/arrival.py``;
``meta_info.e2e_latency`` counts from there). What comes after is Python work:
the app's middleware and the handler's head (routing, the body's JSON), then
the preparation (counting the prompt's tokens, choosing and tokenizing the
reply), a few hundred microseconds in all. uvicorn starts a request's app task
when its parser has the whole request, and the tasks made from one read of the
sockets all run before the loop reads them again: for a burst of 256 that is
milliseconds during which the requests arriving meanwhile wait in the kernel,
unstamped, and the wait would show as the client's overhead. So requests enter
the app one per turn (:class:`OnePerTurn`) and each preparation runs alone
(:class:`Admission`), each followed by a turn of the loop in which it reads its
sockets: the queue is inside the server's own latency, where a real server's
tokenizer queue is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from starlette.types import ASGIApp, Receive, Scope, Send

T = TypeVar("T")


class Admission:
    """FIFO: ``await admission.run(work)`` runs ``work()`` when earlier ones are done."""

    def __init__(self) -> None:
        self._turn = asyncio.Lock()  # fair: waiters acquire it in arrival order

    async def run(self, work: Callable[[], T]) -> T:
        async with self._turn:
            result = work()
            # One turn of the loop (it polls the sockets) before the next preparation.
            await asyncio.sleep(0)
            return result


class OnePerTurn:
    """ASGI middleware: HTTP requests enter ``app`` first come, first served, one per
    turn of the event loop (other scopes pass straight through)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._entry = Admission()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._entry.run(lambda: None)
        await self.app(scope, receive, send)
