"""``meta_info.e2e_latency`` counts from the request's arrival in the handler, as SGLang's does.

Reading and tokenizing the prompt are the server's time: when they are left
out, the client's overhead figure (its e2e minus the server's) counts them.
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest

from pytest_specdecode.sim import cli, generation, server
from pytest_specdecode.sim.server import SimServer

SLOW = 0.05  # seconds one tokenization takes here


def _app(monkeypatch: pytest.MonkeyPatch) -> SimServer:
    real = generation.prompt_token_count

    def slow_count(text: str) -> int:
        time.sleep(SLOW)  # the work before the sequence exists, made measurable
        return real(text)

    monkeypatch.setattr(server, "prompt_token_count", slow_count)
    args = cli.resolve(cli.parse(["--sim-time-scale", "0"]), {})
    sim = SimServer(args, args.spec, "sim")
    sim.mark_ready()
    return sim


async def _post(sim: SimServer, body: dict[str, object]) -> list[dict[str, object]]:
    engine = asyncio.ensure_future(sim.engine.run())
    try:
        transport = httpx.ASGITransport(app=sim.app())
        async with httpx.AsyncClient(transport=transport, base_url="http://sim") as client:
            reply = await client.post("/generate", json=body)
    finally:
        engine.cancel()
    assert reply.status_code == 200, reply.text
    if not body.get("stream"):
        return [reply.json()]
    lines = [ln[5:].strip() for ln in reply.text.splitlines() if ln.startswith("data:")]
    return [json.loads(ln) for ln in lines if ln != "[DONE]"]


@pytest.mark.parametrize("stream", [False, True])
def test_e2e_latency_includes_tokenizing_the_prompt(
    monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    sim = _app(monkeypatch)
    body = {"text": "one two three", "sampling_params": {"max_new_tokens": 4}, "stream": stream}
    events = asyncio.run(_post(sim, body))
    meta = events[-1]["meta_info"]
    assert isinstance(meta, dict)
    assert meta["completion_tokens"] == 4
    assert meta["e2e_latency"] >= SLOW
