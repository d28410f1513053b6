"""A burst of requests is stamped before it is prepared (sim/admission.py)."""

from __future__ import annotations

import asyncio

from pytest_specdecode.sim.admission import Admission


def test_a_burst_is_stamped_before_all_but_the_first_preparation() -> None:
    events: list[tuple[str, int]] = []

    def prepare(i: int) -> int:
        events.append(("prepare", i))
        return i

    async def request(admission: Admission, i: int) -> int:
        events.append(("arrive", i))  # the handler's first statement: its stamp
        return await admission.run(lambda: prepare(i))

    async def burst() -> list[int]:
        admission = Admission()
        return await asyncio.gather(*(request(admission, i) for i in range(20)))

    assert asyncio.run(burst()) == list(range(20))
    arrivals = [n for n, (kind, _) in enumerate(events) if kind == "arrive"]
    preparations = [i for kind, i in events if kind == "prepare"]
    assert preparations == list(range(20)), "first come, first prepared"
    # Only the first request is prepared before the others have all arrived: each
    # preparation yields to the loop before the next one starts.
    second = events.index(("prepare", 1))
    assert max(arrivals) < second, events


def test_a_failing_preparation_frees_the_turn() -> None:
    async def go() -> tuple[str, int]:
        admission = Admission()

        def bad() -> int:
            raise ValueError("bad request")

        try:
            await admission.run(bad)
        except ValueError as exc:
            return str(exc), await asyncio.wait_for(admission.run(lambda: 7), 5)
        raise AssertionError("the error was lost")

    assert asyncio.run(go()) == ("bad request", 7)
