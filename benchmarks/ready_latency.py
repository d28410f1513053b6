"""How soon after the simulator's "fired up" line the readiness gate returns.

The simulator logs "The server is fired up and ready to roll!" at the moment
/health_generate turns 200 (as SGLang does after warmup). This starts the
simulator N times, timestamps that line with time.monotonic() as it is read
from the process's output pipe, runs the gate with its default settings
(poll every 0.25 s, /health_generate then /server_info verified by the
sglang dialect) and records ready_time - fired_up_time.

    .venv/bin/python benchmarks/ready_latency.py [--runs 10] [--poll-interval 0.25]

Prints median and max; exits 1 when the max exceeds the 1 s requirement.
A negative figure would mean the gate passed before the line was read.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time
from typing import IO

from pytest_specdecode.config.dialects import get_dialect
from pytest_specdecode.config.spec import SpecConfig
from pytest_specdecode.processes.children import free_port
from pytest_specdecode.service.readiness import wait_until_ready

FIRED_UP = "The server is fired up and ready to roll!"
REQUIREMENT_S = 1.0


def _watch(stream: IO[str], seen: dict[str, float], event: threading.Event) -> None:
    for line in stream:
        if FIRED_UP in line and "fired" not in seen:
            seen["fired"] = time.monotonic()
            event.set()
    stream.close()


def measure_once(poll_interval: float) -> float:
    """One simulator start; returns gate-ready minus fired-up, in seconds."""
    port = free_port()
    config = SpecConfig(algorithm="DFLASH", budget=8, window=2048, draft_model="d")
    dialect = get_dialect("sglang")
    argv = [
        sys.executable,
        "-m",
        "pytest_specdecode.sim",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *dialect.render(config).argv,
        "--sim-load-seconds",
        "0.5",
        "--sim-warmup-seconds",
        "0.5",
        "--sim-time-scale",
        "0",
    ]
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        start_new_session=True,
    )
    seen: dict[str, float] = {}
    event = threading.Event()
    assert proc.stdout is not None
    reader = threading.Thread(target=_watch, args=(proc.stdout, seen, event), daemon=True)
    reader.start()
    try:
        wait_until_ready(
            f"http://127.0.0.1:{port}",
            verify=lambda info: dialect.verify(config, info),
            label=config.label(),
            timeout=60.0,
            poll_interval=poll_interval,
        )
        ready = time.monotonic()
        if not event.wait(5.0):
            raise RuntimeError("the simulator never printed the 'fired up' line")
        return ready - seen["fired"]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        reader.join(timeout=5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--poll-interval", type=float, default=0.25)
    args = parser.parse_args(argv)
    latencies = [measure_once(args.poll_interval) for _ in range(args.runs)]
    for i, value in enumerate(latencies, 1):
        print(f"run {i:2d}: ready {value * 1000:7.1f} ms after the 'fired up' line")
    median, worst = statistics.median(latencies), max(latencies)
    print(
        f"readiness latency over {args.runs} runs (poll interval {args.poll_interval} s): "
        f"median {median * 1000:.0f} ms, max {worst * 1000:.0f} ms, "
        f"min {min(latencies) * 1000:.0f} ms; requirement: <= {REQUIREMENT_S * 1000:.0f} ms"
    )
    status = 0 if worst <= REQUIREMENT_S else 1
    print("PASS" if status == 0 else "FAIL")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
