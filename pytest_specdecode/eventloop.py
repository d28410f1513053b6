"""The event loop the load client and the simulator run on.

uvloop's where it is installed (SGLang's HTTP server runs on it): at 256
streams its callbacks cost a fraction of asyncio's, for the client reading the
streams and for the simulator writing them. asyncio's otherwise (uvloop has no
Windows build).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


def run_fresh(coro: Coroutine[Any, Any, T]) -> T:
    """``coro`` to completion on a new loop (uvloop's where installed), which is
    closed after it, its remaining tasks cancelled: ``asyncio.run`` with uvloop."""
    try:
        import uvloop
    except ImportError:  # optional on platforms without it (Windows)
        return asyncio.run(coro)
    result: T = uvloop.run(coro)
    return result


class TurnClock:
    """Arrival times for what one turn of the event loop handles: the first call of a
    turn reads ``clock``, later calls in the same turn get that reading again.

    A single-threaded reader handles a burst one item at a time: a stamp taken as
    each item's turn comes carries the handling of every item before it, though
    all of them were in before the first was looked at. Everything a turn handles
    came in by the read of the sockets that began the turn, so that turn's first
    reading is later than each arrival (it never stamps data before it came) and
    close to all of them. The reading is forgotten by a callback the first call
    schedules, which runs after the turn. ``limit`` bounds the calls one reading
    serves: libuv reads 1024 ready sockets per poll and polls again at once when
    there were that many, so a turn's later reads could be newer than its first.
    """

    __slots__ = ("_at", "_clock", "_left", "_limit")

    def __init__(self, clock: Callable[[], float], limit: int = 1000) -> None:
        self._clock = clock
        self._limit = limit
        self._at: float | None = None
        self._left = 0

    def __call__(self) -> float:
        at = self._at
        if at is None or self._left <= 0:
            at = self._at = self._clock()
            self._left = self._limit
            asyncio.get_running_loop().call_soon(self._forget)
        self._left -= 1
        return at

    def _forget(self) -> None:
        self._at = None


@contextlib.contextmanager
def never_sleeping() -> Iterator[None]:
    """While the block runs, the running loop polls its sockets without sleeping.

    A loop with nothing to do sleeps in the kernel until a socket is readable,
    and waking a sleeping process takes 0.2 to 2 ms on a virtual machine
    (measured on the two-core machine this project is developed on, for 16
    small messages between two processes): every read after such a sleep would carry it in
    its TTFT, ITL and e2e. So a callback is ready at every turn, and each poll
    returns at once. It costs a core while the block runs: the load client
    uses it for its rounds only, and only against a server on another machine
    (a server on this one needs that core: SGLang on CPU served several times
    slower beside a polling client).
    """
    loop = asyncio.get_running_loop()
    on = True

    def turn() -> None:
        if on:
            loop.call_soon(turn)

    loop.call_soon(turn)
    try:
        yield
    finally:
        on = False
