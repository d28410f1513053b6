"""``/v1/completions`` and ``/v1/chat/completions`` as SGLang 0.5.23 serves them.

``n`` choices per prompt and a list of prompts (one choice per prompt and
``n``, indexed ``prompt * n + j``); streaming interleaves the choices' steps,
puts ``usage`` on every chunk with ``stream_options.continuous_usage_stats``,
and sends ``sglext`` (all nine ``spec_tokens_details`` fields) in a chunk of
its own with ``choices: []`` before the usage chunk. Errors have SGLang's
shape and type names: ``Bad Request`` for a body that fails validation,
``BadRequestError`` for a request the engine refuses.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from pytest_specdecode.sim import protocol, streams, tokenizer
from pytest_specdecode.sim.arrival import received_at
from pytest_specdecode.sim.generation import BadRequest, chat_prompt, sampling
from pytest_specdecode.sim.scheduler import Sequence

if TYPE_CHECKING:
    from pytest_specdecode.sim.server import SimServer

VALIDATION = "Bad Request"  # HTTPStatus.BAD_REQUEST.phrase, for a body that fails validation
REFUSED = "BadRequestError"  # OpenAIServingBase.create_error_response's default


class Invalid(ValueError):
    """The body fails SGLang's request validation (pydantic): 400 ``Bad Request``."""


def error(message: str, err_type: str, status: int = 400) -> JSONResponse:
    """SGLang's ``ErrorResponse``."""
    return JSONResponse(
        {"object": "error", "message": message, "type": err_type, "param": None, "code": status},
        status_code=status,
    )


@dataclass
class Ask:
    """One OpenAI request, parsed."""

    chat: bool
    prompts: list[str]
    n: int
    params: dict[str, Any]
    model: str
    stream: bool
    include_usage: bool
    continuous_usage: bool
    want_details: bool


def parse(body: object, chat: bool, default_model: str) -> Ask:
    """Check the body's shape like SGLang's request models (raises :class:`Invalid`)."""
    if not isinstance(body, dict):
        raise Invalid(f"Input should be a valid dictionary or object, got {body!r}")
    if chat:
        try:
            prompts = [chat_prompt(body.get("messages"))]
        except BadRequest as exc:
            raise Invalid(str(exc)) from None
    else:
        prompts = _prompts(body.get("prompt"))
    n = body.get("n", 1)
    if n is None:
        n = 1
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise Invalid(f"n must be an integer >= 1, got {n!r}")
    opts = body.get("stream_options") or {}
    if not isinstance(opts, dict):
        raise Invalid(f"stream_options must be an object, got {opts!r}")
    return Ask(
        chat=chat,
        prompts=prompts,
        n=n,
        params={
            "max_new_tokens": body.get("max_completion_tokens", body.get("max_tokens")),
            "temperature": body.get("temperature", 1.0),
            "ignore_eos": body.get("ignore_eos", False),
            "stop": body.get("stop"),
        },
        model=str(body.get("model") or default_model),
        stream=bool(body.get("stream")),
        include_usage=bool(opts.get("include_usage")),
        continuous_usage=bool(opts.get("continuous_usage_stats")),
        want_details=bool(body.get("return_spec_tokens_details")),
    )


def _ids(items: list[Any]) -> str:
    return "ids:" + ",".join(map(str, items))


def _prompts(raw: object) -> list[str]:
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, list) and raw:
        if all(isinstance(i, int) and not isinstance(i, bool) for i in raw):
            return [_ids(raw)]
        if all(isinstance(p, str) for p in raw):
            return list(raw)
        if all(isinstance(p, list) and all(isinstance(i, int) for i in p) for p in raw):
            return [_ids(p) for p in raw]
    raise Invalid(
        "prompt must be a string, a list of strings, a list of token ids or a list of "
        f"lists of token ids, got {raw!r}"
    )


class OpenAIEndpoints:
    """The two OpenAI endpoints of one :class:`SimServer`."""

    def __init__(self, server: SimServer) -> None:
        self.server = server

    async def completions(self, request: Request) -> Response:
        received = received_at(request)
        chat = request.url.path.endswith("/chat/completions")
        try:
            body = json.loads(await request.body())
        except ValueError as exc:
            return error(f"JSON decode error: {exc}", VALIDATION)
        try:
            ask = parse(body, chat, self.server.args.served_model_name)
        except Invalid as exc:
            return error(str(exc), VALIDATION)
        try:
            reqs = [
                sampling(
                    ask.params,
                    default_max=None,
                    prompt=text,
                    prompt_tokens=tokenizer.count(text),
                    context=self.server.args.context_len,
                )
                for text in ask.prompts
                for _ in range(ask.n)
            ]
        except BadRequest as exc:
            return error(str(exc), REFUSED)
        started = [await self.server._start(r, received) for r in reqs]
        seqs = [seq for seq, _ in started]
        stops = [stop for _, stop in started]
        if ask.stream:
            return self._stream(ask, seqs, stops)
        try:
            counts = await asyncio.gather(*(streams.collect(s, self.server.metrics) for s in seqs))
        finally:
            for _ in seqs:
                self.server._finished()
        choices = [
            protocol.openai_choice(chat, i, streams.final_text(seq, stop), seq)
            for i, (seq, stop) in enumerate(zip(seqs, stops, strict=True))
        ]
        return JSONResponse(
            protocol.openai_body(
                chat=chat,
                rid=seqs[0].rid,
                created=int(time.time()),
                model=ask.model,
                choices=choices,
                usage_info=self._usage(ask, seqs),
                sglext=self._sglext(ask, seqs, counts),
            )
        )

    def _usage(self, ask: Ask, seqs: list[Sequence]) -> dict[str, Any]:
        # Prompt tokens count once per prompt, completion tokens once per choice.
        prompt = sum(seqs[i].prompt_tokens for i in range(0, len(seqs), ask.n))
        return protocol.usage(prompt, sum(s.total for s in seqs))

    def _sglext(self, ask: Ask, seqs: list[Sequence], counts: list[int]) -> dict[str, Any] | None:
        if not ask.want_details:
            return None
        per = self.server.drafts_per_step
        details = [
            d
            for d in (
                protocol.spec_tokens_details(s, c, per) for s, c in zip(seqs, counts, strict=True)
            )
            if d is not None
        ]
        if not details:
            return None
        return {
            "routed_experts": None,
            "cached_tokens_details": None,
            "spec_tokens_details": details if ask.n > 1 else details[0],
            "input_ids": None,
            "output_ids": None,
        }

    def _stream(self, ask: Ask, seqs: list[Sequence], stops: list[str | None]) -> Response:
        events = [
            streams.openai_events(
                chat=ask.chat,
                model=ask.model,
                stop_text=stop,
                index=i,
                continuous_usage=ask.continuous_usage,
            )
            for i, stop in enumerate(stops)
        ]
        created = int(time.time())

        def chunk(**extra: Any) -> bytes:
            return protocol.openai_event(
                chat=ask.chat,
                rid=seqs[0].rid,
                created=created,
                model=ask.model,
                delta_escaped=None,
                extra=extra,
            )

        def tail() -> bytes:
            out = b""
            ext = self._sglext(ask, seqs, [s.verify_ct for s in seqs])
            if ext is not None:
                out += chunk(usage=None, sglext=ext)
            if ask.include_usage:
                usage = {k: v for k, v in self._usage(ask, seqs).items() if v is not None}
                out += chunk(usage=usage)
            return out

        async def produce(write: Callable[[bytes], Awaitable[None]]) -> None:
            if len(seqs) == 1:
                await streams.pump(seqs[0], write, events[0], self.server.metrics, tail)
            else:
                await streams.pump_many(seqs, write, events, self.server.metrics, tail)

        return streams.SSEResponse(seqs, produce, self.server._finished)
