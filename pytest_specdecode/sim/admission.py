"""Admission: requests enter one per turn of the loop, and are prepared one at a time,
sockets read in between.

A request's arrival is stamped first thing in its handler (``meta_info.e2e_latency``
counts from there, as SGLang's counts from its handler's ``received_time``). Its
preparation (counting the prompt's tokens, choosing and tokenizing the reply) is
Python work of a few hundred microseconds; done in the handler, 256 requests
arriving together would each wait for every earlier one's preparation before
their own handler could even stamp them, and that wait would show as the
client's overhead. Here each preparation runs alone and then yields one turn of
the event loop, so requests whose bytes are already in are read and stamped
before the next preparation: the queue is inside the server's own latency,
where a real server's tokenizer queue is.

The same holds one step earlier (:class:`OnePerTurn`). uvicorn starts a
request's app task when its parser has the whole request, and the tasks made
from one read of the sockets all run before the loop reads them again: the
middleware and the handler's head (routing, the body's JSON) of a hundred
requests is milliseconds, and the requests that arrive meanwhile wait in the
kernel, unstamped. Let into the app one per turn, they are read and stamped
within a turn of arriving.
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
        self._turn = asyncio.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            async with self._turn:
                await asyncio.sleep(0)  # the loop reads the sockets before the next one
        await self.app(scope, receive, send)
