"""The simulated model's top-2 margins, its numerics flips and its logprobs.

Every position of a reply has a top-2 margin (nats between the greedy token
and the runner-up), drawn from the seed and the prompt, so every server of a
seed agrees on it. Faults patch tokens up front:

- ``near-tie``: where the margin is below :data:`TIE_MARGIN` the greedy token
  may flip to the runner-up, differently per server config and per repeat of
  the prompt (NONE runs too), like BF16 numerics under another batch shape;
- ``lossy:RATE``: a speculative server's reply, with probability ``RATE``,
  takes the runner-up at one position whose margin is at least
  :data:`LARGE_MARGIN`: a drafter defect no numerics explain.

:func:`logprob_meta` answers ``return_logprob`` in SGLang's shapes from the
same margins: a flipped position reports the token it chose on top (numerics
reordered a near tie), a defect the token it should have chosen.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_specdecode.sim.tokenizer import Pieces, piece_id

TIE_MARGIN = 0.02  # a near-tie fault flips only below this (the gate's default bound is 0.05)
LARGE_MARGIN = 1.0  # a lossy defect lands only at or above this
MEAN_MARGIN = 2.0  # margins are exponential: 1% of positions under TIE_MARGIN
RUNNERS_UP = (" the", " a", " of", ",", " and", " to", " in", ".", " is", " it")
MAX_TOP = 20  # entries per position at most, whatever top_logprobs_num asks

CLEAN, FLIPPED, DEFECT = 0, 1, 2


@dataclass
class Numerics:
    """One reply's margins, runner-up and true tokens, and what faults did where."""

    margins: list[float]
    truth: list[int]
    runner_up: list[str]
    kinds: bytearray


def margins(seed: int, prompt: str, n: int) -> list[float]:
    """Top-2 margins of the first ``n`` positions of ``prompt``'s reply."""
    rng = random.Random(f"{seed}:{prompt}:margins")
    return [rng.expovariate(1 / MEAN_MARGIN) for _ in range(n)]


def apply(
    pieces: Pieces,
    total: int,
    *,
    seed: int,
    prompt: str,
    key: str,
    near_tie: bool,
    lossy_rate: float,
) -> tuple[Pieces, Numerics]:
    """Patch ``pieces`` (a copy when anything changes) for the faults; ``key`` names this
    server's config and the prompt's repeat, so another config or repeat flips elsewhere."""
    found = margins(seed, prompt, total)
    picks = random.Random(f"{seed}:{prompt}:runner-up")
    runner = [RUNNERS_UP[picks.randrange(len(RUNNERS_UP))] for _ in range(total)]
    for i in range(total):
        if runner[i] == pieces.pieces[i]:
            runner[i] = RUNNERS_UP[(RUNNERS_UP.index(runner[i]) + 1) % len(RUNNERS_UP)]
    info = Numerics(found, pieces.ids[:total], runner, bytearray(total))
    flips = random.Random(f"{seed}:{prompt}:{key}:flips")
    if near_tie:
        for i, m in enumerate(found):
            if m < TIE_MARGIN and flips.random() < 0.5:
                info.kinds[i] = FLIPPED
    if lossy_rate > 0 and flips.random() < lossy_rate:
        large = [i for i, m in enumerate(found) if m >= LARGE_MARGIN]
        if large:
            info.kinds[flips.choice(large)] = DEFECT
    if any(info.kinds):
        pieces = pieces.copy()
        for i, kind in enumerate(info.kinds):
            if kind:
                pieces.replace(i, runner[i])
    return pieces, info


def logprob_meta(info: Numerics, ids: Sequence[int], top: int) -> dict[str, Any]:
    """``output_token_logprobs`` (and ``output_top_logprobs`` when ``top`` > 0) for the
    reply's final ``ids`` (another fault may have patched more of them)."""
    tokens: list[list[Any]] = []
    tops: list[list[list[Any]]] = []
    for i, chosen in enumerate(ids):
        m = info.margins[i] if i < len(info.margins) else MEAN_MARGIN
        best = -math.log1p(math.exp(-m))
        alt = piece_id(info.runner_up[i]) if i < len(info.runner_up) else 3
        truth = info.truth[i] if i < len(info.truth) else chosen
        kind = info.kinds[i] if i < len(info.kinds) else CLEAN
        if kind == FLIPPED:
            first, second = chosen, truth  # numerics put the runner-up on top
        else:
            first = truth
            second = chosen if chosen != truth else alt
        tokens.append([best if chosen == first else best - m, chosen, None])
        if top > 0:
            row = [[best, first, None], [best - m, second, None]]
            row += [[best - m - 1.0 - j, 3 + j, None] for j in range(min(top, MAX_TOP) - 2)]
            tops.append(row[:top])
    meta: dict[str, Any] = {"output_token_logprobs": tokens}
    if top > 0:
        meta["output_top_logprobs"] = tops
    return meta
