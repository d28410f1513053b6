"""End to end against the simulator: each start's phases in the report and the summary."""

from __future__ import annotations

import json
import re
from datetime import datetime

import pytest

from .conftest import write_sim_ini
from .test_service_e2e import run, server_logs

# The simulator's configured phases (seconds): loading, KV cache, CUDA graphs, warm-up.
CONFIGURED = {"load": 0.4, "kv_cache": 0.2, "graph_capture": 0.3, "warmup": 0.2}
# Where each phase ends and begins in the server's log (the lines SGLang 0.5.23 prints).
BOUNDS = {
    "load": ("Load weight begin.", "Load weight end."),
    "kv_cache": ("Load weight end.", "Memory pool end."),
    "graph_capture": ("CUDA graph begin.", "CUDA graph end."),
    "warmup": ("CUDA graph end.", "The server is fired up"),
}
STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3})\] (.*)$")


def spent(log: str) -> dict[str, float]:
    """What the simulator really spent in each phase, by its own millisecond stamps (a
    busy machine stretches its sleeps; the plugin must measure what happened)."""
    seen: dict[str, float] = {}
    for line in log.splitlines():
        found = STAMP.match(line)
        if found:
            at = datetime.strptime(found[1], "%Y-%m-%d %H:%M:%S.%f").timestamp()
            for begin, end in BOUNDS.values():
                for marker in (begin, end):
                    if marker in found[2]:
                        seen.setdefault(marker, at)
    return {name: seen[end] - seen[begin] for name, (begin, end) in BOUNDS.items()}


def test_the_report_shows_each_start_phase_within_5_percent(pytester: pytest.Pytester) -> None:
    write_sim_ini(
        pytester,
        "--sim-load-seconds 0.4 --sim-kv-seconds 0.2 --sim-graph-seconds 0.3 "
        "--sim-warmup-seconds 0.2",
    )
    pytester.makepyfile(
        test_m="""
        import pytest

        @pytest.mark.dflash(budget=8, window=2048)
        def test_a(dflash_service):
            assert dflash_service.start_phases.load is not None
        """
    )
    result = run(pytester)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*ready in *s (*); load 0.4?s, KV cache 0.2?s, CUDA graphs 0.3?s, warm-up 0.2?s*",
            "start phases: from the server's log lines*",
            "*config*start*load*KV cache*CUDA graphs*warm-up*other*first generate*weight cache*",
        ]
    )
    (log,) = server_logs(pytester)
    actual = spent(log)
    config = json.loads((pytester.path / "report.json").read_text())["configs"][0]
    phases = config["start_phases"]
    for name, configured in CONFIGURED.items():
        shown = phases[f"{name}_seconds"]
        # What the server spent, within 5% of the configured phase; never less than it.
        assert shown == pytest.approx(actual[name], abs=0.05 * configured), name
        assert shown >= configured * 0.95, name
    assert phases["resolution_seconds"] == 0.001
    assert phases["weight_cache"] == "off"
    assert phases["total_seconds"] >= sum(phases[f"{n}_seconds"] for n in CONFIGURED)
    assert 0 < phases["first_generate_seconds"] <= phases["total_seconds"]
    assert "start_phases" not in config["service"]
