"""``meta_info.e2e_latency`` counts from the request's arrival in the handler, as SGLang's does.

Reading and tokenizing the prompt are the server's time: when they are left
out, the client's overhead figure (its e2e minus the server's) counts them.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from pathlib import Path

import httpx
import pytest

from pytest_specdecode.sim import cli, tokenizer
from pytest_specdecode.sim.server import SimServer

from ..conftest import run_sim

SLOW = 0.05  # seconds one tokenization takes here


def _app(monkeypatch: pytest.MonkeyPatch) -> SimServer:
    real = tokenizer.count

    def slow_count(text: str) -> int:
        time.sleep(SLOW)  # the work before the sequence exists, made measurable
        return real(text)

    monkeypatch.setattr(tokenizer, "count", slow_count)
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


SLACK = 0.05  # s: the read of the first bytes run late on a busy machine


def test_the_served_simulator_counts_from_the_requests_first_bytes(tmp_path: Path) -> None:
    # The request line goes first, the rest a pause later: the parser meets the request
    # at once, its handler only once the headers are complete. e2e_latency holding the
    # pause shows the arrival is stamped by the HTTP parser (sim/arrival.py), so a burst
    # parsed in one turn of the loop is not counted as the client's overhead. Counted
    # from the headers' end it would be a few ms; a machine busy with other work may
    # run the simulator's read of the first bytes some ms after they came (SLACK).
    pause = 0.3
    body = json.dumps({"text": "hi", "sampling_params": {"max_new_tokens": 4}}).encode()
    with (
        run_sim(tmp_path, healthy="/health") as sim,
        socket.create_connection(("127.0.0.1", sim.port), timeout=10) as conn,
    ):
        conn.sendall(b"POST /generate HTTP/1.1\r\n")
        time.sleep(pause)  # the pause itself is what is measured, not a wait for an event
        conn.sendall(
            b"Host: sim\r\nContent-Type: application/json\r\nConnection: close\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        reply = b""
        while chunk := conn.recv(65536):
            reply += chunk
    head, _, payload = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    meta = json.loads(payload)["meta_info"]
    assert meta["e2e_latency"] >= pause - SLACK, meta
