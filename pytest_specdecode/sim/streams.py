"""Delivering a sequence's steps to the client: SSE streams and whole bodies.

Each engine step becomes one SSE event. When the client falls behind, the
events queued meanwhile go out in one write (still one event per step), so
a slow client does not slow the engine down.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

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
        seq: Sequence | list[Sequence],
        produce: Callable[[Callable[[bytes], Awaitable[None]]], Awaitable[None]],
        on_done: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(media_type="text/event-stream")
        self.seqs = seq if isinstance(seq, list) else [seq]
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
                for _ in self.seqs:
                    self.on_done()

    async def _watch(self, receive: Receive) -> None:
        while True:
            message: Message = await receive()
            if message["type"] == "http.disconnect":
                for seq in self.seqs:
                    seq.cancelled = True
                    seq.queue.put_nowait(_GONE)
                return


async def pump(
    seq: Sequence,
    write: Callable[[bytes], Awaitable[None]],
    event: Events,
    metrics: Metrics,
    tail: Callable[[], bytes] = lambda: b"",
    *,
    done: bool = True,
) -> bool:
    """Write one event per engine step until the sequence ends, then ``tail()`` and [DONE].

    Returns False when the client went away. ``done=False`` leaves out
    ``[DONE]`` (several sequences share one stream, see :func:`pump_many`).
    """
    state = TextState()
    queue = seq.queue
    prev = 0
    finished = False
    while not finished:
        items = [await queue.get()]
        while not queue.empty():
            items.append(queue.get_nowait())
        parts = []
        for end, verify_ct in items:
            if end < 0:
                return False
            final = end >= seq.total
            parts.append(event(seq, state, end, verify_ct, final))
            metrics.generation_tokens += end - prev
            prev = end
            if final:
                metrics.verify_calls += verify_ct
                finished = True
                break
        if finished:
            parts.append(tail())
            if done:
                parts.append(protocol.DONE)
        await write(b"".join(parts))
    return True


async def pump_many(
    seqs: list[Sequence],
    write: Callable[[bytes], Awaitable[None]],
    events: list[Events],
    metrics: Metrics,
    tail: Callable[[], bytes],
) -> None:
    """Several choices in one stream (``n`` > 1, a list of prompts): steps interleave."""
    lock = asyncio.Lock()

    async def locked(body: bytes) -> None:
        async with lock:
            await write(body)

    pumped = await asyncio.gather(
        *(
            pump(seq, locked, event, metrics, done=False)
            for seq, event in zip(seqs, events, strict=True)
        )
    )
    if all(pumped):
        await write(tail() + protocol.DONE)


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
            state.text = bytearray(protocol.escape(stop_text).encode())
        meta = protocol.meta_info(seq, end, verify_ct, drafts_per_step, final)
        return protocol.generate_event(state, meta)

    return event


def openai_events(
    *,
    chat: bool,
    model: str,
    stop_text: str | None,
    index: int = 0,
    continuous_usage: bool = False,
) -> Events:
    """Event builder for OpenAI streaming (deltas; finish reason on the last step).

    ``continuous_usage`` (``stream_options.continuous_usage_stats``) puts the
    usage so far on every chunk, as SGLang does.
    """
    created = int(time.time())

    def event(seq: Sequence, state: TextState, end: int, verify_ct: int, final: bool) -> bytes:
        before = state.pos
        delta = state.advance(seq, end)
        finish: str | None = None
        matched: object = None
        if final:
            finish, matched = protocol.openai_finish(seq)
            if stop_text is not None:
                already = len("".join(seq.tokens.pieces[:before]))
                delta = protocol.escape(stop_text[already:])
        extra = {"usage": protocol.usage(seq.prompt_tokens, end)} if continuous_usage else None
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
            index=index,
        )

    return event
