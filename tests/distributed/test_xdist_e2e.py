"""pytest -n N against one simulator: one restart per config, the gate aggregates."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

CODING = """
import pytest

@pytest.mark.coding
@pytest.mark.dflash(budget=[4, 8], window=2048)
def test_coding(dflash_problem, dflash_coding):
    dflash_coding.check(dflash_problem)
"""
CORE = "is_palindrome or word_count or reverse_words"


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-k", CORE, *args)


def outcome(pytester: pytest.Pytester) -> dict[str, dict[str, float]]:
    report = json.loads((pytester.path / "report.json").read_text())
    return {c["label"]: c["pass_rate"] for c in report["configs"]}


@pytest.mark.slow
def test_workers_share_one_server_per_config_and_the_gate_aggregates(
    sim_ini: pytest.Pytester, server_logs: Callable[[], list[Path]]
) -> None:
    # A seeded share of wrong answers: the same ones with and without workers.
    ini = (sim_ini.path / "tox.ini").read_text()
    ini = ini.replace("--sim-time-scale 0.05", "--sim-time-scale 0.05 --sim-quality 0.5")
    (sim_ini.path / "tox.ini").write_text(ini)
    sim_ini.makepyfile(test_c=CODING)
    gate = ("--dflash-min-pass-rate", "0.99")
    # --dist loadfile would put every test on one worker: config scheduling runs, and says so.
    parallel = run(sim_ini, "-n", "2", "--dist", "loadfile", *gate)
    parallel.stdout.fnmatch_lines(["dflash: --dist loadfile is not used for this run*"])
    logs = server_logs()
    assert len(logs) == 2, [str(p) for p in logs]
    assert sorted(p.read_text().count("The server is fired up") for p in logs) == [1, 1]
    rates = outcome(sim_ini)
    assert all(rate["total"] == 3 for rate in rates.values())
    assert any(rate["passed"] < 3 for rate in rates.values()), "the seed gives wrong answers"
    serial = run(sim_ini, *gate)
    assert outcome(sim_ini) == rates
    assert parallel.ret == serial.ret == pytest.ExitCode.TESTS_FAILED
    assert gate_lines(serial.stdout.lines)
    assert gate_lines(serial.stdout.lines) == gate_lines(parallel.stdout.lines)


def gate_lines(lines: list[str]) -> list[str]:
    """The pass-rate gate's lines, without what the machine's load decides: how many
    answers were checked again after the time limit (a loaded machine needs more)."""
    return [
        re.sub(r"; \d+ answer\(s\) checked again after the time limit", "", line)
        for line in lines
        if line.startswith("  pass-rate gate ")
    ]


@pytest.mark.slow
def test_a_killed_worker_does_not_stall_the_others(sim_ini: pytest.Pytester) -> None:
    # The worker dies while both workers hold the budget=4 server: it waits until the
    # other one is in a test on it, and that test stays until the kill happened.
    events = sim_ini.path / "events"
    events.mkdir()
    sim_ini.makepyfile(
        test_k=f"""
        import os, signal, time
        from pathlib import Path
        import pytest
        from pytest_specdecode.service.ownership import pid_alive

        EVENTS = Path({str(events)!r})

        def wait_for(what, condition):
            deadline = time.monotonic() + 30
            while not condition():
                assert time.monotonic() < deadline, "timed out waiting for " + what
                time.sleep(0.01)

        @pytest.mark.dflash(budget=4)
        def test_dies_holding_the_server(dflash_service):
            me = os.environ["PYTEST_XDIST_WORKER"]
            (EVENTS / "dies.tmp").write_text(str(os.getpid()))
            os.replace(EVENTS / "dies.tmp", EVENTS / "dies")
            wait_for("the other worker", lambda: any(p.name != me for p in EVENTS.glob("gw*")))
            os.kill(os.getpid(), signal.SIGKILL)

        @pytest.mark.dflash(budget=4)
        @pytest.mark.parametrize("n", range(3))
        def test_same_config(dflash_service, n):
            (EVENTS / os.environ["PYTEST_XDIST_WORKER"]).touch()
            dies = EVENTS / "dies"
            wait_for("the kill", lambda: dies.exists() and not pid_alive(int(dies.read_text())))

        @pytest.mark.dflash(budget=8)
        @pytest.mark.parametrize("n", range(4))
        def test_next_config(dflash_service, n):
            assert dflash_service.server_info["speculative_num_draft_tokens"] == 8
        """
    )
    # A stalled worker would hang the run: the timeout fails the test instead (a bound
    # no loaded machine reaches; the run takes seconds).
    result = sim_ini.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "2", "--max-worker-restart", "1", timeout=300
    )
    result.assert_outcomes(passed=7, failed=1)
    result.stdout.fnmatch_lines(["*test_dies_holding_the_server*crashed*"])
    assert (events / "dies").exists()
    assert [p.name for p in events.glob("gw*")], "no other worker used the server"
