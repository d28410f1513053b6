"""The simulator collects garbage when nothing is in flight (sim/collector.py)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from pytest_specdecode.sim.collector import IdleCollector


@pytest.fixture
def collector() -> Iterator[IdleCollector]:
    """A started collector; Python's own collector is given back afterwards."""
    was_enabled = gc.isenabled()
    made = IdleCollector(every=5)
    made.start()
    try:
        yield made
    finally:
        gc.unfreeze()
        if was_enabled:
            gc.enable()


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def cycle() -> weakref.ref[Node]:
    """A reference cycle, garbage as soon as it is made; a weak reference to it."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_start_freezes_start_up_and_stops_the_automatic_collector(
    collector: IdleCollector,
) -> None:
    assert not gc.isenabled()
    assert gc.get_freeze_count() > 0


def test_garbage_waits_while_requests_are_in_flight(collector: IdleCollector) -> None:
    garbage = cycle()
    for left in (3, 2, 1):
        collector.finished(left)
    assert garbage() is not None, "collected while requests were in flight"
    assert collector.collections == 0


def test_the_last_request_in_flight_ending_collects(collector: IdleCollector) -> None:
    garbage = cycle()
    collector.finished(0)
    assert garbage() is None
    assert collector.collections == 1


def test_under_load_with_no_idle_moment_every_nth_request_collects(
    collector: IdleCollector,
) -> None:
    garbage = cycle()
    for _ in range(4):
        collector.finished(10)
    assert garbage() is not None
    collector.finished(10)  # the fifth
    assert garbage() is None
    assert collector.collections == 1


def test_every_must_be_positive() -> None:
    with pytest.raises(ValueError, match="every must be >= 1"):
        IdleCollector(every=0)
