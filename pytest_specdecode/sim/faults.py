"""Injected faults (``--sim-fault``, repeatable) so clients can be tested against failures."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

FAULT_HELP = (
    "crash-on-start (exit 1 after loading), hang-on-load (never listen), die-after:N "
    "(exit after N generate requests), unhealthy (health 503 forever), "
    "slow-first-token:SECONDS, lossy (speculative output differs from greedy), lossy:RATE "
    "(a speculative reply takes a wrong token, at a large top-2 margin, with probability "
    "RATE: a drafter defect), near-tie (greedy tokens flip where the top-2 margin is tiny, "
    "per config and repeat, NONE too: BF16-like numerics), "
    "stale-config (run and report another drafter window than requested), "
    "drafter-ignores-window (flags and /server_info keep the window, the drafter runs and "
    "logs draft_window_size=None, compact_cache=False), oom-on-first-start / "
    "sigkill-on-first-start (the first start for --sim-state-file runs out of CUDA memory / "
    "is killed by SIGKILL after loading; later starts with the same file work), "
    "degenerate-drafter[:SHAPE] (speculative configs collapse into a short repeated phrase "
    "that the drafter predicts almost perfectly: accept length near the block size; NONE "
    "stays normal; SHAPE phrase (the default), cjk (one CJK character), letter (one letter) "
    "or newlines (line breaks only): what the reply repeats), "
    "window-ignored (the window is reported and logged, but acceptance collapses for tokens "
    "whose context is past it), batch-collapse (acceptance falls toward 1 token per step as "
    "more requests share a step)"
)
DEGENERATE_SHAPES = ("phrase", "cjk", "letter", "newlines")
"""What a collapsed reply repeats: a spaced phrase, or one unit with no space in it."""
_PLAIN = (
    "crash-on-start",
    "hang-on-load",
    "unhealthy",
    "lossy",
    "stale-config",
    "drafter-ignores-window",
    "oom-on-first-start",
    "sigkill-on-first-start",
    "degenerate-drafter",
    "near-tie",
    "window-ignored",
    "batch-collapse",
)
# How a first start fails (Faults.first_start), in order of precedence.
_FIRST_START = ("oom-on-first-start", "sigkill-on-first-start")
# The plain faults that switch on the field of their name (``near-tie``: ``near_tie``).
_SWITCHES = frozenset(_PLAIN) - {"lossy", *_FIRST_START}
# Faults with a value: how it is read, which values are allowed, and what is needed.
_VALUED: dict[str, tuple[Callable[[str], float], Callable[[float], bool], str]] = {
    "die-after": (int, lambda v: v >= 0, "die-after needs a count >= 0"),
    "lossy": (float, lambda v: 0 < v <= 1, "lossy:RATE needs 0 < RATE <= 1"),
    "slow-first-token": (float, lambda v: v >= 0, "slow-first-token needs SECONDS >= 0"),
}


@dataclass(frozen=True)
class Fault:
    """One parsed ``--sim-fault`` value."""

    name: str
    value: float | None = None
    shape: str | None = None  # degenerate-drafter's SHAPE


def parse_fault(text: str) -> Fault:
    """argparse ``type=`` for ``--sim-fault``."""
    name, sep, raw = text.partition(":")
    if name in _PLAIN and not sep:
        return Fault(name)
    if name == "degenerate-drafter" and sep:
        if raw in DEGENERATE_SHAPES:
            return Fault(name, shape=raw)
        raise argparse.ArgumentTypeError(
            f"degenerate-drafter's SHAPE is one of {', '.join(DEGENERATE_SHAPES)}, got {raw!r}"
        )
    if name in _VALUED and sep:
        convert, allowed, need = _VALUED[name]
        try:
            value: float | None = convert(raw)
        except ValueError:
            value = None
        if value is not None and allowed(value):
            return Fault(name, value)
        raise argparse.ArgumentTypeError(f"{need}, got {raw!r}")
    raise argparse.ArgumentTypeError(f"unknown fault {text!r}; known: {FAULT_HELP}")


@dataclass(frozen=True)
class Faults:
    """All faults of one run, resolved."""

    crash_on_start: bool = False
    hang_on_load: bool = False
    die_after: int | None = None
    unhealthy: bool = False
    slow_first_token: float = 0.0
    lossy: bool = False
    lossy_rate: float = 0.0  # lossy:RATE, of sim.numerics
    near_tie: bool = False
    stale_config: bool = False
    drafter_ignores_window: bool = False
    first_start: str | None = None  # "oom" or "sigkill": how the first start fails
    degenerate_drafter: bool = False
    degenerate_shape: str = DEGENERATE_SHAPES[0]
    window_ignored: bool = False
    batch_collapse: bool = False

    @classmethod
    def of(cls, faults: list[Fault]) -> Faults:
        """Combine parsed faults; a repeated valued fault keeps its last value."""
        names = {f.name for f in faults}
        last = {f.name: f for f in faults}
        die, slow, degenerate = (
            last.get(n) for n in ("die-after", "slow-first-token", "degenerate-drafter")
        )
        resolved = cls(
            die_after=None if die is None else int(die.value or 0),
            slow_first_token=0.0 if slow is None else float(slow.value or 0.0),
            lossy=any(f.name == "lossy" and f.value is None for f in faults),
            lossy_rate=max((f.value or 0.0 for f in faults if f.name == "lossy"), default=0.0),
            first_start=next((n.split("-", 1)[0] for n in _FIRST_START if n in names), None),
            degenerate_shape=(degenerate and degenerate.shape) or DEGENERATE_SHAPES[0],
        )
        switches: dict[str, Any] = {n.replace("-", "_"): True for n in names & _SWITCHES}
        return replace(resolved, **switches)


def stale_window(window: int | None, num_draft_tokens: int | None) -> int:
    """The window a stale server runs instead of the requested one."""
    stale = 2048 if window == 1024 else 1024
    return max(stale, num_draft_tokens or 0)


def first_start(state_file: str) -> bool:
    """Whether this is the first start for ``state_file`` (and mark it started)."""
    try:
        with open(state_file, "x", encoding="utf-8") as fh:
            fh.write("started\n")
    except FileExistsError:
        return False
    return True
