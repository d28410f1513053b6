"""End to end against the simulator: --dflash-weight-cache's daemon, its clients, its end."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from .conftest import write_sim_ini
from .test_service_e2e import run

# Loading takes 2 s from disk; through the daemon 5% of it (--sim-cached-load-fraction).
SIM = "--sim-load-seconds 2 --sim-warmup-seconds 0.05"
TWO_CONFIGS = """
import pytest

@pytest.mark.dflash(budget=8, window=2048)
def test_a(dflash_service):
    pass

@pytest.mark.dflash(budget=4, window=1024)
def test_b(dflash_service):
    pass
"""
# The first test kills the daemon: the second config's start finds it dead.
KILLS_THE_DAEMON = """
import os, re, signal
from pathlib import Path

import pytest

@pytest.mark.dflash(budget=8, window=2048)
def test_a(dflash_service):
    log = (dflash_service.log_dir / "weight-cache-1.log").read_text()
    os.kill(int(re.search(r"Launched weight cache daemon .* pid=(\\d+)", log)[1]), signal.SIGKILL)

@pytest.mark.dflash(budget=4, window=1024)
def test_b(dflash_service):
    pass
"""


def daemon_pid(pytester: pytest.Pytester) -> int:
    (log,) = pytester.path.glob("runpytest-[0-9]*/dflash-logs/weight-cache-1.log")
    found = re.search(r"Launched weight cache daemon .* pid=(\d+)", log.read_text())
    assert found, "the daemon logged its start"
    return int(found[1])


def running(pid: int) -> bool:
    """Whether ``pid`` is the simulator's daemon still (not a zombie, not a reused pid)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z" and b"sim.weight_cache" in command


def phases(pytester: pytest.Pytester) -> dict[int, dict[str, Any]]:
    """Each config's start phases, by its budget."""
    report = json.loads((pytester.path / "report.json").read_text())
    return {c["config"]["budget"]: c["start_phases"] for c in report["configs"]}


@pytest.mark.slow
def test_every_config_loads_through_the_daemon_which_is_stopped_at_the_end(
    pytester: pytest.Pytester,
) -> None:
    write_sim_ini(pytester, SIM)
    pytester.makepyfile(test_m=TWO_CONFIGS)
    result = run(pytester, "--dflash-weight-cache", "on")
    result.assert_outcomes(passed=2)
    found = phases(pytester).values()
    assert [p["weight_cache"] for p in found] == ["client", "client"]
    # The servers' own lines say the load was cut to its cached share (2 s -> 0.1 s).
    assert all(float(p["load_seconds"]) < 1.0 for p in found)
    assert not running(daemon_pid(pytester))


@pytest.mark.slow
def test_keep_leaves_the_daemon_running_and_says_how_to_stop_it(
    pytester: pytest.Pytester,
) -> None:
    write_sim_ini(pytester, SIM)
    pytester.makepyfile(test_m=TWO_CONFIGS)
    result = run(pytester, "--dflash-weight-cache", "keep")
    pid = daemon_pid(pytester)
    try:
        result.assert_outcomes(passed=2)
        result.stdout.fnmatch_lines([f"*weight-cache daemon (pid {pid}) left running*kill {pid}"])
        assert running(pid)
    finally:
        if running(pid):
            import os
            import signal

            os.kill(pid, signal.SIGTERM)


def test_a_dead_daemon_is_one_line_for_the_next_config(pytester: pytest.Pytester) -> None:
    write_sim_ini(pytester, SIM)
    pytester.makepyfile(test_m=KILLS_THE_DAEMON)
    result = run(pytester, "--dflash-weight-cache", "on")
    result.assert_outcomes(passed=1, errors=1)
    pid = daemon_pid(pytester)
    line = (
        f"*weight-cache daemon (pid {pid}) killed by signal SIGKILL after it was ready; configs "
        "cannot load through it*; fix it, run without --dflash-weight-cache, or add ',fallback'*"
    )
    result.stdout.fnmatch_lines([line])
    assert "Traceback" not in result.stdout.str()


@pytest.mark.slow
def test_with_fallback_a_dead_daemon_means_loading_from_disk(pytester: pytest.Pytester) -> None:
    write_sim_ini(pytester, SIM)
    pytester.makepyfile(test_m=KILLS_THE_DAEMON)
    result = run(pytester, "--dflash-weight-cache", "on,fallback")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["*killed by signal SIGKILL after it was ready*; every config loads its weights from disk*"]
    )
    found = phases(pytester)
    assert (found[8]["weight_cache"], found[4]["weight_cache"]) == ("client", "off")
    assert float(found[4]["load_seconds"]) >= 2.0
