"""The speculative-decoding model: how many tokens a verify step accepts and how long it takes.

Accept length per step is a truncated geometric draw: each drafted position
is accepted with probability ``p`` given the previous one was, up to the
step's depth. ``p`` depends on the content (code and worked maths are more
predictable than conversation, conversation than summaries and filler; the
reply's content follows the prompt's kind, see :mod:`~pytest_specdecode.sim.domains`),
on DDTree's topk, and on the drafter window
against the context (the drafter was trained with a 2048-token window:
a smaller window loses context, full attention on long contexts goes out of
distribution). The step time grows with the batch, the context, the verify
budget and the draft cost, so a middle budget usually wins on tok/s.

Two faults break acceptance itself while the server reports its config as
given: ``window-ignored`` (a drafter that loses its window: tokens whose
context is past it are mostly rejected) and ``batch-collapse`` (a batching
bug: acceptance falls toward one token per step as more requests share it).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from pytest_specdecode.sim.domains import CODE, FILLER, MATH, PROSE, REPEAT, SUMMARY

TRAINED_WINDOW = 2048
# Per content class. Code and worked maths are the most predictable (DFlash: 6.50
# accepted tokens on HumanEval, 4.24 on MT-Bench); summaries paraphrase, so a little
# below conversation.
BASE_ACCEPT = {PROSE: 0.72, CODE: 0.86, FILLER: 0.62, MATH: 0.84, SUMMARY: 0.70}
# A phrase repeated to the end is what a drafter predicts best, whatever the window.
REPEAT_ACCEPT = 0.995

# Seconds; a 8B-class target on one GPU, roughly.
TARGET_FIXED = 0.008
TARGET_PER_TOKEN = 0.00009
TARGET_PER_CONTEXT = 1.5e-7
DRAFT_FIXED = 0.0015
DRAFT_PER_TOKEN = 0.00006
DRAFT_PER_CONTEXT = 5e-8
DRAFT_PER_BRANCH = 0.0004
PREFILL_PER_TOKEN = 2e-5
# The faults: ``p`` times this past the window; ``p / (1 + c * (batch - 1))`` in a batch.
PAST_WINDOW_ACCEPT = 0.3
BATCH_COLLAPSE = 1.0


@dataclass(frozen=True)
class SpecSettings:
    """The resolved speculative configuration the server runs."""

    algorithm: str = "NONE"
    num_draft_tokens: int | None = None
    topk: int | None = None
    num_steps: int | None = None
    window: int | None = None
    budget: int | None = None

    @property
    def speculative(self) -> bool:
        """Whether a drafter runs at all."""
        return self.algorithm != "NONE"


class SpecModel:
    """Accept-length draws and step times for one :class:`SpecSettings`."""

    def __init__(
        self, settings: SpecSettings, *, window_ignored: bool = False, batch_collapse: bool = False
    ) -> None:
        self.settings = settings
        self.window_ignored = window_ignored and settings.window is not None
        self.batch_collapse = batch_collapse
        s = settings
        k = s.num_draft_tokens or 1
        topk = max(1, s.topk or 1)
        if s.algorithm == "NONE":
            self.depth, self.verify_tokens, self.branch_gain = 1, 1, 0.0
        elif s.algorithm == "DDTREE":
            budget = s.budget or k
            # A wider tree covers fewer positions for the same node budget.
            self.depth = max(1, min(k, budget // topk + 1))
            self.verify_tokens = budget
            self.branch_gain = 1.0 - 0.5 ** (topk - 1)
        elif s.algorithm == "EAGLE":
            steps = s.num_steps or 3
            self.depth = max(1, min(k, steps + 1))
            self.verify_tokens = k
            self.branch_gain = 1.0 - 0.5 ** (topk - 1)
        else:  # DFLASH: one block of k positions, topk is always 1
            self.depth, self.verify_tokens, self.branch_gain = k, k, 0.0
        self.topk = topk

    def window_factor(self, context: int) -> float:
        """Multiplier on acceptance from the drafter window at this context length."""
        window = self.settings.window
        seen = context if window is None else min(context, window)
        factor = 1.0
        if seen > TRAINED_WINDOW:
            factor -= 0.3 * min(1.0, (seen - TRAINED_WINDOW) / 6144)
        if window is not None and window < TRAINED_WINDOW and context > window:
            factor -= 0.25 * (1 - window / TRAINED_WINDOW) * min(1.0, (context - window) / window)
        return factor

    def accept_prob(self, content: int, context: int, batch: int = 1) -> float:
        """Probability that a drafted position is accepted (``batch``: requests in the step)."""
        if content == REPEAT:
            p = REPEAT_ACCEPT
        else:
            p = BASE_ACCEPT[content] * self.window_factor(context)
            p = min(1.0 - (1.0 - p) * (1.0 - self.branch_gain), 0.995)
        if self.window_ignored and context > (self.settings.window or 0):
            p *= PAST_WINDOW_ACCEPT
        if self.batch_collapse and batch > 1:
            p /= 1.0 + BATCH_COLLAPSE * (batch - 1)
        return p

    def expected_accept_length(self, content: int, context: int, batch: int = 1) -> float:
        """Mean tokens per verify step (including the bonus token)."""
        if self.depth == 1:
            return 1.0
        p = self.accept_prob(content, context, batch)
        return float((1 - p**self.depth) / (1 - p))

    def draw(self, rng: random.Random, content: int, context: int, batch: int = 1) -> int:
        """Tokens produced by one verify step, in ``1..depth``."""
        if self.depth == 1:
            return 1
        p = self.accept_prob(content, context, batch)
        u = 1.0 - rng.random()  # in (0, 1]
        extra = int(math.log(u) / math.log(p))
        return 1 + min(extra, self.depth - 1)

    def step_seconds(self, batch: int, context_sum: int, prefill_tokens: int = 0) -> float:
        """Modelled wall time of one decode step for ``batch`` running requests."""
        s = self.settings
        seconds = TARGET_FIXED + batch * TARGET_PER_TOKEN * self.verify_tokens
        seconds += TARGET_PER_CONTEXT * context_sum + PREFILL_PER_TOKEN * prefill_tokens
        if s.speculative:
            k = s.num_draft_tokens or 1
            avg_context = context_sum / batch if batch else 0
            seen = avg_context if s.window is None else min(avg_context, s.window)
            per_request = DRAFT_PER_TOKEN * k + DRAFT_PER_CONTEXT * seen
            per_request += DRAFT_PER_BRANCH * (self.topk - 1)
            if s.algorithm == "EAGLE":
                per_request *= s.num_steps or 3
            seconds += DRAFT_FIXED + batch * per_request
        return seconds
