"""Continuous batching: every running request advances in each shared decode step.

One engine task runs the steps. A step's duration comes from the model (batch
size, contexts, prompts being prefilled) times ``time_scale``; each running
sequence then accepts a drawn number of tokens and its consumer is woken with
the step's end position. Token *content* is fixed when the sequence is
created, so speculative decoding is lossless unless the ``lossy`` fault
patches tokens at step boundaries.

A woken consumer builds and writes its event in the loop's next turn, and a
turn polls the sockets once: waking all 256 streams of a step at once made a
turn of several milliseconds, during which new requests waited in the kernel,
unread and unstamped, and the wait showed as the client's overhead. So a step
wakes its streams :data:`WAKE_PER_TURN` at a time, the sockets read in between.

The steps keep to a timeline of modelled time: a step delayed by the machine (the
process not scheduled, a slow turn) is made up by the steps after it, so the
figures are the model's whenever the machine keeps up on average.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from pytest_specdecode.sim.model import SpecModel
from pytest_specdecode.sim.numerics import Numerics
from pytest_specdecode.sim.tokenizer import Pieces

LOSSY_PIECES = (" maybe", " the", " 7", "  ", " None")
WAKE_PER_TURN = 16  # streams woken per turn of the loop: about 0.3 ms of their writes


@dataclass(slots=True, eq=False)
class Sequence:
    """One request being generated: its tokens (and their content classes), progress and
    wake-up queue."""

    rid: str
    prompt_tokens: int
    tokens: Pieces
    classes: bytes
    total: int
    finish_reason: dict[str, object]
    rng: random.Random
    created: float
    # Margins and fault marks (sim.numerics) when a fault or logprobs need them.
    numerics: Numerics | None = None
    pos: int = 0
    verify_ct: int = 0
    cancelled: bool = False
    # Verify steps by accepted drafts (SGLang's spec_correct_drafts_histogram).
    hist: list[int] = field(default_factory=list)
    # (end position, verify count) after each step; None never appears.
    queue: asyncio.Queue[tuple[int, int]] = field(default_factory=asyncio.Queue)

    @property
    def done(self) -> bool:
        """All tokens generated."""
        return self.pos >= self.total


class Engine:
    """Runs shared decode steps over all admitted sequences."""

    def __init__(
        self,
        model: SpecModel,
        time_scale: float = 1.0,
        *,
        lossy: bool = False,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.model = model
        self.time_scale = time_scale
        self.lossy = lossy and model.settings.speculative
        self.clock = clock
        self.sleep = sleep
        self.running: list[Sequence] = []
        self.waiting: list[Sequence] = []
        self._wake = asyncio.Event()
        # Server-wide running totals, like SGLang's avg_spec_accept_length.
        self.spec_tokens = 0
        self.spec_steps = 0
        self.steps = 0

    def submit(self, seq: Sequence) -> None:
        """Queue a sequence; it joins the batch at the next step."""
        if seq.total <= 0:
            seq.queue.put_nowait((0, 0))
            return
        if self.model.settings.speculative:
            seq.hist = [0] * self.model.depth
        self.waiting.append(seq)
        self._wake.set()

    @property
    def avg_accept_length(self) -> float | None:
        """Tokens per verify step over the server's lifetime (SGLang's
        ``avg_spec_accept_length``): None before the first step."""
        return self.spec_tokens / self.spec_steps if self.spec_steps else None

    async def run(self) -> None:
        """The engine loop; runs until cancelled."""
        last = self.clock()
        while True:
            if not self.running and not self.waiting:
                self._wake.clear()
                await self._wake.wait()
                last = self.clock()
            prefill = 0
            if self.waiting:
                prefill = sum(s.prompt_tokens for s in self.waiting)
                self.running += self.waiting
                self.waiting = []
            if self.time_scale > 0:
                context = sum(s.prompt_tokens + s.pos for s in self.running)
                seconds = self.model.step_seconds(len(self.running), context, prefill)
                # The step ends at its modelled time on the engine's own timeline. Behind
                # it (the machine did not run this process for a while), the next steps
                # take no sleep until it has caught up: a busy machine delays tokens but
                # does not make the modelled GPU slower, so identical runs give the same
                # figures. Restarting the timeline at the late step instead added every
                # stall to the figures, as much as the machine's load of the moment.
                last += seconds * self.time_scale
                delay = last - self.clock()
                await self.sleep(delay if delay > 0 else 0)
            else:
                await self.sleep(0)
            await self.step()

    async def step(self) -> None:
        """Advance every running sequence by one verify step, waking their consumers
        :data:`WAKE_PER_TURN` per turn of the loop."""
        self.steps += 1
        draw = self.model.draw
        keep = []
        spec = self.model.settings.speculative
        woken = 0
        batch = sum(not seq.cancelled for seq in self.running)
        for seq in self.running:
            if seq.cancelled:
                continue
            if woken == WAKE_PER_TURN:
                await self.sleep(0)
                woken = 0
            woken += 1
            pos = seq.pos
            n = draw(seq.rng, seq.classes[pos], seq.prompt_tokens + pos, batch)
            end = min(pos + n, seq.total)
            if self.lossy and end - pos >= 3:
                # A buggy verifier: the last token of a long acceptance is wrong.
                seq.tokens.replace(end - 1, seq.rng.choice(LOSSY_PIECES))
            seq.pos = end
            seq.verify_ct += 1
            if spec:
                self.spec_tokens += end - pos
                self.spec_steps += 1
                seq.hist[end - pos - 1] += 1
            seq.queue.put_nowait((end, seq.verify_ct))
            if end < seq.total:
                keep.append(seq)
        self.running = keep
