"""Report dicts shaped like the plugin's JSON report, built here rather than read."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from pytest_specdecode.report.model import Report

CONTEXTS = (60, 1024)
CONCURRENCY = (1, 8, 32)
BUDGETS = (4, 8, 16)
WINDOWS = (1024, 2048)


def config_dict(
    algorithm: str, budget: int | None = None, window: int | None = None
) -> dict[str, Any]:
    return {
        "algorithm": algorithm,
        "budget": budget,
        "topk": None,
        "window": window,
        "draft_model": None if algorithm == "NONE" else "sim/dflash-drafter",
        "extra": [],
    }


def label_of(config: dict[str, Any]) -> str:
    parts = [config["algorithm"]]
    parts += [f"{k}={config[k]}" for k in ("budget", "topk", "window") if config[k] is not None]
    return " ".join(parts)


def interval(mean: float, spread: float = 0.01) -> dict[str, Any]:
    """Three rounds 1% apart around ``mean``, as the plugin keeps them."""
    values = [mean * (1 - spread), mean, mean * (1 + spread)]
    half = 4.303 * mean * spread / 3**0.5
    return {"mean": mean, "low": mean - half, "high": mean + half, "n": 3, "values": values}


def throughput_case(
    context: int, concurrency: int, tok_s: float, accept: float | None, domain: str = "chat"
) -> dict[str, Any]:
    """One case with the metric names the plugin records (values are made up)."""
    case = f"ctx{context}-c{concurrency}-t128-{domain}"
    tokens = 128 * concurrency * 2
    tpot = 1000 * concurrency / tok_s
    metrics: dict[str, Any] = {
        "case": case,
        "context": context,
        "concurrency": concurrency,
        "domain": domain,
        "load": f"c{concurrency}",
        "max_tokens": 128,
        "rounds": 3,
        "requests": 2 * concurrency,
        "errors": 0,
        "completion_tokens": tokens,
        "wall_time_s": tokens / tok_s,
        "tok_s": tok_s,
        "accept_length": accept,
        "tokens_per_chunk_mean": accept or 1.0,
        "ttft_ms_p50": 10.0 + context / 100,
        "ttft_ms_p90": 12.0 + context / 100,
        "ttft_ms_p99": 14.0 + context / 100,
        "tpot_ms_p50": 3.0,
        "itl_ms_p50": 9.0,
        "req_tok_s_p50": tok_s / concurrency,
        "intervals": {
            "tok_s": interval(tok_s),
            "tpot_ms": interval(tpot),
            "req_tok_s": interval(tok_s / concurrency),
            "accept_length": interval(accept) if accept else None,
        },
    }
    if accept is not None:
        metrics["spec_verify_ct"] = round(tokens / accept)
        # Steps by correct drafts, shaped like SGLang's spec_correct_drafts_histogram.
        steps = metrics["spec_verify_ct"]
        metrics["accept_histogram"] = [steps // 4, steps // 4, steps // 4, steps - 3 * (steps // 4)]
    return {"case": case, "metrics": metrics, "key": f"test_throughput.py::test_throughput[{case}]"}


def coding(problem: str, passed: bool) -> dict[str, Any]:
    return {
        "problem": problem,
        "passed": passed,
        "status": "passed" if passed else "wrong-answer",
        "reason": "" if passed else "add(2, 3) returned -1, expected 5",
        "samples": 1,
        "correct": int(passed),
        "latency": 0.5,
        "completion_tokens": 40,
        "accept_length": 3.0,
    }


def config_entry(
    config: dict[str, Any], *, throughput: bool = True, problems: int = 0, failing: int = 0
) -> dict[str, Any]:
    """One ``configs[]`` entry; throughput and accept length follow budget and window."""
    budget = config["budget"] or 1
    window = config["window"] or 4096
    accept = None if config["algorithm"] == "NONE" else 1.0 + budget**0.5 * 0.8
    cases = []
    if throughput:
        for context in CONTEXTS:
            for concurrency in CONCURRENCY:
                # Speculation helps less under load and when the context exceeds the window.
                speedup = (accept or 1.0) / (1 + concurrency / 16) ** (budget / 8)
                speedup *= 0.8 if context > window / 2 else 1.0
                tok_s = 60.0 * concurrency**0.8 * max(speedup, 0.5) * (1.2 - context / 8192)
                cases.append(throughput_case(context, concurrency, round(tok_s, 3), accept))
    records = [coding(f"problem_{i}", i >= failing) for i in range(problems)]
    passed = sum(r["passed"] for r in records)
    tokens = sum(c["metrics"]["completion_tokens"] for c in cases)
    steps = sum(c["metrics"].get("spec_verify_ct", 0) for c in cases)
    return {
        "label": label_of(config),
        "config": config,
        "service": {
            "restarted": True,
            "ready_seconds": 1.5 + budget / 10,
            "phases": [["loading", 0.001], ["warming up", 1.2], ["verified", 1.5]],
            "simulated": True,
        },
        "pass_rate": {"rate": passed / problems, "passed": passed, "total": problems}
        if problems
        else None,
        "pass_at_k": [{"k": 1, "value": passed / problems}] if problems else [],
        "accept_length": tokens / steps if steps else None,
        "coding": records,
        "throughput": cases,
        "lossless": [],
        "errors": [],
    }


def make_report(configs: list[dict[str, Any]], **top: Any) -> dict[str, Any]:
    report: dict[str, Any] = {
        "format": 2,
        "plugin": "0.1.0",
        "pytest": "9.2.0",
        "python": "3.11.7",
        "started": "2026-11-29T23:19:51+00:00",
        "hosts": ["localhost"],
        "control": "local",
        "dialect": "sglang",
        "launch": "python -m pytest_specdecode.sim",
        "simulated": True,
        "git_commit": None,
        "configs": configs,
        "other_failures": [],
        "compare": None,
        "gates": {"failed": []},
    }
    report.update(top)
    return report


def typed(report: dict[str, Any]) -> Report:
    """A report dict built here as the typed report every reader takes (converted once)."""
    return Report.from_dict(report)


def judged(report: dict[str, Any], excluded: dict[str, list[str]] | None = None) -> Report:
    """The report as RunOutputs finishes it: speedups, verdict and Pareto front added."""
    from pytest_specdecode.report import verdict

    found = typed(report)
    with_speedups(found)
    found.verdict = verdict.decide(found, excluded or {})
    return found


def with_speedups(report: Report) -> Report:
    """``report`` with each throughput case's speedup and the speedup method set, as
    RunOutputs sets them (``report`` itself, changed in place)."""
    from pytest_specdecode.report import verdict

    found = verdict.speedups(report)
    for (_, case), speedup in zip(verdict.throughput_cases(report), found, strict=True):
        case.speedup = speedup
    report.speedup = verdict.speedup_method(report, found)
    return report


def sweep_report() -> dict[str, Any]:
    """A NONE baseline beside a DFLASH budget x window sweep, with coding results."""
    configs = [config_entry(config_dict("NONE"), problems=4, failing=1)]
    for budget in BUDGETS:
        for window in WINDOWS:
            configs.append(
                config_entry(config_dict("DFLASH", budget, window), problems=4, failing=budget // 8)
            )
    return make_report(configs)


@pytest.fixture
def sweep() -> dict[str, Any]:
    """A fresh copy of the sweep report for each test."""
    return copy.deepcopy(sweep_report())
