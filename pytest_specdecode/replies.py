"""Whether a reply is one the server could have produced, before it becomes a figure.

A server's counts are hostile until checked: a ``completion_tokens`` above
the tokens asked would report millions of tokens per second, an accept length
of 16 under ``budget=8`` a drafter that does not exist. :func:`problems`
lists every invariant a finished request breaks, against the tokens it asked
for and the config's draft positions (:class:`DraftBounds`); :func:`check`
raises the first as :class:`ImplausibleReply`, one line naming the field and
both values. Callers run it where results turn into figures (throughput case
metrics, coding records, the lossless check) and make the violation that
case's error.

The invariants:

- ``0 <= completion_tokens <= max_new_tokens`` asked; ``prompt_tokens >= 0``;
- ``0 <= spec_verify_ct <= completion_tokens``, and ``>= 1`` when tokens came
  with speculation; without speculation (algorithm NONE) it is absent, 0 or
  one step per token;
- accept length (sent, and ``completion_tokens / spec_verify_ct``) within
  ``0 .. positions + 1``; at most 1 without speculation;
- a histogram of correct drafts per step (a list of counts) no longer than
  ``positions + 1`` (one entry without speculation), counting no more steps
  than ``spec_verify_ct``;
- timings: ``send <= chunk arrivals (in order) <= end``; the server's e2e
  latency non-negative; chunk token counts non-negative, summing to at most
  ``completion_tokens``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_specdecode.client.sglang import GenerateResult, is_int
from pytest_specdecode.config.spec import SpecConfig
from pytest_specdecode.errors import SpecDecodeError

HISTOGRAM_FIELDS = ("spec_correct_drafts_histogram", "spec_accept_histogram")

# /server_info fields that give the draft positions when the config leaves them to the server.
_POSITION_FIELDS = ("speculative_num_draft_tokens", "speculative_ddtree_budget")


class ImplausibleReply(SpecDecodeError):
    """A reply no server running the config could have sent; the message names the field."""


@dataclass(frozen=True)
class DraftBounds:
    """What a config allows per verify step.

    ``positions``: draft tokens per step (DFLASH block size, DDTree budget;
    None when unknown: no bound). ``speculative``: False for algorithm NONE,
    None when unknown.
    """

    positions: int | None = None
    speculative: bool | None = None

    @classmethod
    def of(cls, config: SpecConfig, server_info: Mapping[str, Any] | None = None) -> DraftBounds:
        """The bounds of ``config``; its positions from the server when the config has none."""
        if config.algorithm == "NONE":
            return cls(positions=0, speculative=False)
        positions = config.budget
        if positions is None and server_info is not None:
            for name in _POSITION_FIELDS:
                value = server_info.get(name)
                if is_int(value) and value > 0:
                    positions = value
                    break
        return cls(positions=positions, speculative=True)


UNKNOWN = DraftBounds()


def _finite(value: float) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def problems(result: GenerateResult, asked: int, bounds: DraftBounds = UNKNOWN) -> list[str]:
    """Every invariant ``result`` breaks, one line each (empty: plausible)."""
    found: list[str] = []
    tokens = result.completion_tokens
    if tokens < 0:
        found.append(f"completion_tokens {tokens} < 0")
    elif tokens > asked:
        found.append(f"completion_tokens {tokens} > max_new_tokens {asked} asked")
    if result.prompt_tokens < 0:
        found.append(f"prompt_tokens {result.prompt_tokens} < 0")
    found += _verify_problems(result, bounds)
    found += _histogram_problems(result, bounds)
    found += _timing_problems(result)
    return found


def _accept_limit(bounds: DraftBounds) -> float | None:
    if bounds.speculative is False:
        return 1.0
    return None if bounds.positions is None else bounds.positions + 1.0


def _verify_problems(result: GenerateResult, bounds: DraftBounds) -> list[str]:
    found: list[str] = []
    tokens, verify = result.completion_tokens, result.spec_verify_ct
    limit = _accept_limit(bounds)
    where = f" (draft positions {bounds.positions})" if bounds.speculative else " (no speculation)"
    if verify is not None:
        if verify < 0:
            found.append(f"spec_verify_ct {verify} < 0")
        elif verify > max(tokens, 0):
            found.append(f"spec_verify_ct {verify} > completion_tokens {tokens}")
        elif bounds.speculative is False and verify not in (0, tokens):
            found.append(f"spec_verify_ct {verify} != completion_tokens {tokens} (no speculation)")
        elif bounds.speculative and tokens > 0 and verify == 0:
            found.append(f"spec_verify_ct 0 < 1 with completion_tokens {tokens}")
        elif verify > 0 and limit is not None and tokens / verify > limit:
            found.append(
                f"accept length {tokens / verify:g} (completion_tokens {tokens} / spec_verify_ct "
                f"{verify}) > {limit:g}{where}"
            )
    accept = result.spec_accept_length
    if accept is not None:
        if not _finite(accept) or accept < 0:
            found.append(f"spec_accept_length {accept!r} is not a length >= 0")
        elif limit is not None and accept > limit:
            found.append(f"spec_accept_length {accept:g} > {limit:g}{where}")
    return found


def _histogram_problems(result: GenerateResult, bounds: DraftBounds) -> list[str]:
    # A histogram that is no list of counts never becomes a figure (the metrics drop
    # it); a well-formed one must fit the config. Unknown bounds: nothing to fit.
    if bounds.speculative is None:
        return []
    longest = 1 if not bounds.speculative else None
    if bounds.speculative and bounds.positions is not None:
        longest = bounds.positions + 1
    for name in HISTOGRAM_FIELDS:
        hist = result.meta_info.get(name)
        if not isinstance(hist, list) or not all(is_int(n) and n >= 0 for n in hist):
            continue
        if longest is not None and len(hist) > longest:
            return [
                f"{name} has {len(hist)} positions > {longest} "
                f"(draft positions {bounds.positions or 0} + 1)"
            ]
        verify = result.spec_verify_ct
        if verify is not None and sum(hist) > verify:
            return [f"{name} counts {sum(hist)} steps > spec_verify_ct {verify}"]
    return []


def _timing_problems(result: GenerateResult) -> list[str]:
    found: list[str] = []
    send, end = result.send_time, result.end_time
    times = result.chunk_times
    if not all(_finite(t) for t in (send, end, *times)):
        return ["timings are not finite numbers"]
    if end < send:
        found.append(f"end time {end:.6f} < send time {send:.6f}")
    if times:
        if times[0] < send:
            found.append(f"first chunk at {times[0]:.6f} < send time {send:.6f}")
        if any(b < a for a, b in itertools.pairwise(times)):
            found.append("chunk arrival times go backwards")
        if times[-1] > end:
            found.append(f"last chunk at {times[-1]:.6f} > end time {end:.6f}")
    if len(result.chunk_tokens) != len(times):
        found.append(f"{len(result.chunk_tokens)} chunk token counts for {len(times)} chunks")
    if any(n < 0 for n in result.chunk_tokens):
        found.append("a chunk carried < 0 tokens")
    elif sum(result.chunk_tokens) > max(result.completion_tokens, 0):
        found.append(
            f"chunks carried {sum(result.chunk_tokens)} tokens > completion_tokens "
            f"{result.completion_tokens}"
        )
    latency = result.server_e2e_latency
    if latency is not None and (not _finite(latency) or latency < 0):
        found.append(f"server e2e_latency {latency!r} < 0")
    return found


def check(result: GenerateResult, asked: int, bounds: DraftBounds = UNKNOWN) -> None:
    """Raise :class:`ImplausibleReply` with the first invariant ``result`` breaks."""
    found = problems(result, asked, bounds)
    if found:
        raise ImplausibleReply(f"implausible reply from the server: {found[0]}")
