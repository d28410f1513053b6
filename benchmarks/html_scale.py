"""How the HTML page's time grows with the configs of a run (issue 33).

Builds a synthetic JSON report of N configs (a NONE baseline and N - 1 DFLASH
configs of a budget x window x topk sweep, each with 6 throughput cases with
intervals and an acceptance histogram, and 4 coding problems), finishes it as
a run does (speedups, degenerate output, break-even, the verdict with its
Pareto front) and writes the page with Plotly's real bundle
(``html.write``). Prints the seconds of both steps per size and exits 1 when
the requirement is missed: the page for 3,000 configs written in under 10 s,
and neither step clearly superlinear (seconds per config at the largest size
at most ``--max-growth`` times those at the smallest; linear is 1, quadratic
at 3,000 against 400 is 7.5). Each size is timed ``--repeat`` times, the best
kept, so a busy machine weighs less. The figures are the plugin's own work on
made-up data: no server is involved.

    .venv/bin/python benchmarks/html_scale.py [--sizes 400,1000,2000,3000] [--repeat 2]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pytest_specdecode.report import html, outputs
from pytest_specdecode.report.model import Report

REQUIREMENT_SECONDS = 10.0
"""The page for :data:`REQUIREMENT_CONFIGS` configs is written in less than this."""
REQUIREMENT_CONFIGS = 3000
MAX_GROWTH = 2.0
"""Seconds per config at the largest size over those at the smallest, at most."""
CONTEXTS = (60, 1024)
CONCURRENCY = (1, 8, 32)


def _interval(mean: float) -> dict[str, Any]:
    values = [mean * 0.99, mean, mean * 1.01]
    half = 4.303 * mean * 0.01 / 3**0.5
    return {"mean": mean, "low": mean - half, "high": mean + half, "n": 3, "values": values}


def _case(context: int, concurrency: int, tok_s: float, accept: float | None) -> dict[str, Any]:
    case = f"ctx{context}-c{concurrency}-t128-chat"
    tokens = 256 * concurrency
    metrics: dict[str, Any] = {
        "case": case,
        "context": context,
        "concurrency": concurrency,
        "domain": "chat",
        "load": f"c{concurrency}",
        "max_tokens": 128,
        "rounds": 3,
        "requests": 2 * concurrency,
        "errors": 0,
        "completion_tokens": tokens,
        "wall_time_s": tokens / tok_s,
        "tok_s": tok_s,
        "accept_length": accept,
        "ttft_ms_p50": 10.0 + context / 100,
        "tpot_ms_p50": 1000 * concurrency / tok_s,
        "req_tok_s_p50": tok_s / concurrency,
        "repetition": 0.05,
        "intervals": {
            "tok_s": _interval(tok_s),
            "tpot_ms": _interval(1000 * concurrency / tok_s),
            "req_tok_s": _interval(tok_s / concurrency),
            "accept_length": _interval(accept) if accept else None,
        },
    }
    if accept is not None:
        steps = round(tokens / accept)
        metrics["spec_verify_ct"] = steps
        metrics["accept_histogram"] = [steps // 4, steps // 4, steps // 4, steps - 3 * (steps // 4)]
    return {"case": case, "metrics": metrics, "key": f"test_tp.py::test_throughput[{case}]"}


def _config(algorithm: str, budget: int | None, window: int | None, topk: int | None) -> Any:
    config: dict[str, Any] = {
        "algorithm": algorithm,
        "budget": budget,
        "topk": topk,
        "window": window,
        "draft_model": None if algorithm == "NONE" else "sim/dflash-drafter",
        "extra": [],
    }
    parts = [algorithm] + [f"{k}={config[k]}" for k in ("budget", "topk", "window") if config[k]]
    b = budget or 1
    accept = None if algorithm == "NONE" else 1.0 + b**0.5 * 0.8 - (topk or 1) * 0.01
    cases = [
        _case(ctx, c, round(60.0 * c**0.8 * (accept or 1.0) / (1 + c / 16) ** (b / 8), 3), accept)
        for ctx in CONTEXTS
        for c in CONCURRENCY
    ]
    coding: list[dict[str, Any]] = [
        {"problem": f"problem_{i}", "passed": i != b % 4, "status": "passed", "reason": "",
         "samples": 1, "correct": int(i != b % 4), "latency": 0.5, "completion_tokens": 40,
         "accept_length": accept}
        for i in range(4)
    ]  # fmt: skip
    passed = sum(r["passed"] for r in coding)
    return {
        "label": " ".join(parts),
        "config": config,
        "service": {"restarted": True, "ready_seconds": 1.5, "simulated": True,
                    "phases": [["loading", 0.001], ["warming up", 1.2], ["verified", 1.5]]},
        "pass_rate": {"rate": passed / 4, "passed": passed, "total": 4},
        "pass_at_k": [{"k": 1, "value": passed / 4}],
        "accept_length": accept,
        "coding": coding,
        "throughput": cases,
        "lossless": [],
        "errors": [],
    }  # fmt: skip


def report(configs: int) -> dict[str, Any]:
    """A report of ``configs`` configs (the baseline first), as a run writes it."""
    grid = itertools.product(range(1, 65), (512, 1024, 2048, 4096, 8192), range(1, 11))
    entries = [_config("NONE", None, None, None)]
    entries += [_config("DFLASH", b, w, k) for b, w, k in itertools.islice(grid, configs - 1)]
    return {
        "format": 2, "plugin": "0.1.0", "started": "2026-12-03T10:00:00+00:00",
        "hosts": ["localhost"], "control": "local", "dialect": "sglang",
        "launch": "python -m pytest_specdecode.sim", "simulated": True, "git_commit": None,
        "configs": entries, "other_failures": [], "compare": None, "gates": {"failed": []},
    }  # fmt: skip


def judge(data: dict[str, Any]) -> Report:
    """The typed report with what RunOutputs adds before the page: speedups, degenerate
    output, break-even, the verdict."""
    found = Report.from_dict(data)
    outputs.judge(found, 0.5)
    return found


def measure(configs: int, repeat: int, out: Path) -> tuple[float, float, int]:
    """(best seconds to judge, best seconds to write the page, the page's bytes)."""
    judged, written = [], []
    for _ in range(repeat):
        data = report(configs)
        start = time.perf_counter()
        found = judge(data)
        judged.append(time.perf_counter() - start)
        start = time.perf_counter()
        html.write(found, out)
        written.append(time.perf_counter() - start)
    return min(judged), min(written), out.stat().st_size


def verdict_of(
    seconds: dict[int, tuple[float, float]], limit: float, max_growth: float
) -> tuple[int, list[str]]:
    """The exit status and the lines saying why: 1 when the page for
    :data:`REQUIREMENT_CONFIGS` configs took ``limit`` s or more, or either step's
    seconds per config grew more than ``max_growth`` times from the smallest size."""
    problems = []
    sizes = sorted(seconds)
    if REQUIREMENT_CONFIGS in seconds and seconds[REQUIREMENT_CONFIGS][1] >= limit:
        problems.append(
            f"the page for {REQUIREMENT_CONFIGS:,} configs took "
            f"{seconds[REQUIREMENT_CONFIGS][1]:.2f} s (requirement < {limit:g} s)"
        )
    small, large = sizes[0], sizes[-1]
    for index, step in enumerate(("judge", "page")):
        if large == small or seconds[small][index] <= 0:
            continue
        growth = (seconds[large][index] / large) / (seconds[small][index] / small)
        if growth > max_growth:
            problems.append(
                f"{step}: seconds per config grew {growth:.2f}x from {small:,} to {large:,} "
                f"configs (requirement <= {max_growth:g}x: linear)"
            )
    return (1 if problems else 0), problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="400,1000,2000,3000", help="Default: %(default)r")
    parser.add_argument("--repeat", type=int, default=2, help="Default: %(default)r")
    parser.add_argument(
        "--max-seconds", type=float, default=REQUIREMENT_SECONDS, help="Default: %(default)r"
    )
    parser.add_argument("--max-growth", type=float, default=MAX_GROWTH, help="Default: %(default)r")
    opts = parser.parse_args(argv)
    sizes = sorted({int(s) for s in opts.sizes.split(",")})
    if html.plotly_js() is None:
        print("plotly is not installed: the page would have no charts to time; FAIL")
        return 1
    seconds: dict[int, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            judged, written, size_bytes = measure(size, max(opts.repeat, 1), Path(tmp) / "r.html")
            seconds[size] = (judged, written)
            print(
                f"{size:>6,} configs: judge {judged:6.2f} s, page {written:6.2f} s "
                f"({written / size * 1000:.2f} ms per config, {size_bytes / 1e6:.1f} MB)",
                flush=True,
            )
    status, problems = verdict_of(seconds, opts.max_seconds, opts.max_growth)
    print(
        f"requirement: the page for {REQUIREMENT_CONFIGS:,} configs in < {opts.max_seconds:g} s; "
        f"seconds per config at {sizes[-1]:,} at most {opts.max_growth:g}x those at {sizes[0]:,}"
    )
    for line in problems:
        print(line)
    print("PASS" if status == 0 else "FAIL")
    return status


if __name__ == "__main__":
    sys.exit(main())
