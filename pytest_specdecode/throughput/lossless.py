"""Lossless check: greedy outputs under a config must equal the baseline's.

Speculative decoding with greedy sampling must not change a single token.
Outputs are compared as token ids when both sides have them, else as text;
the report names the first index where they part and shows the neighbourhood.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_specdecode import replies, statefiles
from pytest_specdecode.client import SGLangClient

BASELINE_FORMAT = 1
_CONTEXT = 4


@dataclass(frozen=True)
class GreedyOutput:
    """The greedy output of one prompt."""

    prompt_id: str
    prompt: str
    text: str
    output_ids: tuple[int, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-able form for the baseline file."""
        return {
            "prompt_id": self.prompt_id,
            "prompt": self.prompt,
            "text": self.text,
            "output_ids": None if self.output_ids is None else list(self.output_ids),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GreedyOutput:
        """Inverse of :meth:`to_json`."""
        ids = data.get("output_ids")
        return cls(
            prompt_id=str(data["prompt_id"]),
            prompt=str(data.get("prompt", "")),
            text=str(data.get("text", "")),
            output_ids=None if ids is None else tuple(int(i) for i in ids),
        )


@dataclass(frozen=True)
class Divergence:
    """Where one prompt's output left the baseline."""

    prompt_id: str
    unit: str  # "token" or "char"
    index: int
    expected: Sequence[Any]
    actual: Sequence[Any]
    expected_len: int
    actual_len: int

    def describe(self) -> str:
        """One line: prompt, first differing index, and the items around it."""
        start = max(0, self.index - _CONTEXT)
        return (
            f"prompt {self.prompt_id!r}: first differing {self.unit} at index {self.index} "
            f"(lengths {self.expected_len} vs {self.actual_len}); "
            f"baseline[{start}:] {list(self.expected)!r} vs this config {list(self.actual)!r}"
        )


def first_difference(a: Sequence[Any], b: Sequence[Any]) -> int | None:
    """Index of the first position where ``a`` and ``b`` differ (length counts), else None."""
    for i, (x, y) in enumerate(zip(a, b)):  # noqa: B905 - lengths differ on purpose
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def compare_output(baseline: GreedyOutput, actual: GreedyOutput) -> Divergence | None:
    """Compare one prompt's outputs: ids when both have them, else text."""
    a: Sequence[Any]
    b: Sequence[Any]
    if baseline.output_ids is not None and actual.output_ids is not None:
        a, b, unit = baseline.output_ids, actual.output_ids, "token"
    else:
        a, b, unit = baseline.text, actual.text, "char"
    index = first_difference(a, b)
    if index is None:
        return None
    lo, hi = max(0, index - _CONTEXT), index + _CONTEXT + 1
    return Divergence(
        baseline.prompt_id, unit, index, list(a[lo:hi]), list(b[lo:hi]), len(a), len(b)
    )


def compare_outputs(baseline: Iterable[GreedyOutput], actual: Iterable[GreedyOutput]) -> list[str]:
    """One line per prompt that differs from (or is missing against) the baseline."""
    have = {o.prompt_id: o for o in actual}
    problems: list[str] = []
    for base in baseline:
        got = have.get(base.prompt_id)
        if got is None:
            problems.append(f"prompt {base.prompt_id!r}: no output from this config")
            continue
        div = compare_output(base, got)
        if div is not None:
            problems.append(div.describe())
    return problems


def collect_greedy(
    client: SGLangClient,
    prompts: Mapping[str, str],
    max_new_tokens: int,
    *,
    bounds: replies.DraftBounds = replies.UNKNOWN,
) -> list[GreedyOutput]:
    """Greedy (temperature 0) outputs of ``prompts`` (id -> text) from ``client``'s server;
    each reply checked against ``bounds`` first (raises ``ImplausibleReply``)."""
    outputs = []
    for prompt_id, text in prompts.items():
        result = client.generate(text, max_new_tokens=max_new_tokens, temperature=0.0)
        replies.check(result, max_new_tokens, bounds)
        ids = None if result.output_ids is None else tuple(result.output_ids)
        outputs.append(GreedyOutput(prompt_id, text, result.text, ids))
    return outputs


def save_baseline(
    path: str | Path, outputs: Iterable[GreedyOutput], *, meta: Mapping[str, Any] | None = None
) -> None:
    """Write a baseline file (JSON) with the outputs and free-form ``meta``, at once
    (a reader, another xdist worker too, never sees half of it)."""
    data = {
        "format": BASELINE_FORMAT,
        "meta": dict(meta or {}),
        "outputs": [o.to_json() for o in outputs],
    }
    statefiles.write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def load_baseline(path: str | Path) -> tuple[list[GreedyOutput], dict[str, Any]]:
    """Read a file written by :func:`save_baseline`: ``(outputs, meta)``."""
    try:
        data = statefiles.load_json(path)
        if data.get("format") != BASELINE_FORMAT:
            raise ValueError(f"format {data.get('format')!r}, expected {BASELINE_FORMAT}")
        outputs = [GreedyOutput.from_json(o) for o in data["outputs"]]
    except statefiles.FileRefused as exc:
        raise ValueError(
            f"cannot read lossless baseline {exc}; write a fresh one from a non-speculative run"
        ) from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(
            f"cannot read lossless baseline {str(path)!r}: {exc}; "
            "write a fresh one from a non-speculative run"
        ) from None
    return outputs, dict(data.get("meta") or {})
