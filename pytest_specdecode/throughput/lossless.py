"""Lossless check, numerics-aware: a config's greedy outputs against the NONE baseline's.

On real BF16 hardware speculative decoding is not token-exact: batched
verification changes the numerics, and at a near tie the greedy token flips.
So each reply's *first* divergence from the baseline (after it the texts part
legitimately) is classified:

- ``numerics`` when the top-2 logprob margin there (the smaller of the
  baseline's and the config's, both teacher-forced by the same prefix) is below
  the bound (``--dflash-lossless-margin``), or when the baseline's own runs (one
  per batch shape) part at that very position;
- ``defect`` otherwise: no engine noise explains a token the target did not
  choose.

:class:`Verdict` counts defects over the replies with a Wilson 95% interval;
any defect fails (a lossless drafter makes none, and numerics are already set
aside). Each divergence carries the decoded text around it, both sides.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pytest_specdecode import replies, statefiles
from pytest_specdecode.client import SGLangClient
from pytest_specdecode.output import figures
from pytest_specdecode.throughput.stats import wilson_interval

BASELINE_FORMAT = 2
WINDOW = 40  # characters of decoded text shown each side of a divergence
TOP_LOGPROBS = 2  # the top-2 margin is all the classifier reads
MARGIN_CAP = 99.0  # a margin the server could not give (one entry) counts as this large
SHOWN = 3  # divergences spelled out in a check's one-line detail


@dataclass(frozen=True)
class GreedyOutput:
    """The greedy output of one prompt, with its top-2 margin per token when known."""

    prompt_id: str
    prompt: str
    text: str
    output_ids: tuple[int, ...] | None = None
    margins: tuple[float, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-able form for the baseline file."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GreedyOutput:
        """Inverse of :meth:`to_json`."""
        ids = data.get("output_ids")
        margins = data.get("margins")
        return cls(
            prompt_id=str(data["prompt_id"]),
            prompt=str(data.get("prompt", "")),
            text=str(data.get("text", "")),
            output_ids=None if ids is None else tuple(int(i) for i in ids),
            margins=None if margins is None else tuple(float(m) for m in margins),
        )


def top2_margins(top: Sequence[Sequence[tuple[float, int]]]) -> tuple[float, ...]:
    """Per position, best minus second-best logprob (:data:`MARGIN_CAP` with one entry)."""
    return tuple(
        round(min(row[0][0] - row[1][0], MARGIN_CAP), 6) if len(row) > 1 else MARGIN_CAP
        for row in top
    )


@dataclass(frozen=True)
class Divergence:
    """One reply's first divergence from the baseline, classified."""

    prompt_id: str
    unit: str  # "token" or "char"
    index: int
    kind: str  # "numerics" or "defect"
    why: str
    margin: float | None
    before: str  # decoded text just before the divergence (both sides share it)
    baseline: str  # the baseline's text from there
    actual: str  # this config's text from there

    def describe(self) -> str:
        """One line: prompt, position, verdict and why, and the text on both sides."""
        return (
            # "at index 5 of its tokens": the redactor masks a word after "token ".
            f"prompt {self.prompt_id!r} at index {self.index} of its {self.unit}s "
            f"({self.kind}: {self.why}): "
            f"after {self.before!r} the baseline wrote {self.baseline!r}, "
            f"this config {self.actual!r}"
        )


def first_difference(a: Sequence[Any], b: Sequence[Any]) -> int | None:
    """Index of the first position where ``a`` and ``b`` differ (length counts), else None."""
    for i, (x, y) in enumerate(zip(a, b)):  # noqa: B905 - lengths differ on purpose
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def _units(outputs: Sequence[GreedyOutput]) -> tuple[list[Sequence[Any]], str]:
    if all(o.output_ids is not None for o in outputs):
        return [o.output_ids or () for o in outputs], "token"
    return [o.text for o in outputs], "char"


def _margin_at(output: GreedyOutput, index: int, unit: str) -> float | None:
    if unit != "token" or output.margins is None or index >= len(output.margins):
        return None
    return output.margins[index]


def classify(runs: Sequence[GreedyOutput], actual: GreedyOutput, bound: float) -> Divergence | None:
    """The first divergence of ``actual`` from the baseline's ``runs`` of its prompt (at
    least one), classified; None when it equals any of them. The run it follows longest is
    the reference: a config that took the other branch of a near tie follows that run."""
    seqs, unit = _units([*runs, actual])
    mine = seqs[-1]
    found = [first_difference(ref, mine) for ref in seqs[:-1]]
    if any(d is None for d in found):
        return None
    index = max(d for d in found if d is not None)
    at = found.index(index)
    ref, reference = seqs[at], runs[at]
    known = [m for m in (_margin_at(reference, index, unit), _margin_at(actual, index, unit))
             if m is not None]  # fmt: skip
    margin = min(known) if known else None
    if margin is not None and margin < bound:
        kind, why = "numerics", f"top-2 margin {margin:.3g} < {figures.plain(bound)}"
    elif any(first_difference(ref, other) == index for other in seqs[:-1]):
        kind, why = "numerics", "the baseline's own runs part here"
    else:
        shown = "no logprobs" if margin is None else f"top-2 margin {margin:.3g}"
        kind, why = "defect", f"{shown}, the baseline's runs agree here"
    char = first_difference(reference.text, actual.text)
    char = min(len(reference.text), len(actual.text)) if char is None else char
    return Divergence(
        actual.prompt_id,
        unit,
        index,
        kind,
        why,
        margin,
        reference.text[max(0, char - WINDOW) : char],
        reference.text[char : char + WINDOW],
        actual.text[char : char + WINDOW],
    )


@dataclass
class Verdict:
    """The lossless gate over one config's replies."""

    replies: int
    bound: float
    divergences: list[Divergence] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # prompt ids without a reply

    @property
    def defects(self) -> list[Divergence]:
        return [d for d in self.divergences if d.kind == "defect"]

    @property
    def numerics(self) -> list[Divergence]:
        return [d for d in self.divergences if d.kind == "numerics"]

    @property
    def passed(self) -> bool:
        """Any defect fails: numerics are set aside, and a lossless drafter makes none."""
        return not self.defects and not self.missing

    def line(self, label: str) -> str:
        """The gate's line: defects with their interval, and the numerics set aside."""
        n, k = self.replies, len(self.defects)
        lo, hi = wilson_interval(k, n)
        rate = k / n if n else 0.0
        by_margin = sum(1 for d in self.numerics if d.why.startswith("top-2"))
        parts = [f"top-2 margin < {figures.plain(self.bound)}"] if by_margin else []
        if by_margin < len(self.numerics):
            parts.append(f"{len(self.numerics) - by_margin} where the baseline's runs part")
        if by_margin and len(parts) > 1:
            parts[0] = f"{by_margin} at {parts[0]}"
        why = f" ({', '.join(parts)})" if parts else ""
        word = "passed" if self.passed else "FAILED"
        line = (
            f"lossless gate {word}: {label}: {k} drafter defect{'s' if k != 1 else ''} in {n} "
            f"replies ({rate:.1%}, 95% interval {lo:.1%}-{hi:.1%}), "
            f"{len(self.numerics)} divergence{'s' if len(self.numerics) != 1 else ''} "
            f"{'were' if len(self.numerics) != 1 else 'was'} numerics{why}"
        )
        if self.missing:
            line += f"; no reply for {', '.join(map(repr, self.missing))}"
        return line

    def detail(self, label: str) -> str:
        """The line, then the first few divergences (defects first) spelled out."""
        shown = [*self.defects, *self.numerics][:SHOWN]
        return "; ".join([self.line(label), *(d.describe() for d in shown)])


def judge(
    baseline: Sequence[Sequence[GreedyOutput]], actual: Iterable[GreedyOutput], bound: float
) -> Verdict:
    """Classify each reply's first divergence from the baseline's runs (``baseline[r]``:
    run r's outputs; the first run names the prompts)."""
    have = {o.prompt_id: o for o in actual}
    by_prompt = [{o.prompt_id: o for o in run} for run in baseline]
    verdict = Verdict(replies=0, bound=bound)
    for base in baseline[0] if baseline else []:
        got = have.get(base.prompt_id)
        if got is None:
            verdict.missing.append(base.prompt_id)
            continue
        verdict.replies += 1
        runs = [run[base.prompt_id] for run in by_prompt if base.prompt_id in run]
        div = classify(runs, got, bound)
        if div is not None:
            verdict.divergences.append(div)
    return verdict


def collect_greedy(
    client: SGLangClient,
    prompts: Mapping[str, str],
    max_new_tokens: int,
    *,
    bounds: replies.DraftBounds = replies.UNKNOWN,
    concurrency: int = 8,
    reverse: bool = False,
) -> list[GreedyOutput]:
    """Greedy (temperature 0) outputs of ``prompts`` (id -> text) from ``client``'s server,
    ``concurrency`` at a time (sent in reverse order with ``reverse``: other batches, so
    other numerics), each with its top-2 margins; each reply checked against ``bounds``
    first (raises ``ImplausibleReply``). Returned in the order of ``prompts``."""
    local = threading.local()
    clients: list[SGLangClient] = []
    lock = threading.Lock()

    def one(item: tuple[str, str]) -> GreedyOutput:
        mine: SGLangClient | None = getattr(local, "client", None)
        if mine is None:
            mine = local.client = client.clone()
            with lock:
                clients.append(mine)
        prompt_id, text = item
        result = mine.generate(
            text, max_new_tokens=max_new_tokens, temperature=0.0, top_logprobs=TOP_LOGPROBS
        )
        replies.check(result, max_new_tokens, bounds)
        ids = None if result.output_ids is None else tuple(result.output_ids)
        top = result.top_logprobs
        return GreedyOutput(prompt_id, text, result.text, ids, top2_margins(top) if top else None)

    items = list(prompts.items())
    order = items[::-1] if reverse else items
    try:
        with ThreadPoolExecutor(max(1, concurrency), thread_name_prefix="lossless") as pool:
            got = {o.prompt_id: o for o in pool.map(one, order)}
    finally:
        for c in clients:
            c.close()
    return [got[prompt_id] for prompt_id, _ in items]


def save_baseline(
    path: str | Path,
    runs: Sequence[Sequence[GreedyOutput]],
    *,
    meta: Mapping[str, Any] | None = None,
) -> None:
    """Write a baseline file (JSON) with each run's outputs and free-form ``meta``, at once
    (a reader, another xdist worker too, never sees half of it)."""
    data = {
        "format": BASELINE_FORMAT,
        "meta": dict(meta or {}),
        "runs": [[o.to_json() for o in run] for run in runs],
    }
    statefiles.write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def load_baseline(path: str | Path) -> tuple[list[list[GreedyOutput]], dict[str, Any]]:
    """Read a file written by :func:`save_baseline`: ``(runs, meta)``."""
    try:
        data = statefiles.load_json(path)
        if data.get("format") != BASELINE_FORMAT:
            raise ValueError(f"format {data.get('format')!r}, expected {BASELINE_FORMAT}")
        outputs = [[GreedyOutput.from_json(o) for o in run] for run in data["runs"]]
        if not outputs:
            raise ValueError("no runs")
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
