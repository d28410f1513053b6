"""The HTTP server: SGLang's endpoints on Starlette, backed by the engine.

``SimServer`` holds the state (ready flag, engine, counters); ``app()``
builds the ASGI app. Health answers 503 until ``mark_ready()``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import time
from collections.abc import Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from pytest_specdecode.sim import numerics, protocol, serverinfo, streams, tokenizer
from pytest_specdecode.sim.admission import Admission, OnePerTurn
from pytest_specdecode.sim.answers import AnswerBook, Scripted
from pytest_specdecode.sim.arrival import received_at
from pytest_specdecode.sim.cli import ServerArgs
from pytest_specdecode.sim.collector import IdleCollector
from pytest_specdecode.sim.generation import (
    BadRequest,
    Generator,
    GenRequest,
    sampling,
)
from pytest_specdecode.sim.metrics import Metrics, exposition
from pytest_specdecode.sim.model import SpecModel, SpecSettings
from pytest_specdecode.sim.openai_api import OpenAIEndpoints
from pytest_specdecode.sim.scheduler import Engine, Sequence

log = logging.getLogger("pytest_specdecode.sim")


class SimServer:
    """State and endpoints of one simulated SGLang server."""

    def __init__(
        self,
        args: ServerArgs,
        spec: SpecSettings,
        launch_command: str,
        scripted: list[Scripted] | None = None,
        *,
        exit_process: Callable[[int], None] = os._exit,
    ) -> None:
        self.args = args
        self.spec = spec
        self.launch_command = launch_command
        self.model = SpecModel(
            spec,
            window_ignored=args.faults.window_ignored,
            batch_collapse=args.faults.batch_collapse,
        )
        # A faster start (--sim-restart-noise) takes less modelled time per step.
        scale = args.time_scale / args.speed_factor
        self.engine = Engine(self.model, scale, lossy=args.faults.lossy)
        self.book = AnswerBook(args.seed, args.quality, scripted)
        self.admission = Admission()
        self.generator = Generator(
            self.book,
            args.seed,
            lossy=args.faults.lossy,
            degenerate=args.faults.degenerate_drafter and spec.speculative,
            degenerate_shape=args.faults.degenerate_shape,
            near_tie=args.faults.near_tie,
            lossy_rate=args.faults.lossy_rate if spec.speculative else 0.0,
            numerics_key=f"{spec.algorithm}:{spec.num_draft_tokens}:{spec.topk}:{spec.window}",
        )
        self.metrics = Metrics()
        self.ready = False
        self.generate_requests = 0
        self.completed_requests = 0
        self.exit_process = exit_process
        # Set by the simulator's own process (launch.serve), never in-process.
        self.collector: IdleCollector | None = None
        # SGLang counts proposed drafts as num_draft_tokens - 1 per verify step.
        self.drafts_per_step: int | None = (
            max((spec.num_draft_tokens or 1) - 1, 0) if spec.speculative else None
        )
        self.startup_time = time.time()
        self.openai = OpenAIEndpoints(self)

    def mark_ready(self) -> None:
        """Warmup done: health turns 200 (never with the ``unhealthy`` fault)."""
        if self.args.faults.unhealthy:
            log.warning("Simulated: warmup done, health stays 503 (--sim-fault unhealthy)")
            return
        self.ready = True
        log.info("The server is fired up and ready to roll!")

    # -- simple endpoints ------------------------------------------------------------
    async def health(self, request: Request) -> Response:
        if not self.ready:
            return Response(status_code=503)
        if request.url.path == "/health_generate":
            seq, _ = self.generator.sequence(
                GenRequest(prompt="health", prompt_tokens=1, max_new_tokens=1, temperature=0)
            )
            self.engine.submit(seq)
            try:
                await asyncio.wait_for(seq.queue.get(), timeout=20)
            except asyncio.TimeoutError:
                return Response(status_code=503)
        return Response(status_code=200)

    async def model_info(self, request: Request) -> Response:
        return JSONResponse(
            {
                "model_path": self.args.model_path,
                "tokenizer_path": self.args.model_path,
                "is_generation": True,
                "preferred_sampling_params": None,
                "weight_version": "default",
                "has_image_understanding": False,
                "has_audio_understanding": False,
                "model_type": "sim",
                "architectures": ["SimForCausalLM"],
            }
        )

    async def server_info(self, request: Request) -> Response:
        """SGLang's ``/server_info``: every resolved field, launch command, states, version."""
        info = serverinfo.server_info(
            self.args,
            self.spec,
            launch_command=self.launch_command,
            startup_time=self.startup_time,
            avg_accept_length=self.engine.avg_accept_length,
        )
        return JSONResponse(info)

    async def models(self, request: Request) -> Response:
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {
                        "id": self.args.served_model_name,
                        "object": "model",
                        "created": int(time.time()),
                        "owned_by": "sglang",
                        "root": self.args.model_path,
                        "max_model_len": self.args.context_len,
                    }
                ],
            }
        )

    async def flush_cache(self, request: Request) -> Response:
        return PlainTextResponse(
            "Cache flushed.\nPlease check backend logs for more details. (When there are "
            "running or waiting requests, the operation will not be performed.)\n"
        )

    async def metrics_endpoint(self, request: Request) -> Response:
        if not self.args.enable_metrics:
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        accept_length = self.engine.avg_accept_length or 1.0
        text = self.metrics.prometheus(self.args.served_model_name, accept_length)
        body, headers = exposition(text, request.headers.get("accept-encoding"))
        return Response(body, headers=headers)

    # -- generation ------------------------------------------------------------------
    async def _body(self, request: Request) -> dict[str, Any]:
        try:
            body = json.loads(await request.body())
        except ValueError as exc:
            raise BadRequest(f"request body is not JSON: {exc}") from None
        if not isinstance(body, dict):
            raise BadRequest(f"request body must be a JSON object, got {type(body).__name__}")
        return body

    async def _start(
        self, req: GenRequest, received: float | None = None
    ) -> tuple[Sequence, str | None]:
        """Count the request, apply faults, create the sequence and submit it.

        ``received`` (``time.monotonic()`` when the handler got the request) is
        where ``meta_info.e2e_latency`` counts from, as SGLang counts from the
        request's arrival: reading and tokenizing the prompt are the server's time.
        """
        self.generate_requests += 1
        die_after = self.args.faults.die_after
        if die_after is not None and self.generate_requests > die_after:
            self._die()
        self.metrics.requests += 1
        self.metrics.prompt_tokens += req.prompt_tokens
        seq, stop_text = await self.admission.run(lambda: self.generator.sequence(req))
        if received is not None:
            seq.created = received
        if self.args.faults.slow_first_token:
            await asyncio.sleep(self.args.faults.slow_first_token)
        self.metrics.running += 1
        self.engine.submit(seq)
        return seq, stop_text

    def _finished(self) -> None:
        self.metrics.running -= 1
        self.completed_requests += 1
        if self.collector is not None:
            self.collector.finished(self.metrics.running)
        die_after = self.args.faults.die_after
        if die_after is not None and self.completed_requests == die_after:
            # Let the last response leave the socket before "crashing".
            asyncio.get_running_loop().call_later(0.05, self._die)

    def _die(self) -> None:
        log.error(
            "Simulated crash: die-after:%s reached after %d generate requests",
            self.args.faults.die_after,
            self.generate_requests,
        )
        logging.shutdown()
        self.exit_process(1)

    async def generate(self, request: Request) -> Response:
        received = received_at(request)
        try:
            body = await self._body(request)
            text = body.get("text")
            ids = body.get("input_ids")
            if isinstance(text, list):
                if body.get("stream"):
                    raise BadRequest("streaming a batch of prompts is not supported")
                items = [dict(body, text=t) for t in text]
                results = await asyncio.gather(*(self._generate_one(b, received) for b in items))
                return JSONResponse(results)
            if text is None and ids is None:
                raise BadRequest("Either text or input_ids should be provided.")
            if text is not None and not isinstance(text, str):
                raise BadRequest(f"text must be a string, got {text!r}")
            if ids is not None and not (
                isinstance(ids, list) and all(isinstance(i, int) for i in ids)
            ):
                raise BadRequest(f"input_ids must be a list of integers, got {ids!r}")
            if body.get("stream"):
                req = await self.admission.run(lambda: self._gen_request(body))
                seq, stop_text = await self._start(req, received)
                event = streams.generate_events(self.drafts_per_step, stop_text)

                async def produce(write: Callable[[bytes], Any]) -> None:
                    await streams.pump(seq, write, event, self.metrics)

                return streams.SSEResponse(seq, produce, self._finished)
            return JSONResponse(await self._generate_one(body, received))
        except BadRequest as exc:
            return JSONResponse({"error": {"message": str(exc)}}, status_code=400)

    def _gen_request(self, body: dict[str, Any]) -> GenRequest:
        text = body.get("text")
        if text is not None:
            prompt, n_prompt = text, tokenizer.count(text)
        else:
            ids = body["input_ids"]
            prompt, n_prompt = "ids:" + ",".join(map(str, ids)), len(ids)
        req = sampling(
            body.get("sampling_params") or {},
            default_max=128,
            prompt=prompt,
            prompt_tokens=n_prompt,
            context=self.args.context_len,
        )
        req.logprobs = logprob_request(body)
        return req

    async def _generate_one(
        self, body: dict[str, Any], received: float | None = None
    ) -> dict[str, Any]:
        req = await self.admission.run(lambda: self._gen_request(body))
        seq, stop_text = await self._start(req, received)
        try:
            verify_ct = await streams.collect(seq, self.metrics)
        finally:
            self._finished()
        meta = protocol.meta_info(seq, seq.total, verify_ct, self.drafts_per_step, True)
        ids = seq.tokens.ids[: seq.total]
        if req.logprobs >= 0 and seq.numerics is not None:
            meta.update(numerics.logprob_meta(seq.numerics, ids, req.logprobs))
        return {"text": streams.final_text(seq, stop_text), "output_ids": ids, "meta_info": meta}

    def app(self) -> ASGIApp:
        """The ASGI app, wrapped in the API-key check when ``--api-key`` is set."""
        get_post = ["GET", "POST"]
        routes = [
            Route("/health", self.health, methods=get_post),
            Route("/health_generate", self.health, methods=get_post),
            Route("/ready", self.ready_endpoint, methods=get_post),
            Route("/model_info", self.model_info, methods=get_post),
            Route("/get_model_info", self.model_info, methods=get_post),
            Route("/server_info", self.server_info, methods=get_post),
            Route("/get_server_info", self.server_info, methods=get_post),
            Route("/v1/models", self.models, methods=["GET"]),
            Route("/flush_cache", self.flush_cache, methods=get_post),
            Route("/metrics", self.metrics_endpoint, methods=["GET"]),
            Route("/generate", self.generate, methods=["POST", "PUT"]),
            Route("/v1/completions", self.openai.completions, methods=["POST"]),
            Route("/v1/chat/completions", self.openai.completions, methods=["POST"]),
        ]
        # SGLang's server is FastAPI: an unknown path is JSON, not Starlette's plain text.
        app: ASGIApp = Starlette(routes=routes, exception_handlers={404: not_found})
        if self.args.api_key is not None:
            app = ApiKeyMiddleware(app, self.args.api_key)
        return OnePerTurn(app)

    async def ready_endpoint(self, request: Request) -> Response:
        return Response(status_code=200 if self.ready else 503)


async def not_found(request: Request, exc: Exception) -> Response:
    return JSONResponse({"detail": "Not Found"}, status_code=404)


def logprob_request(body: dict[str, Any]) -> int:
    """``return_logprob``/``top_logprobs_num`` of a native request: -1 (none) or the top
    entries per position (0: the chosen tokens' logprobs only)."""
    want = body.get("return_logprob", False)
    if not isinstance(want, bool):
        raise BadRequest(f"return_logprob must be a boolean, got {want!r}")
    top = body.get("top_logprobs_num") or 0
    if not isinstance(top, int) or isinstance(top, bool) or top < 0:
        raise BadRequest(f"top_logprobs_num must be a non-negative integer, got {top!r}")
    return top if want else -1


class ApiKeyMiddleware:
    """SGLang's API-key check (``decide_request_auth``).

    ``/health*``, ``/ready*`` and ``/metrics*`` stay open (probes and
    Prometheus), as does ``OPTIONS``; everything else needs
    ``Authorization: Bearer KEY``, the scheme case-insensitive, the key
    compared in constant time. A refusal is 401 ``{"error": "Unauthorized"}``.
    """

    OPEN = ("/health", "/ready", "/metrics")

    def __init__(self, app: ASGIApp, api_key: str) -> None:
        self.app = app
        self.api_key = api_key

    def allowed(self, method: str, path: str, authorization: str | None) -> bool:
        if method == "OPTIONS" or path.startswith(self.OPEN):
            return True
        if not authorization:
            return False
        scheme, sep, token = authorization.partition(" ")
        if not sep or scheme.lower() != "bearer":
            return False
        return secrets.compare_digest(token.encode(), self.api_key.encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            raw = dict(scope["headers"]).get(b"authorization")
            header = raw.decode("latin-1") if raw is not None else None
            if not self.allowed(scope["method"], scope["path"], header):
                response = JSONResponse({"error": "Unauthorized"}, status_code=401)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
