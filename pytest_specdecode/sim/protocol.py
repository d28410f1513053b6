"""Response bodies in SGLang's shapes: native ``/generate`` and the OpenAI endpoints.

Streaming builds each SSE event from precomputed escaped pieces with string
joins, so the cost per chunk does not grow with Python work per token.
"""

from __future__ import annotations

import json
import time
from typing import Any

import orjson

from pytest_specdecode.sim.scheduler import Sequence

DONE = b"data: [DONE]\n\n"


def meta_info(
    seq: Sequence, end: int, verify_ct: int, drafts_per_step: int | None, final: bool
) -> dict[str, Any]:
    """SGLang's ``meta_info`` after ``end`` tokens and ``verify_ct`` verify steps.

    ``drafts_per_step`` is None without speculative decoding: then the spec
    fields are absent, as in SGLang; they also wait for the first verify step.
    """
    meta: dict[str, Any] = {
        "id": seq.rid,
        "finish_reason": seq.finish_reason if final else None,
        "prompt_tokens": seq.prompt_tokens,
        "completion_tokens": end,
        "cached_tokens": 0,
        "e2e_latency": round(time.monotonic() - seq.created, 6),
    }
    if drafts_per_step is not None and verify_ct > 0:
        meta.update(spec_details(end, verify_ct, drafts_per_step))
        if final and any(seq.hist):
            meta["spec_correct_drafts_histogram"] = histogram(seq.hist)
    return meta


def spec_details(tokens: int, verify_ct: int, drafts_per_step: int) -> dict[str, Any]:
    """Speculative counters of a request, as SGLang's tokenizer manager computes them.

    Proposed drafts are ``verify_ct * (num_draft_tokens - 1)``; correct drafts
    exclude the bonus token of each step.
    """
    accepted = max(tokens - verify_ct, 0)
    proposed = verify_ct * drafts_per_step
    return {
        "spec_accept_rate": accepted / proposed if proposed else 0.0,
        "spec_accept_length": tokens / verify_ct if verify_ct else 0.0,
        "spec_num_correct_drafts": accepted,
        "spec_num_proposed_drafts": proposed,
        "spec_verify_ct": verify_ct,
    }


def histogram(hist: list[int]) -> list[int]:
    """Steps by accepted drafts (index), trimmed like SGLang's growing list."""
    last = max((i for i, n in enumerate(hist) if n), default=-1)
    return hist[: last + 1]


def spec_tokens_details(seq: Sequence, verify_ct: int, drafts_per_step: int | None) -> Any:
    """``sglext.spec_tokens_details``: all nine fields of SGLang's model, or None."""
    if drafts_per_step is None or verify_ct <= 0:
        return None
    details = spec_details(seq.total, verify_ct, drafts_per_step)
    return {
        "spec_accept_rate": details["spec_accept_rate"],
        "spec_accept_length": details["spec_accept_length"],
        "spec_cap_length": 0.0,
        "spec_block_accept_length": 0.0,
        "spec_num_correct_drafts": details["spec_num_correct_drafts"],
        "spec_num_proposed_drafts": details["spec_num_proposed_drafts"],
        "spec_verify_ct": verify_ct,
        "spec_correct_drafts_histogram": histogram(seq.hist),
        "spec_cap_lens_histogram": [],
    }


class TextState:
    """Cumulative escaped text and ids of one stream, grown step by step: the bytes of
    an event's JSON (escaped text is ASCII), so an event is one join of them."""

    __slots__ = ("ids", "pos", "text")

    def __init__(self) -> None:
        self.text = bytearray()
        self.ids = bytearray()
        self.pos = 0

    def advance(self, seq: Sequence, end: int) -> str:
        """Append tokens up to ``end``; return the escaped text of just this step."""
        tokens = seq.tokens
        delta = "".join(tokens.escaped[self.pos : end])
        ids = ",".join(tokens.id_strs[self.pos : end])
        if ids:
            if self.ids:
                self.ids += b","
            self.ids += ids.encode()
        self.text += delta.encode()
        self.pos = end
        return delta


def escape(text: str) -> str:
    """``text`` escaped for the inside of a JSON string literal."""
    return json.dumps(text)[1:-1]


def generate_event(state: TextState, meta: dict[str, Any]) -> bytes:
    """One SSE event of native ``/generate`` streaming (cumulative text and ids).

    ``meta_info`` is encoded by orjson, as SGLang's HTTP server encodes its events
    (compact); the standard library's encoder was a tenth of the simulator's time
    at high concurrency.
    """
    return b"".join(
        (
            b'data: {"text":"',
            state.text,
            b'","output_ids":[',
            state.ids,
            b'],"meta_info":',
            orjson.dumps(meta),
            b"}\n\n",
        )
    )


def openai_finish(seq: Sequence) -> tuple[str, object]:
    """OpenAI ``finish_reason`` and SGLang's ``matched_stop``."""
    reason = seq.finish_reason
    if reason.get("type") == "length":
        return "length", None
    return "stop", reason.get("matched")


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    """OpenAI ``usage`` in SGLang's ``UsageInfo`` shape."""
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": None,
        "reasoning_tokens": 0,
        "completion_tokens_details": None,
    }


def openai_event(
    *,
    chat: bool,
    rid: str,
    created: int,
    model: str,
    delta_escaped: str | None,
    finish: str | None = None,
    matched: object = None,
    extra: dict[str, Any] | None = None,
    first: bool = False,
    index: int = 0,
) -> bytes:
    """One SSE event of ``/v1/completions`` or ``/v1/chat/completions`` streaming."""
    head = (
        f'data: {{"id":"{rid}","object":"{"chat.completion.chunk" if chat else "text_completion"}",'
        f'"created":{created},"model":{json.dumps(model)},"choices":'
    )
    if delta_escaped is None:
        choices = "[]"
    else:
        tail = (
            f'"logprobs":null,"finish_reason":{json.dumps(finish)},'
            f'"matched_stop":{json.dumps(matched)}}}]'
        )
        if chat:
            role = '"role":"assistant",' if first else ""
            choices = f'[{{"index":{index},"delta":{{{role}"content":"{delta_escaped}"}},{tail}'
        else:
            choices = f'[{{"index":{index},"text":"{delta_escaped}",{tail}'
    rest = "".join(f",{json.dumps(k)}:{json.dumps(v)}" for k, v in (extra or {}).items())
    return f"{head}{choices}{rest}}}\n\n".encode()


def openai_choice(chat: bool, index: int, text: str, seq: Sequence) -> dict[str, Any]:
    """One choice of a non-streaming OpenAI response."""
    finish, matched = openai_finish(seq)
    choice: dict[str, Any] = {"index": index}
    if chat:
        choice["message"] = {
            "role": "assistant",
            "content": text,
            "reasoning_content": None,
            "tool_calls": None,
        }
    else:
        choice["text"] = text
    choice.update({"logprobs": None, "finish_reason": finish, "matched_stop": matched})
    return choice


def openai_body(
    *,
    chat: bool,
    rid: str,
    created: int,
    model: str,
    choices: list[dict[str, Any]],
    usage_info: dict[str, Any],
    sglext: dict[str, Any] | None,
) -> dict[str, Any]:
    """The non-streaming OpenAI response (``sglext`` only when something is in it)."""
    body: dict[str, Any] = {
        "id": rid,
        "object": "chat.completion" if chat else "text_completion",
        "created": created,
        "model": model,
        "choices": choices,
        "usage": usage_info,
    }
    if sglext is not None:
        body["sglext"] = sglext
    return body
