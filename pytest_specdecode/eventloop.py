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


def run_fresh(coro: Coroutine[Any, Any, T]) -> T:
    """``coro`` to completion on a new loop (uvloop's where installed), which is
    closed after it, its remaining tasks cancelled: ``asyncio.run`` with uvloop."""
    try:
        import uvloop
    except ImportError:  # optional on platforms without it (Windows)
        return asyncio.run(coro)
    result: T = uvloop.run(coro)
    return result
