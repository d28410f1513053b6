"""The event loop the load client and the simulator run on.

uvloop's where it is installed (SGLang's HTTP server runs on it): at 256
streams its callbacks cost a fraction of asyncio's, for the client reading the
streams and for the simulator writing them. asyncio's otherwise (uvloop has no
Windows build).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def new_loop() -> asyncio.AbstractEventLoop:
    """uvloop's event loop where it is installed (SGLang's server runs on it), else
    asyncio's; uvloop's callbacks cost a fraction of asyncio's at 256 streams."""
    try:
        import uvloop
    except ImportError:  # optional on platforms without it (Windows)
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


def run_on(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
    """``coro`` to completion on ``loop``; on an interrupt its tasks are cancelled
    and awaited first, so nothing of a round runs on after it."""
    try:
        return loop.run_until_complete(coro)
    except BaseException:
        _cancel_all(loop)
        raise


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))


def close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what still runs on ``loop``, finish its generators, close it."""
    try:
        _cancel_all(loop)
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()


def run_fresh(coro: Coroutine[Any, Any, T]) -> T:
    loop = new_loop()
    try:
        return run_on(loop, coro)
    finally:
        close_loop(loop)
