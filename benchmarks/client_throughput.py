"""Client capacity and accuracy against the simulator (issue 5, "Measurement accuracy and cost").

Prints two figures, each measured several times because the machine is shared:

(a) the client's sustained streamed tokens/s at concurrency 32 with the
    simulator at ``--sim-time-scale 0`` (requirement: >= 10,000), beside the
    client's CPU seconds, which show whether the client or the simulator is
    the limit;
(b) the client-reported aggregate tok/s against the simulator's own
    ``sglang:generation_tokens_total`` over the same interval, at concurrency
    1, 8 and 32, with the simulator at a realistic time scale (requirement:
    within 3%).

    .venv/bin/python benchmarks/client_throughput.py [--repeats 3] [--time-scale 1]

These are simulator figures measuring the *client*; they say nothing about a GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from tempfile import TemporaryDirectory

import requests

from pytest_specdecode.client import SGLangClient
from pytest_specdecode.processes.children import free_port
from pytest_specdecode.throughput.accuracy import AccuracySample, measure_round
from pytest_specdecode.throughput.workload import PromptBuilder, ThroughputCase

SIM_FLAGS = [
    "--speculative-algorithm", "DFLASH",
    "--speculative-draft-model-path", "d",
    "--speculative-num-draft-tokens", "8",
    "--speculative-draft-window-size", "2048",
    "--sim-load-seconds", "0",
    "--sim-warmup-seconds", "0",
    "--enable-metrics",
]  # fmt: skip


@contextlib.contextmanager
def simulator(time_scale: float, logdir: Path) -> Iterator[str]:
    """Run the simulator on a free loopback port until the block ends."""
    port = free_port()
    log = logdir / f"sim-{time_scale:g}.log"
    cmd = [sys.executable, "-m", "pytest_specdecode.sim", "--host", "127.0.0.1",
           "--port", str(port), *SIM_FLAGS, "--sim-time-scale", str(time_scale)]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        with requests.Session() as session:
            while True:
                if proc.poll() is not None:
                    raise SystemExit(
                        f"simulator exited {proc.returncode}: {log.read_text()[-800:]}"
                    )
                with contextlib.suppress(requests.RequestException):
                    if session.get(url + "/health_generate", timeout=5).status_code == 200:
                        break
                if time.monotonic() > deadline:
                    raise SystemExit(f"simulator not ready after 60 s: {log.read_text()[-800:]}")
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _row(s: AccuracySample) -> str:
    return (
        f"{s.case:>12}  client {s.client_tok_s:9.1f} tok/s ({s.client_tokens} tok)  "
        f"server {s.server_tok_s:9.1f} tok/s ({s.server_tokens:.0f} tok)  "
        f"diff {s.error_pct:+6.2f}%  client CPU {s.client_cpu_s:.2f} s"
    )


def capacity(url: str, repeats: int, context: int) -> list[AccuracySample]:
    """(a): concurrency 32, 512 tokens, as fast as the simulator goes."""
    case = ThroughputCase(context, 32, 512)
    with SGLangClient(url) as client:
        builder = PromptBuilder(client.count_tokens)
        measure_round(client, case, builder)  # warm-up, not reported
        return [measure_round(client, case, builder) for _ in range(repeats)]


def accuracy(url: str, repeats: int, context: int) -> list[AccuracySample]:
    """(b): concurrency 1, 8, 32 against the simulator's own counter."""
    samples = []
    with SGLangClient(url) as client:
        builder = PromptBuilder(client.count_tokens)
        measure_round(client, ThroughputCase(context, 8, 64), builder)  # warm-up
        for conc in (1, 8, 32):
            for _ in range(repeats):
                samples.append(measure_round(client, ThroughputCase(context, conc, 512), builder))
    return samples


def main(argv: list[str] | None = None) -> int:
    """Run both measurements and print them; exit 1 if a requirement is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="Default: %(default)r")
    parser.add_argument("--context", type=int, default=1024, help="Default: %(default)r")
    parser.add_argument(
        "--time-scale", type=float, default=1.0,
        help="simulator time scale for the accuracy figure. Default: %(default)r",
    )  # fmt: skip
    args = parser.parse_args(argv)
    ok = True
    with TemporaryDirectory() as tmp:
        with simulator(0, Path(tmp)) as url:
            print(f"(a) client capacity, concurrency 32, --sim-time-scale 0, ctx {args.context}:")
            cap = capacity(url, args.repeats, args.context)
            for s in cap:
                cpu_rate = s.client_tokens / s.client_cpu_s if s.client_cpu_s else float("inf")
                print(f"    {_row(s)}  ({cpu_rate:,.0f} tok per client CPU-second)")
            best = max(s.client_tok_s for s in cap)
            median = statistics.median(s.client_tok_s for s in cap)
            print(f"    sustained: median {median:,.0f} tok/s, best {best:,.0f} tok/s "
                  f"(requirement >= 10,000)")  # fmt: skip
            ok &= median >= 10_000
        with simulator(args.time_scale, Path(tmp)) as url:
            print(f"(b) accuracy vs simulator /metrics, --sim-time-scale {args.time_scale:g}:")
            acc = accuracy(url, args.repeats, args.context)
            for s in acc:
                print(f"    {_row(s)}")
            worst = max(abs(s.error_pct) for s in acc)
            print(f"    worst |diff| {worst:.2f}% (requirement <= 3%)")
            ok &= worst <= 3.0
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
