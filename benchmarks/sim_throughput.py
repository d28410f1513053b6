"""How fast one simulator process streams at ``--sim-time-scale 0``.

Starts ``python -m pytest_specdecode.sim`` on a free loopback port, then runs
N concurrent streaming ``/generate`` clients (raw asyncio sockets in a
separate process, so the client is not the bottleneck) for a few seconds and
prints the total streamed tokens/s (counted from ``completion_tokens``, not
chunks) and the tokens per chunk; exits 1 below the requirement (20,000 tok/s
at concurrency 32, ``--min-tok-s``). Figures come from the simulator, not a GPU.

    .venv/bin/python benchmarks/sim_throughput.py [--concurrency 32] [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

from pytest_specdecode.processes.children import free_port

REQUEST = {
    "text": "Summarise the design of a speculative decoding server.",
    "sampling_params": {"max_new_tokens": 512, "ignore_eos": True, "temperature": 0},
    "stream": True,
}


def dechunk(raw: bytes) -> bytes:
    """Undo HTTP/1.1 chunked transfer encoding."""
    out: list[bytes] = []
    i = 0
    while True:
        j = raw.index(b"\r\n", i)
        size = int(raw[i:j].split(b";")[0], 16)
        if size == 0:
            return b"".join(out)
        out.append(raw[j + 2 : j + 2 + size])
        i = j + 2 + size + 2


async def one_client(port: int, deadline: float, totals: list[int]) -> None:
    body = json.dumps(REQUEST).encode()
    head = (
        f"POST /generate HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while time.monotonic() < deadline:
            writer.write(head + body)
            buf = bytearray()
            while not buf.endswith(b"\n\r\n0\r\n\r\n"):
                data = await reader.read(1 << 16)
                if not data:
                    raise ConnectionError("server closed the connection")
                buf += data
            header_end = buf.index(b"\r\n\r\n") + 4
            events = dechunk(bytes(buf[header_end:])).split(b"\n\n")
            data_events = [e for e in events if e.startswith(b"data: {")]
            last = json.loads(data_events[-1][6:])
            totals[0] += last["meta_info"]["completion_tokens"]
            totals[1] += len(data_events)
            totals[2] += 1
    finally:
        writer.close()
        await writer.wait_closed()


async def run_clients(port: int, concurrency: int, seconds: float) -> tuple[float, list[int]]:
    totals = [0, 0, 0]  # tokens, chunks, requests
    start = time.monotonic()
    deadline = start + seconds
    await asyncio.gather(*(one_client(port, deadline, totals) for _ in range(concurrency)))
    return time.monotonic() - start, totals


def client_process(port: int, concurrency: int, seconds: float, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    out.put(asyncio.run(run_clients(port, concurrency, seconds)))


def wait_healthy(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                if r.status == 200:
                    return
        except (OSError, urllib.error.URLError):
            pass
        time.sleep(0.05)
    raise RuntimeError(f"simulator on port {port} not healthy after {timeout}s")


REQUIREMENT_TOK_S = 20_000


def verdict(tok_s: float, minimum: float) -> int:
    """The exit status: 0 when the requirement holds, 1 when it is missed."""
    return 0 if tok_s >= minimum else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument(
        "--min-tok-s", type=float, default=REQUIREMENT_TOK_S, help="Default: %(default)r"
    )
    parser.add_argument(
        "--sim-args",
        default="--speculative-algorithm DFLASH --speculative-draft-model-path sim/draft "
        "--speculative-num-draft-tokens 8 --speculative-draft-window-size 2048",
    )
    opts = parser.parse_args(argv)
    port = free_port()
    cmd = [
        sys.executable, "-m", "pytest_specdecode.sim", "--port", str(port),
        "--sim-time-scale", "0", "--sim-load-seconds", "0", "--sim-warmup-seconds", "0",
        *opts.sim_args.split(),
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_healthy(port)
        queue: multiprocessing.Queue = multiprocessing.Queue()  # type: ignore[type-arg]
        client = multiprocessing.Process(
            target=client_process, args=(port, opts.concurrency, opts.seconds, queue)
        )
        client.start()
        elapsed, (tokens, chunks, requests) = queue.get(timeout=opts.seconds + 120)
        client.join()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    rate = tokens / elapsed
    print(f"command: {' '.join(cmd)}")
    print(
        f"sim streamed {rate:,.0f} tokens/s in total at concurrency "
        f"{opts.concurrency} ({requests} requests, {tokens} tokens in {elapsed:.2f} s, "
        f"{tokens / max(chunks, 1):.2f} tokens/chunk); requirement >= {opts.min_tok_s:,.0f}"
    )
    status = verdict(rate, opts.min_tok_s)
    print("PASS" if status == 0 else "FAIL")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
