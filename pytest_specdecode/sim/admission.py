"""Admission: a request's preparation, one request at a time, sockets read in between.

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
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

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
