"""The plugin's terminal summary: per config readiness, pass rate, throughput.

pytest-benchmark's own table shows only times; this one shows what the run
is for. Plain functions returning lines, so ``pytest-specdecode report`` can
print the same summary from a saved JSON report.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pytest_specdecode import figures
from pytest_specdecode.throughput.comparison import CaseRow, render_sweep

SIM_NOTICE = "simulated server: these figures come from the bundled simulator, not a GPU"


def render(report: dict[str, Any], gate_lines: Iterable[str] = ()) -> list[str]:
    """Summary lines from a report dict (``RunResults.to_json()`` plus metadata)."""
    configs: list[dict[str, Any]] = report.get("configs", [])
    lines: list[str] = []
    if not configs:
        return lines
    if report.get("simulated") or any(c.get("service", {}).get("simulated") for c in configs):
        lines.append(f"NOTE: {SIM_NOTICE}")
    lines.extend(_config_table(configs))
    lines.extend(_coding_times(configs))
    short = short_labels(configs)
    rows = [
        CaseRow(
            key=t["case"],
            fullname=t["case"],
            case=t["case"],
            config=short[c["label"]],
            tok_s=t["metrics"].get("tok_s"),
            accept_length=t["metrics"].get("accept_length"),
            extra_info=t["metrics"],
        )
        for c in configs
        for t in c.get("throughput", [])
    ]
    if rows:
        lines += ["", "throughput: output tok/s and accept length per case and config"]
        measured = [short[c["label"]] for c in configs if c.get("throughput")]
        lines += render_sweep(rows, configs=measured).splitlines()
        lines += ["", *_latency_table(configs)]
    for c in configs:
        failed = [r for r in c.get("coding", []) if not r["passed"]]
        if failed:
            lines += ["", f"coding failures under {c['label']}:"]
            lines += [f"  {r['problem']}: {r['status']}: {r['reason']}" for r in failed]
    compare = report.get("compare")
    if compare:
        lines += ["", f"compared with {compare['baseline']}:", *compare["table"].splitlines()]
    gate_lines = list(gate_lines)
    if gate_lines:
        lines += ["", "dflash gates FAILED:"] + [f"  {line}" for line in gate_lines]
    return lines


def short_labels(configs: list[dict[str, Any]]) -> dict[str, str]:
    """Config labels reduced to the keys that differ between the measured configs.

    A budget sweep's columns read ``budget=4``, ``budget=8``... instead of the
    whole label repeated; a single config keeps its full label.
    """
    measured = [c for c in configs if c.get("throughput")]
    keys = ("algorithm", "budget", "topk", "window", "draft_model")
    varying = [k for k in keys if len({str(c["config"].get(k)) for c in measured}) > 1]
    extras = {str(c["config"].get("extra")) for c in measured}
    if len(measured) < 2 or len(extras) > 1 or not varying:
        return {c["label"]: c["label"] for c in configs}
    return {c["label"]: " ".join(f"{k}={c['config'].get(k)}" for k in varying) for c in configs}


def _config_table(configs: list[dict[str, Any]]) -> list[str]:
    header = ["config", "ready", "restarted", "pass rate", "pass@k", "accept len"]
    body: list[list[str]] = []
    for c in configs:
        service = c.get("service") or {}
        rate = c.get("pass_rate")
        passk = c.get("pass_at_k") or {}
        accept = c.get("accept_length")
        body.append(
            [
                c["label"],
                f"{service['ready_seconds']:.1f}s" if "ready_seconds" in service else "-",
                _restarted(service.get("restarted"), service.get("restart_proven")),
                _rate_cell(rate, c.get("coding", [])),
                " ".join(f"@{k} {v:.2f}" for k, v in passk.items()) if _sampled(c) else "-",
                f"{accept:.2f}" if accept else "-",
            ]
        )
        if c.get("errors"):
            body[-1][1] = "ERROR"
    return _table(header, body)


def _coding_times(configs: list[dict[str, Any]]) -> list[str]:
    """Per config: time spent generating the coding answers and checking them."""
    lines = []
    for c in configs:
        timed = [r for r in c.get("coding", []) if r.get("check_seconds") is not None]
        if timed:
            generating = sum(r.get("generate_seconds") or 0.0 for r in timed)
            checking = sum(r["check_seconds"] for r in timed)
            answers = sum(r.get("samples", 1) for r in timed)
            lines.append(
                f"coding time under {c['label']}: generating {generating:.1f} s, checking "
                f"{checking:.1f} s ({answers} answers; checks run in parallel with generation)"
            )
    return lines


def _latency_table(configs: list[dict[str, Any]]) -> list[str]:
    header = [
        "config",
        "case",
        "tok/s",
        "req tok/s p50",
        "TTFT p50/p99 ms",
        "TPOT p50 ms",
        "ITL p50 ms",
        "tok/chunk",
        "errors",
    ]
    body: list[list[str]] = []
    for c in configs:
        for t in c.get("throughput", []):
            m = t["metrics"]
            body.append(
                [
                    c["label"],
                    t["case"],
                    figures.rate(m.get("tok_s")),
                    figures.rate(m.get("req_tok_s_p50")),
                    f"{_num(m.get('ttft_ms_p50'), 1)}/{_num(m.get('ttft_ms_p99'), 1)}",
                    _num(m.get("tpot_ms_p50"), 2),
                    _num(m.get("itl_ms_p50"), 2),
                    _num(m.get("tokens_per_chunk_mean"), 2),
                    str(m.get("errors", 0)),
                ]
            )
    return _table(header, body)


def _sampled(config: dict[str, Any]) -> bool:
    return any(r.get("samples", 1) > 1 for r in config.get("coding", []))


def _rate_cell(rate: dict[str, Any] | None, coding: list[dict[str, Any]]) -> str:
    """``4/5 = 80%`` (problems), or with several samples ``13/20 samples = 65%``."""
    if not rate:
        return "-"
    if not any(r.get("samples", 1) > 1 for r in coding):
        return f"{rate['passed']}/{rate['total']} = {rate['rate']:.0%}"
    sizes = {r["samples"] for r in coding}
    if len(sizes) == 1:
        right = sum(r["correct"] for r in coding)
        return f"{right}/{len(coding) * sizes.pop()} samples = {rate['rate']:.0%}"
    return f"{rate['rate']:.0%} (mean pass@1)"


def _restarted(value: Any, proven: Any = True) -> str:
    if value is None:
        return "-"
    if value and proven is False:
        return "not proven"
    return "yes" if value else "no (live)"


def _num(value: Any, digits: int) -> str:
    return figures.number(value, digits)


def _table(header: list[str], body: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    out.append("  ".join("-" * w for w in widths))
    for row in body:
        out.append("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    return out
