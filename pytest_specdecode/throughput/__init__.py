"""Throughput benchmarking: cases, load rounds, metrics, comparison, lossless checks."""

from __future__ import annotations

from pytest_specdecode.throughput.load import (
    RoundResult,
    ThroughputError,
    raise_for_errors,
    run_case,
    run_round,
)
from pytest_specdecode.throughput.metrics import CaseMetrics, case_metrics
from pytest_specdecode.throughput.workload import (
    DEFAULT_CONCURRENCY,
    DEFAULT_CONTEXTS,
    DEFAULT_MAX_TOKENS,
    PromptBuilder,
    ThroughputCase,
    make_cases,
    parse_int_list,
)

__all__ = [
    "DEFAULT_CONCURRENCY",
    "DEFAULT_CONTEXTS",
    "DEFAULT_MAX_TOKENS",
    "CaseMetrics",
    "PromptBuilder",
    "RoundResult",
    "ThroughputCase",
    "ThroughputError",
    "case_metrics",
    "make_cases",
    "parse_int_list",
    "raise_for_errors",
    "run_case",
    "run_round",
]
