"""End to end against the real simulator: restarts, the gate, and its failures."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest

from pytest_specdecode.coding.cgroup import hierarchies
from pytest_specdecode.service.local import group_running

from ..conftest import dflash_flags, run_sim
from ..service.trickle import trickling
from .conftest import write_sim_ini
from .test_acceptance_hostile import working_in


def server_logs(pytester: pytest.Pytester) -> list[str]:
    # runpytest_subprocess puts the run's basetemp in runpytest-N under the test dir.
    logs = sorted(pytester.path.glob("runpytest-[0-9]*/dflash-logs/server-*.log"))
    return [p.read_text() for p in logs]


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-v", "-p", "no:cacheprovider", *args)


def test_two_configs_start_the_server_twice_and_pass_the_gate(sim_ini: pytest.Pytester) -> None:
    # Phases long enough that the gate's 0.25 s polls usually see each of them.
    write_sim_ini(sim_ini, "--sim-load-seconds 0.3 --sim-warmup-seconds 0.6")
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
    # The 503 phase is seen only when a poll lands in it: a starved poller can miss it.
    # (tests/service/test_manager.py shows every phase on a fake clock.)
    phases = "(loading (refused) -> *verified); load *s, *"
    result.stdout.fnmatch_lines(
        [
            f"*DFLASH budget=8 window=2048: ready in *s {phases}; launched: *sim* --port *",
            f"*DFLASH budget=4 window=1024: ready in *s {phases}; launched: *sim* --port *",
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
    assert time.monotonic() - started < 40  # no ready timeout (60 s) waited out


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
        [
            "SKIPPED *runs DFLASH budget=8 window=2048, not DFLASH budget=4 window=2048 "
            "(speculative_num_draft_tokens is 8, expected 4); --dflash-restart=never*"
        ]
    )
    assert server_logs(sim_ini) == []


@pytest.mark.slow
def test_external_mode_waits_for_a_server_still_loading(
    sim_ini: pytest.Pytester, tmp_path: Path
) -> None:
    # SGLang opens its port only once its model is loaded: a server still starting
    # refuses connections for as long, then answers 503 while it warms up. Longer than
    # the run takes to get to its gate, so the gate meets the closed port.
    flags = dflash_flags(draft="sim/dflash-drafter")
    timing = ("--sim-load-seconds", "10", "--sim-warmup-seconds", "1")
    sim_ini.makepyfile(test_m=LIVE_TESTS)
    with run_sim(tmp_path, *flags, *timing) as sim:
        result = run(
            sim_ini, "-k", "same", "--dflash-restart", "never", "--dflash-port", str(sim.port)
        )
    result.assert_outcomes(passed=1, deselected=1)
    assert server_logs(sim_ini) == []


def test_a_live_server_of_another_config_fails_a_run_that_measures_nothing(
    sim_ini: pytest.Pytester, live_sim: int
) -> None:
    sim_ini.makepyfile(
        test_m="""
        import pytest

        @pytest.mark.throughput(contexts=[60], concurrency=[1], output_tokens=16)
        @pytest.mark.dflash(budget=4, window=2048)
        def test_tp(dflash_case, dflash_throughput, benchmark):
            dflash_throughput.run(dflash_case, benchmark)
        """
    )
    result = run(sim_ini, "--dflash-restart", "never", "--dflash-port", str(live_sim))
    result.assert_outcomes(skipped=1)
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*throughput test(s) selected, none ran: all skipped*"])


def test_auto_restart_reuses_a_live_server_already_verified(
    sim_ini: pytest.Pytester, live_sim: int
) -> None:
    sim_ini.makepyfile(test_m=LIVE_TESTS)
    result = run(sim_ini, "--dflash-port", str(live_sim), "-k", "same")
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(["*live server already verified, no restart*"])
    assert server_logs(sim_ini) == []


def test_restart_always_refuses_a_port_another_server_holds(
    sim_ini: pytest.Pytester, live_sim: int
) -> None:
    # The foreign simulator runs the same config: before, the new process never
    # bound the port and the gate "verified" the old one in 0.0 s.
    sim_ini.makepyfile(test_m=LIVE_TESTS)
    started = time.monotonic()
    # A port in use may be an old server still going away: retried once (pause shortened).
    result = run(
        sim_ini, "--dflash-restart", "always", "--dflash-port", str(live_sim), "-k", "same",
        "--dflash-start-retry-pause", "0.1",
    )  # fmt: skip
    result.assert_outcomes(errors=1, deselected=1)
    result.stdout.fnmatch_lines(
        [f"*port {live_sim} on 127.0.0.1 is already served by another process (pid *"
         "(all 2 starts failed: the port was still in use)*"]
    )  # fmt: skip
    assert time.monotonic() - started < 40  # no ready timeout (60 s) waited out
    assert server_logs(sim_ini) == []  # nothing was launched


# A coding answer that loops until it is stopped, and says it runs: a file in
# its working directory (the fallback's, on the host in TMPDIR), and a child.
ENDLESS = """import os, time
def gcd(a, b):
    open('started', 'w').close()
    if os.fork() == 0:
        time.sleep(600)
    while True:
        pass
"""

# The run cancels itself (SIGTERM, as CI does) once the answer runs.
CANCEL_WHEN_THE_ANSWER_RUNS = """
import os, signal, threading, time
from pathlib import Path

def _cancel():
    tmp = Path(os.environ["TMPDIR"])
    while not list(tmp.glob("*/started")):
        time.sleep(0.01)
    Path("sigterm.sent").write_text(repr(time.monotonic()))
    os.kill(os.getpid(), signal.SIGTERM)

def pytest_configure(config):
    Path("pytest.pid").write_text(str(os.getpid()))
    threading.Thread(target=_cancel, daemon=True).start()
"""


@pytest.mark.slow
def test_sigterm_stops_the_server_like_ctrl_c_and_keeps_the_report(
    sim_ini: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # CI cancelling a job, or timeout(1): SIGTERM, not Ctrl-C, here while a coding
    # answer is being judged. The run once waited for the answer's time limit.
    answers = [{"match": "`gcd(", "response": f"```python\n{ENDLESS}```\n"}]
    (sim_ini.path / "answers.json").write_text(json.dumps(answers))
    write_sim_ini(sim_ini, "--sim-answers answers.json")
    sim_ini.makeconftest(CANCEL_WHEN_THE_ANSWER_RUNS)
    sim_ini.makepyfile(
        test_t="""
        import pytest

        @pytest.mark.dflash(budget=8)
        def test_first(dflash_service):
            with open("server.pid", "w") as fh:
                fh.write(str(dflash_service.identity.pid))

        @pytest.mark.coding
        @pytest.mark.dflash(budget=8)
        def test_cancelled(dflash_problem, dflash_coding):
            dflash_coding.check(dflash_problem)

        @pytest.mark.dflash(budget=8)
        def test_never_runs(dflash_service):
            pass
        """
    )
    sandbox_tmp = sim_ini.path / "sandbox-tmp"  # the answers' working directories
    sandbox_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(sandbox_tmp))
    result = run(
        sim_ini, "-k", "first or gcd or never_runs", "--dflash-sandbox=fallback",
        "--dflash-answer-timeout=120",
    )  # fmt: skip
    stopped = time.monotonic() - float((sim_ini.path / "sigterm.sent").read_text())
    pid = int((sim_ini.path / "server.pid").read_text())
    try:
        assert result.ret == pytest.ExitCode.INTERRUPTED
        assert not group_running(pid), "the server outlived pytest"
    finally:
        if group_running(pid):
            os.killpg(pid, signal.SIGKILL)
    # Half the answer's limit: a bound no load reaches, and one a stop that waited misses.
    assert stopped < 60, f"stopping took {stopped:.1f} s: it waited for the answer's limit"
    report = json.loads((sim_ini.path / "report.json").read_text())
    outcomes = {t["nodeid"].split("::")[-1]: t["outcome"] for t in report["tests"]}
    assert outcomes["test_first"] == "passed"
    assert "test_never_runs" not in outcomes
    # The answer's working directory, its processes and its cgroup are gone.
    assert list(sandbox_tmp.iterdir()) == []
    assert working_in(sandbox_tmp) == []
    run_pid = (sim_ini.path / "pytest.pid").read_text()
    assert [g for h in hierarchies() for g in Path(h.path).glob(f"specdecode-{run_pid}-*")] == []


@pytest.mark.slow
def test_a_server_dying_mid_run_errors_the_rest_of_its_config_in_one_line(
    sim_ini: pytest.Pytester,
) -> None:
    # The simulator exits after N generate requests (the gate's health check is one).
    sim_ini.makepyfile(
        test_d="""
        import pytest

        @pytest.mark.coding
        @pytest.mark.dflash(budget=8, sim_fault="die-after:3")
        def test_coding(dflash_problem, dflash_coding):
            dflash_coding.check(dflash_problem)

        @pytest.mark.throughput(contexts=[60], concurrency=[1, 2], output_tokens=8)
        @pytest.mark.dflash(budget=4, sim_fault="die-after:2")
        def test_tp(dflash_case, dflash_throughput, benchmark):
            dflash_throughput.run(dflash_case, benchmark)
        """
    )
    problems = "tp or fib or gcd or is_palindrome or merge_sorted or word_count"
    result = run(sim_ini, "-k", problems, "--dflash-min-pass-rate", "0.8", "--dflash-rounds", "1")
    result.assert_outcomes(passed=3, failed=1, errors=3)
    out = result.stdout.str()
    # The tests after the death error at once, naming the exit, with the log tail.
    result.stdout.fnmatch_lines(
        [
            "*ERROR at setup of test_coding*",
            "server for config 'DFLASH budget=8 sim-fault=die-after:3' at * exited after it "
            "passed the gate: exited with status 1; full log: *",
            "--- last * log lines ---",
        ]
    )
    # The gate says so instead of a pass rate; the throughput failure is one line, no traceback.
    result.stdout.fnmatch_lines(
        [
            "  server gate FAILED: config DFLASH budget=4 sim-fault=die-after:2: server died "
            "after 0 tests (*",
            "  server gate FAILED: config DFLASH budget=8 sim-fault=die-after:3: server died "
            "after 3 tests (*",
        ]
    )
    assert "pass-rate gate" not in out
    assert "Traceback" not in out
    assert "def _request" not in out
    # Each error is its one line, the tail's header and the tail (at most 13 lines),
    # whatever else a busy machine adds to the run's output.
    sections: list[list[str]] = []
    for line in result.stdout.lines:
        if re.fullmatch(r"_{3,} .* _{3,}", line) or line.startswith("====="):
            sections.append([])  # a test's section begins; a banner ends the last one
        elif sections:
            sections[-1].append(line)
    failures = [s for s in sections if s and s[0].startswith("server for config")]
    assert len(failures) == 4
    assert all(len(s) <= 2 + 13 for s in failures), [len(s) for s in failures]
    report = json.loads((sim_ini.path / "report.json").read_text())
    died = {c["label"]: c["server_died"] for c in report["configs"]}
    assert died["DFLASH budget=8 sim-fault=die-after:3"]["after_tests"] == 3


@pytest.mark.slow
def test_a_trickling_health_answer_ends_an_external_run_at_the_ready_timeout(
    sim_ini: pytest.Pytester,
) -> None:
    # /health_generate sends its answer a byte every 30 ms (5 minutes in all): each byte
    # resets a per-read timeout, so only a whole deadline per request ends the wait.
    sim_ini.makepyfile(test_m=LIVE_TESTS)
    with trickling(0.03) as (port, trickle):
        result = sim_ini.runpytest_subprocess(
            "-p", "no:cacheprovider", "-k", "same", "--dflash-restart", "never",
            "--dflash-port", str(port), "--dflash-ready-timeout", "3", timeout=120,
        )  # fmt: skip
    assert trickle.takes > 120
    assert "/health_generate" in trickle.paths
    result.assert_outcomes(errors=1, deselected=1)
    result.stdout.fnmatch_lines(["*not ready after * s (ready timeout 3 s): last phase*"])
    assert "INTERNALERROR" not in result.stdout.str()
