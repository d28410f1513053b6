"""End to end against the real simulator: restarts, the gate, and its failures."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from pytest_specdecode.service.local import group_running


def server_logs(pytester: pytest.Pytester) -> list[str]:
    # runpytest_subprocess puts the run's basetemp in runpytest-N under the test dir.
    logs = sorted(pytester.path.glob("runpytest-[0-9]*/dflash-logs/server-*.log"))
    return [p.read_text() for p in logs]


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-v", "-p", "no:cacheprovider", *args)


def test_two_configs_start_the_server_twice_and_pass_the_gate(sim_ini: pytest.Pytester) -> None:
    sim_ini.makepyfile(
        test_m="""
        import pytest

        @pytest.mark.dflash(budget=8, window=2048)
        def test_a(dflash_service, dflash_client):
            # The gate has passed before the first test request: it is ready now.
            assert dflash_client.session.get(
                dflash_service.base_url + "/health_generate", timeout=10).status_code == 200
            assert dflash_service.server_info["speculative_num_draft_tokens"] == 8

        @pytest.mark.dflash(budget=4, window=1024)
        def test_b(dflash_service):
            assert dflash_service.server_info["speculative_draft_window_size"] == 1024

        @pytest.mark.dflash(budget=8, window=2048)
        def test_c(dflash_client):
            assert dflash_client.generate("hi", max_new_tokens=8).completion_tokens == 8
        """
    )
    result = run(sim_ini)
    result.assert_outcomes(passed=3)
    phases = "(loading (refused) -> warming up (503) -> verified)"
    result.stdout.fnmatch_lines(
        [
            f"*DFLASH budget=8 window=2048: ready in *s {phases}",
            f"*DFLASH budget=4 window=1024: ready in *s {phases}",
        ]
    )
    logs = server_logs(sim_ini)
    assert len(logs) == 2, "one start per distinct config"
    assert "block_size=8, draft_window_size=2048" in logs[0]
    assert "block_size=4, draft_window_size=1024" in logs[1]
    report = json.loads((sim_ini.path / "report.json").read_text())
    seen = [[p for p, _ in c["service"]["phases"]] for c in report["configs"]]
    assert seen == [["loading", "warming up", "verified"]] * 2


def test_crash_on_start_fails_fast_and_the_next_config_runs(sim_ini: pytest.Pytester) -> None:
    sim_ini.makepyfile(
        test_m="""
        import pytest

        @pytest.mark.dflash(budget=8, sim_fault="crash-on-start")
        def test_crashing(dflash_service): pass

        @pytest.mark.dflash(budget=8, sim_fault="crash-on-start")
        def test_crashing_too(dflash_service): pass

        @pytest.mark.dflash(budget=4)
        def test_fine(dflash_service): pass
        """
    )
    started = time.monotonic()
    result = run(sim_ini)
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*server for config 'DFLASH budget=8 sim-fault=crash-on-start'*exited with status 1*",
            "*last * log lines*",
        ]
    )
    # Both tests of the crashed config report it; the server started only twice.
    assert result.stdout.str().count("exited with status 1") >= 2
    assert len(server_logs(sim_ini)) == 2
    assert time.monotonic() - started < 20


@pytest.mark.parametrize(
    ("fault", "phase"),
    [("hang-on-load", "loading"), ("unhealthy", "warming up")],
)
def test_stuck_server_times_out_naming_the_phase(
    sim_ini: pytest.Pytester, fault: str, phase: str
) -> None:
    sim_ini.makepyfile(
        test_m=f"""
        import pytest

        @pytest.mark.dflash(budget=8, sim_fault="{fault}")
        def test_stuck(dflash_service): pass
        """
    )
    result = run(sim_ini, "--dflash-ready-timeout", "2")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*not ready after 2*{phase}*"])


def test_server_running_other_flags_fails_verification(sim_ini: pytest.Pytester) -> None:
    sim_ini.makepyfile(
        test_m="""
        import pytest

        @pytest.mark.dflash(budget=8, window=2048, sim_fault="stale-config")
        def test_stale(dflash_service): pass
        """
    )
    result = run(sim_ini)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*speculative_*expected*"])


LIVE_TESTS = """
import pytest

@pytest.mark.dflash(budget=8, window=2048)
def test_same(dflash_service):
    assert not dflash_service.restarted

@pytest.mark.dflash(budget=4, window=2048)
def test_other(dflash_service): pass
"""


def test_external_server_is_verified_and_other_configs_skip(
    sim_ini: pytest.Pytester, live_sim: int
) -> None:
    sim_ini.makepyfile(test_m=LIVE_TESTS)
    result = run(sim_ini, "-rs", "--dflash-restart", "never", "--dflash-port", str(live_sim))
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        ["SKIPPED *does not run DFLASH budget=4 window=2048*--dflash-restart=never*"]
    )
    assert server_logs(sim_ini) == []


def test_auto_restart_reuses_a_live_server_already_verified(
    sim_ini: pytest.Pytester, live_sim: int
) -> None:
    sim_ini.makepyfile(test_m=LIVE_TESTS)
    result = run(sim_ini, "--dflash-port", str(live_sim), "-k", "same")
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(["*live server already verified, no restart*"])
    assert server_logs(sim_ini) == []


def test_sigterm_stops_the_server_like_ctrl_c_and_keeps_the_report(
    sim_ini: pytest.Pytester,
) -> None:
    # CI cancelling a job, or timeout(1): SIGTERM, not Ctrl-C.
    sim_ini.makepyfile(
        test_t="""
        import os, signal
        import pytest

        @pytest.mark.dflash(budget=8)
        def test_first(dflash_service):
            with open("server.pid", "w") as fh:
                fh.write(str(dflash_service.identity.pid))

        @pytest.mark.dflash(budget=8)
        def test_cancelled(dflash_service):
            os.kill(os.getpid(), signal.SIGTERM)

        @pytest.mark.dflash(budget=8)
        def test_never_runs(dflash_service):
            pass
        """
    )
    result = run(sim_ini)
    pid = int((sim_ini.path / "server.pid").read_text())
    try:
        assert result.ret == pytest.ExitCode.INTERRUPTED
        assert not group_running(pid), "the server outlived pytest"
    finally:
        if group_running(pid):
            os.killpg(pid, signal.SIGKILL)
    report = json.loads((sim_ini.path / "report.json").read_text())
    outcomes = {t["nodeid"].split("::")[-1]: t["outcome"] for t in report["tests"]}
    assert outcomes["test_first"] == "passed"
    assert "test_never_runs" not in outcomes
