"""Garbage collection between bursts, not in them.

CPython collects its youngest generations every few hundred allocations. In a
burst (256 requests read, prepared and started within milliseconds) that is a
collection of the second generation every few milliseconds, each one scanning
every young object of the requests in flight: 2-4 ms on two cores, during
which nothing is read, and every request arriving meanwhile would carry the
pause as the client's overhead. So the simulator's process (only it: the
plugin and the tests keep Python's collector as it is) collects when it has
nothing in flight. The objects of its start-up are frozen out of collections,
the automatic collector is off, and a collection runs when the last request
in flight ends, or after ``every`` requests without such a moment, so memory
stays bounded under continuous load too.
"""

from __future__ import annotations

import gc
import logging
import time

log = logging.getLogger("sglang.srt.sim")


class IdleCollector:
    """Collects garbage when nothing is in flight (see the module's text)."""

    def __init__(self, every: int = 4096) -> None:
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every!r}")
        self.every = every
        self.collections = 0
        self._since = 0

    def start(self) -> None:
        """Freeze what start-up made and switch the automatic collector off."""
        gc.collect()
        gc.freeze()
        gc.disable()

    def finished(self, in_flight: int) -> None:
        """A request ended, ``in_flight`` are left: collect if none, or if it is time."""
        self._since += 1
        if in_flight > 0 and self._since < self.every:
            return
        self._since = 0
        began = time.perf_counter()
        found = gc.collect()
        self.collections += 1
        log.debug(
            "gc: %d unreachable objects in %.1f ms (%d in flight)",
            found,
            (time.perf_counter() - began) * 1000,
            in_flight,
        )
