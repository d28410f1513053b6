"""A burst of requests is stamped before it is let in and prepared (sim/admission.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.types import Message, Scope

from pytest_specdecode.sim.admission import Admission, OnePerTurn


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


def test_a_burst_enters_the_app_one_per_turn_first_come_first_served() -> None:
    events: list[tuple[str, int]] = []

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        events.append(("enter", scope["i"]))
        # The app's head runs synchronously, as routing and the body's JSON do.

    gate = OnePerTurn(app)

    async def request(i: int) -> None:
        events.append(("arrive", i))  # uvicorn's task for the request starts
        await gate({"type": "http", "i": i}, nothing, ignore)

    async def burst() -> None:
        await asyncio.gather(*(request(i) for i in range(20)))

    asyncio.run(burst())
    entries = [i for kind, i in events if kind == "enter"]
    assert entries == list(range(20)), "first come, first in"
    # All twenty have arrived before the second enters: entering yields a turn first.
    second = events.index(("enter", 1))
    assert max(n for n, (kind, _) in enumerate(events) if kind == "arrive") < second, events


def test_other_scopes_pass_the_gate_at_once() -> None:
    entered: list[str] = []

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        entered.append(scope["type"])

    async def go() -> list[str]:
        gate = OnePerTurn(app)
        waiting = [asyncio.ensure_future(gate({"type": "http"}, nothing, ignore)) for _ in range(3)]
        await asyncio.sleep(0)  # one turn: the three HTTP requests are at the gate
        await gate({"type": "lifespan"}, nothing, ignore)
        passed = list(entered)
        await asyncio.gather(*waiting)
        return passed

    assert asyncio.run(go()) == ["lifespan"]


async def nothing() -> Message:
    return {"type": "http.disconnect"}


async def ignore(message: Message) -> None:
    pass
