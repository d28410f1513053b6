"""The terminal summary's warnings."""

from __future__ import annotations

from pytest_specdecode.report.client_limit import OVERHEAD_SHARE, SHOWN_CASES, overhead_warning
from pytest_specdecode.report.model import ConfigResults, Metrics, ThroughputRecord


def config(label: str, *cases: tuple[str, float | None, float]) -> ConfigResults:
    return ConfigResults(
        label=label,
        throughput=[
            ThroughputRecord(
                case=case, metrics=Metrics(client_overhead_ms_p99=over, e2e_ms_p50=e2e)
            )
            for case, over, e2e in cases
        ],
    )


def test_client_overhead_is_one_warning_for_the_run_naming_the_worst_cases_first() -> None:
    limited = [(f"ctx60-c{n}", OVERHEAD_SHARE * 100 * (1.1 + n / 10), 100.0) for n in range(8)]
    configs = [
        config("DFLASH budget=8", *limited[:4], ("ctx60-c99", 0.1, 100.0)),
        config("DFLASH budget=16", *limited[4:], ("ctx60-c98", None, 100.0)),
    ]
    short = {"DFLASH budget=8": "b8", "DFLASH budget=16": "b16"}
    (line,) = overhead_warning(configs, short)
    assert line.startswith("WARNING: in 8 of 9 cases the client overhead p99 exceeds 2%")
    worst = ", ".join(f"ctx60-c{n} (b16)" for n in (7, 6, 5, 4)[:SHOWN_CASES])
    assert f"(the worst first: {worst} and 4 more)" in line


def test_no_case_over_the_share_no_warning() -> None:
    assert overhead_warning([config("NONE", ("ctx60-c1", 1.0, 100.0))], {}) == []
