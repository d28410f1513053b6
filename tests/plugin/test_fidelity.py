"""End to end against the simulator: the drafter's line in the gate, flags checked first."""

from __future__ import annotations

import sys

import pytest

from .conftest import write_sim_ini

TEST = """
import pytest

@pytest.mark.dflash(budget=8, window=2048)
def test_runs(dflash_service):
    assert dflash_service.server_info["speculative_draft_window_size"] == 2048
"""


def test_verbose_run_shows_the_drafters_own_line(pytester: pytest.Pytester) -> None:
    write_sim_ini(pytester)
    pytester.makepyfile(TEST)
    result = pytester.runpytest("-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*[[]dflash[]] drafter: block_size=8 draft_window_size=2048 compact_cache=True (pid *)"]
    )


def test_drafter_ignoring_the_window_fails_the_gate(pytester: pytest.Pytester) -> None:
    # The original incident: flags and /server_info say 2048, the drafter runs full attention.
    write_sim_ini(pytester, "--sim-fault drafter-ignores-window")
    pytester.makepyfile(TEST)
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*drafter of config 'DFLASH budget=8 window=2048'*does not run it: "
            "draft_window_size=None, compact_cache=False but the config asks window=2048*"
            "its start-up line: '*Initialized DFLASH draft runner.*draft_window_size=None, "
            "compact_cache=False'*"
        ]
    )


def test_a_flag_sglang_refuses_fails_collection_and_starts_nothing(
    pytester: pytest.Pytester,
) -> None:
    started = pytester.path / "started"
    launcher = pytester.makepyfile(
        launcher=f"import pathlib\npathlib.Path({str(started)!r}).write_text('x')\n"
    )
    pytester.makeini(
        f"[pytest]\ndflash_launch = {sys.executable} {launcher}\ndflash_draft_model = /m/d\n"
    )
    pytester.makepyfile(TEST)
    result = pytester.runpytest("--dflash-config", "cuda_graph_max_bs=32")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*test_*.py::test_runs: bad dflash config: SGLang 0.5.23 (dialect 'sglang') refuses "
            "flag --cuda-graph-max-bs: it is an ambiguous abbreviation of "
            "--cuda-graph-max-bs-decode and --cuda-graph-max-bs-prefill; spell one of them out"
        ]
    )
    assert not started.exists()
