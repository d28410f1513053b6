"""The demo sweep's speculation policy, replayed on a low/high load trace (simulated).

Runs the example project's sweep (conftest_examples, as ``make demo`` does) once at
concurrency 1 and --high, which writes its policy file (report/policy.py). Then
starts one bundled simulator per config of the sweep (NONE and each DFLASH
budget) and replays a trace alternating low (c1) and high (c--high) load
phases, each phase sent by the plugin's own load client, under every strategy
in turn: each single config alone, and the policy (each phase routed to the
server of its band's config). Prints output tok/s per phase and over the trace.

The requirement: the policy's tok/s over the trace is at least the best single
config's less the noise (the spread of that config's repetitions, at least
--tolerance), and in every phase the policy's config is at least 0.95x of NONE
there. Exits 1 otherwise. The figures are the simulator's, never GPU results.

    .venv/bin/python benchmarks/policy_replay.py [--high 32] [--repeat 3] [--time-scale 0.5]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pytest_specdecode.client import SGLangClient
from pytest_specdecode.config.dialects import get_dialect
from pytest_specdecode.config.spec import config_from_dict
from pytest_specdecode.processes.children import free_port
from pytest_specdecode.report import policy
from pytest_specdecode.statefiles import wait_until
from pytest_specdecode.throughput.load import raise_for_errors, run_round
from pytest_specdecode.throughput.workload import PromptBuilder

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "conftest_examples"
OUTPUT_TOKENS = 128
CONTEXT = 1024  # the demo's (dflash_contexts)


def run_sweep(out: Path, high: int, scale: float) -> dict[str, Any]:
    """The demo's sweep at c1 and c``high``; its policy file."""
    launch = (
        f"{sys.executable} -m pytest_specdecode.sim --sim-time-scale {scale:g} "
        "--sim-load-seconds 0.2 --sim-warmup-seconds 0.1 --sim-answers answers.json"
    )
    argv = [
        *(sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"),
        *("-o", f"dflash_launch={launch}", f"--dflash-concurrency=1,{high}"),
        f"--dflash-output-tokens={OUTPUT_TOKENS}",
        *(f"--dflash-report={out / 'report.json'}", f"--dflash-policy={out / 'policy.json'}"),
        "--dflash-html=none",
    ]
    done = subprocess.run(argv, cwd=DEMO, capture_output=True, text=True, check=False)
    shown = [line for line in done.stdout.splitlines() if line.startswith(("dflash", "WARNING"))]
    print("\n".join(shown))
    path = out / "policy.json"
    if not path.exists():
        raise SystemExit(
            f"the sweep wrote no policy (exit {done.returncode}):\n{done.stdout[-3000:]}"
        )
    found: dict[str, Any] = json.loads(path.read_text())
    return found


@contextlib.contextmanager
def simulator(config: Mapping[str, Any], scale: float, logs: Path) -> Iterator[str]:
    """The simulator running ``config``, on a free port; its URL."""
    flags = get_dialect("sglang").render(config_from_dict(config)).argv
    port = free_port()
    argv = [
        *(sys.executable, "-m", "pytest_specdecode.sim", "--port", str(port)),
        *("--sim-time-scale", f"{scale:g}", "--sim-load-seconds", "0", "--sim-warmup-seconds", "0"),
        *flags,
    ]
    with (logs / f"sim-{port}.log").open("wb") as log:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        if proc.poll() is not None:
            raise SystemExit(
                f"simulator for {config} exited: {(logs / f'sim-{port}.log').read_text()[-800:]}"
            )
        with contextlib.suppress(OSError), urllib.request.urlopen(url + "/health", timeout=1) as r:
            return bool(r.status == 200)
        return False

    try:
        wait_until(healthy, timeout=60, what="the simulator", poll=0.05)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def phase(url: str, concurrency: int, seed: int) -> float:
    """One phase of the trace: 4 x concurrency requests, ``concurrency`` in flight; tok/s."""
    client = SGLangClient(url, timeout=120.0)
    try:
        builder = PromptBuilder(client.count_tokens, domain="code" if seed % 2 else "chat")
        prompts = builder.build(CONTEXT, 4 * concurrency)
        client.flush_cache()
        result = run_round(client, prompts, OUTPUT_TOKENS, max_concurrency=concurrency)
    finally:
        client.close()
    raise_for_errors(result, f"phase c{concurrency}")
    tokens = sum(r.completion_tokens for r in result.results)
    return tokens / result.wall_time


def label(config: Mapping[str, Any]) -> str:
    return config_from_dict(config).label()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--high", type=int, default=32, help="the high-load phase's concurrency")
    parser.add_argument("--repeat", type=int, default=3, help="times the trace is replayed")
    parser.add_argument("--time-scale", type=float, default=0.5, help="the simulator's")
    parser.add_argument("--tolerance", type=float, default=0.03, help="least noise allowance")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        started = time.monotonic()
        found = run_sweep(out, args.high, args.time_scale)
        print(f"policy (simulated: {found['simulated']}): {policy.describe(found)}")
        report = json.loads((out / "report.json").read_text())
        configs = {c["label"]: c["config"] for c in report["configs"] if c.get("throughput")}
        loads = [1, args.high]
        trace = loads * 2  # low, high, low, high
        rates: dict[str, list[list[float]]] = {name: [] for name in [*configs, "policy"]}
        with contextlib.ExitStack() as stack:
            urls = {
                name: stack.enter_context(simulator(config, args.time_scale, out))
                for name, config in configs.items()
            }
            for _ in range(args.repeat):
                per: dict[str, list[float]] = {name: [] for name in rates}
                for step, load in enumerate(trace):
                    chosen = label(policy.band_for(found, load)["config"])
                    for name in rates:
                        target = urls[chosen] if name == "policy" else urls[name]
                        per[name].append(phase(target, load, step))
                for name in rates:
                    rates[name].append(per[name])
        print(f"(sweep and replay: {time.monotonic() - started:.0f} s; simulated figures)")
    return verdict(rates, trace, found, args.tolerance)


def verdict(
    rates: dict[str, list[list[float]]],
    trace: list[int],
    found: Mapping[str, Any],
    tolerance: float,
) -> int:
    """Print the table; 0 when the policy meets the requirement, else 1."""

    weights = trace  # a phase sends 4 x its concurrency requests of equal length

    def total(runs: list[list[float]]) -> list[float]:
        # A trace's tok/s: all its tokens over all its time (a phase's time: its tokens / rate).
        return [
            sum(weights) / sum(w / r for w, r in zip(weights, run, strict=True)) for run in runs
        ]

    header = ["strategy", *[f"c{load}" for load in trace], "trace", "spread"]
    rows = []
    for name, runs in rates.items():
        means = [statistics.mean(run[i] for run in runs) for i in range(len(trace))]
        totals = total(runs)
        spread = (max(totals) - min(totals)) / statistics.mean(totals) if len(totals) > 1 else 0.0
        rows.append(
            [
                name,
                *[f"{m:,.0f}" for m in means],
                f"{statistics.mean(totals):,.0f}",
                f"{spread:.1%}",
            ]
        )
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)))
    singles = {n: statistics.mean(total(r)) for n, r in rates.items() if n != "policy"}
    best = max(singles, key=lambda n: singles[n])
    best_totals = total(rates[best])
    noise = max(tolerance, (max(best_totals) - min(best_totals)) / statistics.mean(best_totals))
    mine = statistics.mean(total(rates["policy"]))
    failures = []
    if mine < singles[best] * (1 - noise):
        failures.append(
            f"the policy's {mine:,.0f} tok/s is below the best single config ({best}: "
            f"{singles[best]:,.0f} tok/s) beyond the noise ({noise:.1%})"
        )
    none = next((n for n in rates if n == "NONE"), None)
    if none is not None:
        for i, load in enumerate(trace):
            ours = statistics.mean(run[i] for run in rates["policy"])
            base = statistics.mean(run[i] for run in rates[none])
            if ours < policy.FLOOR * base:
                failures.append(f"phase {i + 1} (c{load}): the policy is {ours / base:.2f}x NONE")
    print(
        f"policy {mine:,.0f} tok/s vs best single config {best} {singles[best]:,.0f} tok/s "
        f"({mine / singles[best]:.2f}x; noise {noise:.1%}); bands: {policy.describe(found)}"
    )
    for line in failures:
        print(f"FAIL: {line}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
