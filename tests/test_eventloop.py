"""The event-loop helpers of the load client and the simulator (pytest_specdecode/eventloop.py)."""

from __future__ import annotations

import asyncio
import selectors
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_specdecode.eventloop import TurnClock, never_sleeping

uvloop = pytest.importorskip("uvloop")

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}


def run_on(kind: str, coro: Any) -> Any:
    loop = LOOPS[kind]()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


@pytest.mark.parametrize("kind", sorted(LOOPS))
def test_a_turn_has_one_reading_and_the_next_turn_a_new_one(kind: str) -> None:
    readings = iter(range(100))
    turn = TurnClock(lambda: float(next(readings)))

    async def go() -> list[float]:
        seen = [turn(), turn(), turn()]
        await asyncio.sleep(0)
        seen += [turn(), turn()]
        await asyncio.sleep(0)
        return [*seen, turn()]

    assert run_on(kind, go()) == [0.0, 0.0, 0.0, 1.0, 1.0, 2.0]


def test_a_reading_serves_at_most_limit_calls() -> None:
    readings = iter(range(100))
    turn = TurnClock(lambda: float(next(readings)), limit=2)

    async def go() -> list[float]:
        return [turn() for _ in range(5)]

    assert asyncio.run(go()) == [0.0, 0.0, 1.0, 1.0, 2.0]


class Stamping(asyncio.Protocol):
    """Stamps each read where the bytes are handed over, as the simulator's parser
    does: the read's first message with ``turn`` (its first byte was in when the poll
    returned), later ones in the same read with the clock itself; and hands the read
    to a coroutine, which stamps it with its own TurnClock, as the load client does."""

    def __init__(
        self, turn: TurnClock, reads: list[tuple[bytes, float]], woken: asyncio.Queue[bytes]
    ) -> None:
        self.turn = turn
        self.reads = reads
        self.woken = woken
        self.closed = asyncio.get_running_loop().create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed.set_result(None)

    def data_received(self, data: bytes) -> None:
        first, _, rest = data.partition(b";")
        self.reads.append((first + b";", self.turn()))
        if rest:
            self.reads.append((rest, time.perf_counter()))
        self.woken.put_nowait(data)


@pytest.mark.parametrize("kind", sorted(LOOPS))
@settings(max_examples=12, deadline=None)
@given(bursts=st.lists(st.integers(1, 24), min_size=1, max_size=4))
def test_no_read_is_stamped_before_its_bytes_were_sent(kind: str, bursts: list[int]) -> None:
    # Another thread writes bursts of stamped messages to many sockets; the loop
    # stamps each read in data_received and again in the coroutine it wakes, both with
    # TurnClocks. Whatever the turns hold, no stamp is before its message was written.
    sockets = max(bursts)

    async def go() -> list[tuple[float, float]]:
        loop = asyncio.get_running_loop()
        in_handler, in_coroutine = TurnClock(time.perf_counter), TurnClock(time.perf_counter)
        reads: list[tuple[bytes, float]] = []
        woken: asyncio.Queue[bytes] = asyncio.Queue()
        pairs = [socket.socketpair() for _ in range(sockets)]
        connections = [
            await loop.connect_accepted_socket(lambda: Stamping(in_handler, reads, woken), ours)
            for ours, _ in pairs
        ]
        sent: dict[bytes, float] = {}

        def writer() -> None:
            n = 0
            for burst in bursts:
                for _, theirs in pairs[:burst]:
                    msg = b"m%05d;" % n
                    sent[msg] = time.perf_counter()
                    theirs.sendall(msg)
                    n += 1

        thread = threading.Thread(target=writer)
        thread.start()
        total, got = sum(bursts), 0
        stamps: list[tuple[float, float]] = []
        while got < total:
            data = await asyncio.wait_for(woken.get(), 10)
            at = in_coroutine()
            for msg in data.split(b";")[:-1]:
                stamps.append((sent[msg + b";"], at))
                got += 1
        thread.join()
        for data, at in reads:
            stamps += [(sent[msg + b";"], at) for msg in data.split(b";")[:-1]]
        for (transport, _), (_, theirs) in zip(connections, pairs, strict=True):
            transport.close()
            theirs.close()
        await asyncio.gather(*(protocol.closed for _, protocol in connections))
        return stamps

    stamps = run_on(kind, go())
    assert len(stamps) == 2 * sum(bursts)
    late = [(written, stamped) for written, stamped in stamps if stamped < written]
    assert late == []


class RecordingSelector(selectors.DefaultSelector):
    """The loop's selector, writing down how long each poll was allowed to sleep."""

    def __init__(self) -> None:
        super().__init__()
        self.timeouts: list[float | None] = []

    def select(self, timeout: float | None = None) -> Any:
        self.timeouts.append(timeout)
        return super().select(timeout)


def test_a_never_sleeping_loop_polls_without_sleeping_only_in_the_block() -> None:
    # What the loop asks the kernel for, not how much CPU it got: a loaded machine
    # changes the second, never the first.
    selector = RecordingSelector()
    loop = asyncio.SelectorEventLoop(selector)
    polls: dict[str, list[float | None]] = {}

    async def waiting(name: str, busy: bool) -> None:
        first = len(selector.timeouts)
        if busy:
            with never_sleeping():
                await asyncio.sleep(0.2)
        else:
            await asyncio.sleep(0.2)
        polls[name] = selector.timeouts[first:]

    async def go() -> None:
        await waiting("before", False)
        await waiting("during", True)
        await waiting("after", False)

    try:
        loop.run_until_complete(go())
    finally:
        loop.close()
    # Outside the block the loop sleeps in the kernel until its timer is due.
    for name in ("before", "after"):
        assert any(t is None or t > 0.05 for t in polls[name]), (name, polls[name])
    # In it, every poll returns at once, however many turns the machine allowed.
    assert len(polls["during"]) >= 2
    assert set(polls["during"]) == {0}, polls["during"]
