"""From a request's prompt and sampling parameters to a :class:`Sequence`.

The reply is fixed up front: the answer's tokens, cut at ``max_new_tokens``
or at a stop string, or extended with filler when ``ignore_eos`` asks for
more tokens than the answer has (a real model keeps generating after EOS).
"""

from __future__ import annotations

import math
import random
import time
import uuid
from dataclasses import KW_ONLY, dataclass, field

from pytest_specdecode.sim import numerics
from pytest_specdecode.sim.answers import Answer, AnswerBook
from pytest_specdecode.sim.domains import REPEAT
from pytest_specdecode.sim.scheduler import Sequence
from pytest_specdecode.sim.tokenizer import EOS_TOKEN_ID, Pieces

CONTEXT_LENGTH = 32768
# The ``degenerate-drafter`` fault: a reply keeps a few tokens of its answer, then
# loops on this phrase (pieces of the simulator's tokenizer) to the end.
DEGENERATE_LEAD = 6
DEGENERATE_PHRASE = (" and", " the", " same", " thing", ",")
# ...or, by its SHAPE, on one token with no space in it: what a word count never sees.
DEGENERATE_PIECES = {
    "phrase": DEGENERATE_PHRASE,
    "cjk": ("好",),
    "letter": ("a",),
    "newlines": ("\n",),
}


class BadRequest(ValueError):
    """The request body is invalid; the message goes back to the client with a 400."""


@dataclass
class GenRequest:
    """What to generate, independent of the endpoint that asked."""

    prompt: str
    prompt_tokens: int
    max_new_tokens: int
    temperature: float = 1.0
    ignore_eos: bool = False
    stop: list[str] = field(default_factory=list)
    # return_logprob: -1 none, else top_logprobs_num (0: the chosen tokens' only)
    logprobs: int = -1
    rid: str = field(default_factory=lambda: uuid.uuid4().hex)


def sampling(
    params: object,
    *,
    default_max: int | None,
    prompt: str,
    prompt_tokens: int,
    context: int = CONTEXT_LENGTH,
) -> GenRequest:
    """Parse SGLang-style sampling params (also used for the OpenAI fields), checked
    against the server's ``context`` length as SGLang's tokenizer manager does."""
    if not isinstance(params, dict):
        raise BadRequest(f"sampling_params must be an object, got {params!r}")
    if prompt_tokens >= context:
        raise BadRequest(
            f"The input ({prompt_tokens} tokens) is longer than the model's context "
            f"length ({context} tokens)."
        )
    max_new = params.get("max_new_tokens", default_max)
    if max_new is None:
        max_new = context - prompt_tokens
    if not isinstance(max_new, int) or isinstance(max_new, bool) or max_new < 0:
        raise BadRequest(f"max_new_tokens must be a non-negative integer, got {max_new!r}")
    if prompt_tokens + max_new > context:
        raise BadRequest(
            "Requested token count exceeds the model's maximum context length of "
            f"{context} tokens. You requested a total of {prompt_tokens + max_new} tokens: "
            f"{prompt_tokens} tokens from the input messages and {max_new} tokens for the "
            "completion. Please reduce the number of tokens in the input messages or the "
            "completion to fit within the limit."
        )
    temperature = params.get("temperature", 1.0)
    if temperature is None:
        temperature = 1.0
    if (
        not isinstance(temperature, (int, float))
        or not math.isfinite(temperature)
        or temperature < 0
    ):
        raise BadRequest(f"temperature must be a non-negative finite number, got {temperature!r}.")
    stop = params.get("stop") or []
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise BadRequest(f"stop must be a string or a list of strings, got {stop!r}")
    return GenRequest(
        prompt=prompt,
        prompt_tokens=prompt_tokens,
        max_new_tokens=max_new,
        temperature=float(temperature),
        ignore_eos=bool(params.get("ignore_eos", False)),
        stop=[s for s in stop if s],
    )


@dataclass(eq=False)
class Generator:
    """Turns :class:`GenRequest` into sequences, deterministically for a seed."""

    book: AnswerBook
    seed: int
    _: KW_ONLY
    lossy: bool = False
    # Set for a speculative server under the degenerate-drafter fault (never for NONE).
    degenerate: bool = False
    degenerate_shape: str = "phrase"
    # Faults of sim.numerics (lossy_rate only ever set for a speculative server).
    near_tie: bool = False
    lossy_rate: float = 0.0
    numerics_key: str = ""
    _repeats: dict[str, int] = field(default_factory=dict, init=False)
    _samples: dict[str, int] = field(default_factory=dict, init=False)

    def sequence(self, req: GenRequest) -> tuple[Sequence, str | None]:
        """A new sequence, and the text it ends with when a stop string cut it."""
        sample: int | None = None
        if req.temperature > 0:
            sample = self._samples.get(req.prompt, 0)
            self._samples[req.prompt] = sample + 1
        answer = self.book.answer(req.prompt, sample)
        pieces, classes = answer.pieces, answer.classes
        finish: dict[str, object] = {"type": "stop", "matched": EOS_TOKEN_ID}
        total = len(pieces)
        if req.max_new_tokens <= total:
            total = req.max_new_tokens
            finish = {"type": "length", "length": total}
        elif req.ignore_eos:
            pieces, classes = self._extend(answer, req.max_new_tokens)
            total = req.max_new_tokens
            finish = {"type": "length", "length": total}
        stop_text: str | None = None
        if req.stop:
            total, stop_text, finish = self._apply_stop(pieces, total, req.stop, finish)
        if self.lossy:
            pieces = pieces.copy()
        if self.degenerate:
            pieces, classes = degenerate_reply(
                pieces, total, DEGENERATE_PIECES[self.degenerate_shape]
            )
        info: numerics.Numerics | None = None
        if self.near_tie or self.lossy_rate > 0 or req.logprobs >= 0:
            repeat = self._repeats.get(req.prompt, 0)
            self._repeats[req.prompt] = repeat + 1
            pieces, info = numerics.apply(
                pieces,
                total,
                seed=self.seed,
                prompt=req.prompt,
                key=f"{self.numerics_key}:{repeat}",
                near_tie=self.near_tie,
                lossy_rate=self.lossy_rate,
            )
        rng = random.Random(f"{self.seed}:{req.prompt}:{sample}:steps")
        seq = Sequence(
            req.rid, req.prompt_tokens, pieces, classes, total, finish, rng, time.monotonic(), info
        )
        return seq, stop_text

    def _extend(self, answer: Answer, want: int) -> tuple[Pieces, bytes]:
        pool = self.book.pool(answer.kind)
        pieces = answer.pieces.copy()
        classes = bytearray(answer.classes)
        while len(pieces) < want:
            take = min(len(pool.pieces), want - len(pieces))
            pieces.extend(pool.pieces, 0, take)
            classes += pool.classes[:take]
        return pieces, bytes(classes)

    @staticmethod
    def _apply_stop(
        pieces: Pieces, total: int, stops: list[str], finish: dict[str, object]
    ) -> tuple[int, str | None, dict[str, object]]:
        text = "".join(pieces.pieces[:total])
        hits = [(text.find(s), s) for s in stops if s in text]
        if not hits:
            return total, None, finish
        index, matched = min(hits)
        length = 0
        for i, piece in enumerate(pieces.pieces[:total]):
            length += len(piece)
            if length > index:
                return i + 1, text[:index], {"type": "stop", "matched": matched}
        return total, text[:index], {"type": "stop", "matched": matched}


def degenerate_reply(
    pieces: Pieces, total: int, phrase: tuple[str, ...] = DEGENERATE_PHRASE
) -> tuple[Pieces, bytes]:
    """A reply collapsed into a repeated phrase: the answer's first few tokens, then
    ``phrase`` over and over, ``total`` tokens in all, every one of the class the
    drafter predicts best (``REPEAT``)."""
    lead = pieces.pieces[: min(DEGENERATE_LEAD, total)]
    loop = [phrase[i % len(phrase)] for i in range(total - len(lead))]
    return Pieces([*lead, *loop]), bytes([REPEAT]) * total


def chat_prompt(messages: object) -> str:
    """The prompt text a chat template would produce (Qwen-style markers)."""
    if not isinstance(messages, list) or not messages:
        raise BadRequest(f"messages must be a non-empty list, got {messages!r}")
    parts = []
    for m in messages:
        if not isinstance(m, dict):
            raise BadRequest(f"each message must be an object, got {m!r}")
        content = m.get("content") or ""
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        parts.append(f"<|im_start|>{m.get('role', 'user')}\n{content}<|im_end|>\n")
    return "".join(parts) + "<|im_start|>assistant\n"
