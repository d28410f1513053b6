"""Check the client's token rate against the server's own counter.

The server counts generated tokens in ``sglang:generation_tokens_total``
(``/metrics``). Scraping it just before and just after a round brackets the
round, so the server-side rate over that interval is a reference the
client's aggregate tok/s must match.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from pytest_specdecode.client.sglang import ServerError, SGLangClient
from pytest_specdecode.throughput.load import raise_for_errors, run_round
from pytest_specdecode.throughput.metrics import case_metrics
from pytest_specdecode.throughput.workload import PromptBuilder, ThroughputCase

GENERATION_TOKENS = "sglang:generation_tokens_total"


@dataclass(frozen=True)
class AccuracySample:
    """One round's client-reported rate next to the server's count."""

    case: str
    client_tokens: int
    client_tok_s: float
    server_tokens: float
    server_tok_s: float
    client_cpu_s: float

    @property
    def error_pct(self) -> float:
        """Client rate relative to the server's, in percent (positive: client higher)."""
        return (self.client_tok_s / self.server_tok_s - 1) * 100 if self.server_tok_s else 0.0


def measure_round(
    client: SGLangClient,
    case: ThroughputCase,
    builder: PromptBuilder,
    *,
    clock: Callable[[], float] = time.perf_counter,
) -> AccuracySample:
    """Run one round of ``case`` bracketed by two ``/metrics`` scrapes."""
    prompts = builder.build(case.context, case.concurrency)
    try:
        before = client.metric_value(GENERATION_TOKENS)
    except ServerError as exc:
        if exc.status != 404:
            raise
        raise RuntimeError(
            f"{client.base_url}/metrics is not served; start the server with --enable-metrics"
        ) from None
    if before is None:
        # It answered (so metrics are on), decoded by its Content-Encoding: the name is
        # what is missing, not the option.
        raise RuntimeError(
            f"{client.base_url}/metrics answered without {GENERATION_TOKENS!r}; "
            "is it SGLang's exporter?"
        )
    t0 = clock()
    cpu0 = time.process_time()
    result = run_round(client, prompts, case.max_tokens, ignore_eos=case.ignore_eos, clock=clock)
    cpu1 = time.process_time()
    t1 = clock()
    after = client.metric_value(GENERATION_TOKENS) or 0.0
    raise_for_errors(result, case.id)
    metrics = case_metrics(case, [result])
    return AccuracySample(
        case=case.id,
        # Always set by case_metrics (None only in a report that lacks them).
        client_tokens=metrics.completion_tokens or 0,
        client_tok_s=metrics.tok_s or 0.0,
        server_tokens=after - before,
        server_tok_s=(after - before) / (t1 - t0),
        client_cpu_s=cpu1 - cpu0,
    )
