"""Server counters and their Prometheus text (``/metrics`` with ``--enable-metrics``)."""

from __future__ import annotations

import gzip
from dataclasses import dataclass

TEXT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def exposition(text: str, accept_encoding: str | None) -> tuple[bytes, dict[str, str]]:
    """The body and headers of a ``/metrics`` answer, as prometheus_client (SGLang's
    exporter) makes them: gzipped whenever the request's ``Accept-Encoding`` lists
    gzip (any q-value), plain otherwise."""
    body = text.encode()
    headers = {"Content-Type": TEXT_TYPE}
    offered = (part.split(";")[0].strip().lower() for part in (accept_encoding or "").split(","))
    if "gzip" in offered:
        body = gzip.compress(body)
        headers["Content-Encoding"] = "gzip"
    return body, headers


@dataclass
class Metrics:
    """Running totals; generated tokens are counted when their chunk is sent."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    requests: int = 0
    verify_calls: int = 0
    running: int = 0

    def prometheus(self, model_name: str, accept_length: float) -> str:
        """The exposition text, with SGLang's metric names."""
        label = '{model_name="' + model_name.replace("\\", "\\\\").replace('"', '\\"') + '"}'
        rows = (
            (
                "sglang:prompt_tokens_total",
                "counter",
                "Number of prefill tokens processed.",
                self.prompt_tokens,
            ),
            (
                "sglang:generation_tokens_total",
                "counter",
                "Number of generation tokens processed.",
                self.generation_tokens,
            ),
            (
                "sglang:num_requests_total",
                "counter",
                "Number of requests processed.",
                self.requests,
            ),
            (
                "sglang:spec_verify_calls_total",
                "counter",
                "Number of speculative verify steps.",
                self.verify_calls,
            ),
            ("sglang:num_running_reqs", "gauge", "The number of running requests.", self.running),
            ("sglang:spec_accept_length", "gauge", "The average acceptance length.", accept_length),
        )
        out = []
        for name, kind, help_text, value in rows:
            out.append(f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n")
            out.append(f"{name}{label} {float(value)}\n")
        return "".join(out)
