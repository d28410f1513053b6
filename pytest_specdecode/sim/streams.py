"""Delivering a sequence's steps to the client: SSE streams and whole bodies.

Each engine step becomes one SSE event. When the client falls behind, the
events queued meanwhile go out in one write (still one event per step), so
a slow client does not slow the engine down.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from pytest_specdecode.sim import protocol
from pytest_specdecode.sim.metrics import Metrics
from pytest_specdecode.sim.protocol import TextState
from pytest_specdecode.sim.scheduler import Sequence

# Pushed into a sequence's queue when its client went away.
_GONE = (-1, -1)

Events = Callable[[Sequence, TextState, int, int, bool], bytes]


class SSEResponse(Response):
    """A ``text/event-stream`` response written by ``produce(send)``; watches for disconnects."""

    def __init__(
        self,
        seq: Sequence,
        produce: Callable[[Callable[[bytes], Awaitable[None]]], Awaitable[None]],
        on_done: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(media_type="text/event-stream")
        self.seq = seq
        self.produce = produce
        self.on_done = on_done

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream; charset=utf-8"),
                    (b"cache-control", b"no-cache"),
                ],
            }
        )
        watcher = asyncio.ensure_future(self._watch(receive))

        async def write(body: bytes) -> None:
            await send({"type": "http.response.body", "body": body, "more_body": True})

        try:
            await self.produce(write)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            watcher.cancel()
            if self.on_done is not None:
                self.on_done()

    async def _watch(self, receive: Receive) -> None:
        while True:
            message: Message = await receive()
            if message["type"] == "http.disconnect":
                self.seq.cancelled = True
                self.seq.queue.put_nowait(_GONE)
                return


async def pump(
    seq: Sequence,
    write: Callable[[bytes], Awaitable[None]],
    event: Events,
    metrics: Metrics,
    tail: Callable[[], bytes] = lambda: b"",
) -> None:
    """Write one event per engine step until the sequence ends, then ``tail()`` and [DONE]."""
    state = TextState()
    queue = seq.queue
    prev = 0
    done = False
    while not done:
        items = [await queue.get()]
        while not queue.empty():
            items.append(queue.get_nowait())
        parts = []
        for end, verify_ct in items:
            if end < 0:
                return
            final = end >= seq.total
            parts.append(event(seq, state, end, verify_ct, final))
            metrics.generation_tokens += end - prev
            prev = end
            if final:
                metrics.verify_calls += verify_ct
                done = True
                break
        if done:
            parts.append(tail())
            parts.append(protocol.DONE)
        await write(b"".join(parts))


async def collect(seq: Sequence, metrics: Metrics) -> int:
    """Wait for the whole sequence; return its verify count."""
    verify_ct = 0
    end = 0
    while end < seq.total or seq.total == 0:
        end, verify_ct = await seq.queue.get()
        if seq.total == 0:
            break
    metrics.generation_tokens += seq.total
    metrics.verify_calls += verify_ct
    return verify_ct


def final_text(seq: Sequence, stop_text: str | None) -> str:
    """The reply text (cut before a matched stop string)."""
    if stop_text is not None:
        return stop_text
    return "".join(seq.tokens.pieces[: seq.total])


def generate_events(drafts_per_step: int | None, stop_text: str | None) -> Events:
    """Event builder for native ``/generate`` streaming."""

    def event(seq: Sequence, state: TextState, end: int, verify_ct: int, final: bool) -> bytes:
        state.advance(seq, end)
        if final and stop_text is not None:
            state.text = protocol.escape(stop_text)
        meta = protocol.meta_info(seq, end, verify_ct, drafts_per_step, final)
        return protocol.generate_event(state, meta)

    return event


def openai_events(
    *,
    chat: bool,
    model: str,
    drafts_per_step: int | None,
    stop_text: str | None,
    want_details: bool,
) -> Events:
    """Event builder for OpenAI streaming (deltas; finish reason on the last step)."""
    created = int(time.time())

    def event(seq: Sequence, state: TextState, end: int, verify_ct: int, final: bool) -> bytes:
        before = state.pos
        delta = state.advance(seq, end)
        finish: str | None = None
        matched: object = None
        extra: dict[str, Any] | None = None
        if final:
            finish, matched = protocol.openai_finish(seq)
            if stop_text is not None:
                already = len("".join(seq.tokens.pieces[:before]))
                delta = protocol.escape(stop_text[already:])
            if want_details and drafts_per_step is not None:
                extra = {"sglext": sglext(end, verify_ct, drafts_per_step)}
        return protocol.openai_event(
            chat=chat,
            rid=seq.rid,
            created=created,
            model=model,
            delta_escaped=delta,
            finish=finish,
            matched=matched,
            extra=extra,
            first=before == 0,
        )

    return event


def sglext(tokens: int, verify_ct: int, drafts_per_step: int | None) -> dict[str, Any]:
    """SGLang's ``sglext`` object with ``spec_tokens_details``."""
    if drafts_per_step is None:
        return {"spec_tokens_details": None}
    return {"spec_tokens_details": protocol.spec_details(tokens, verify_ct, drafts_per_step)}
