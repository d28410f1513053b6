"""A start that fails for a transient reason is retried and passes; a bad flag is not retried.

Against the real simulator: ``oom-on-first-start`` makes the first start of a
config run out of CUDA memory (once per state file), ``--sim-fault bogus`` is
refused by the simulator's parser (exit status 2) on every start.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

TESTS = """
import pytest

@pytest.mark.dflash(budget=8, sim_fault="oom-on-first-start", sim_state_file="first-start")
def test_flaky_start(dflash_service):
    assert dflash_service.server_info["speculative_num_draft_tokens"] == 8

@pytest.mark.dflash(budget=4, sim_fault="bogus")
def test_bad_flag(dflash_service):
    pass
"""


def test_a_transient_start_is_retried_and_a_bad_flag_is_not(
    pytester: pytest.Pytester, sim_project: Callable[[pytest.Pytester, str], None]
) -> None:
    sim_project(pytester, "--sim-load-seconds 0.1 --sim-warmup-seconds 0.1")
    sim_ini = pytester
    sim_ini.makepyfile(test_retry=TESTS)
    result = sim_ini.runpytest(
        "-v", "-p", "no:cacheprovider", "--dflash-start-retry-pause=0.1", "--basetemp=bt"
    )
    result.assert_outcomes(passed=1, errors=1)
    # The summary names the retried config only: the bad flag was started once.
    retried = [line for line in result.stdout.lines if line.startswith("dflash retried:")]
    assert len(retried) == 1, retried
    assert "budget=8" in retried[0]
    assert "CUDA out of memory at start-up" in retried[0]
    result.stdout.fnmatch_lines(
        ["*start 1 on localhost failed (CUDA out of memory at start-up): retrying in 0.1 s*"]
    )
    logs = sorted((sim_ini.path / "bt" / "dflash-logs").glob("server-*.log"))
    texts = [p.read_text() for p in logs]
    assert sum("CUDA out of memory" in t for t in texts) == 1
    assert sum("unknown fault 'bogus'" in t for t in texts) == 1, "the bad flag started once"
    assert len(logs) == 3
    report = json.loads((sim_ini.path / "report.json").read_text())
    by_budget = {c["config"]["budget"]: c for c in report["configs"]}
    (attempt,) = by_budget[8]["service"]["start_attempts"]
    assert attempt["kind"] == "cuda-oom"
    assert attempt["retried_after_seconds"] == 0.1
    assert by_budget[8]["service"]["restarted"] is True
    bad = by_budget[4]["service"]
    assert bad["ready"] is False
    (refused,) = bad["start_attempts"]
    assert (refused["kind"], refused["retried_after_seconds"]) == ("deterministic", None)
