"""Cleanup by ownership: a worker killed under ``-n 2`` leaves no server behind.

Before: the killed worker's server kept the port (every other test of both configs
errored "port ... already served by another process") and outlived pytest.
"""

from __future__ import annotations

import sys

import pytest

from pytest_specdecode.processes.children import free_port

from ..conftest import process_gone

# The server's launch notes its pid; the first one also kills the worker starting it
# (its parent), so the worker dies in the middle of bringing its server up.
LAUNCH = """
import os, signal, sys
from pathlib import Path

HERE = Path({here!r})
with open(HERE / "servers.txt", "a") as fh:
    fh.write(f"{{os.getpid()}}\\n")
try:
    os.rename(HERE / "kill", HERE / "killed")
except FileNotFoundError:
    pass
else:
    (HERE / "killed").write_text(str(os.getpid()))
    os.kill(os.getppid(), signal.SIGKILL)
argv = [sys.executable, "-m", "pytest_specdecode.sim", *sys.argv[1:]]
os.execv(sys.executable, argv)
"""

TESTS = """
import pytest

@pytest.mark.dflash(budget=[4, 8])
@pytest.mark.parametrize("n", range(3))
def test_t(dflash_service, n):
    pass
"""


@pytest.mark.slow
def test_a_killed_workers_server_is_stopped_and_nothing_outlives_pytest(
    sim_ini: pytest.Pytester,
) -> None:
    sim_ini.makefile(".py", launch=LAUNCH.format(here=str(sim_ini.path)))
    sim_ini.makeini(
        f"[pytest]\ndflash_launch = {sys.executable} {sim_ini.path / 'launch.py'} "
        "--sim-load-seconds 0.5 --sim-warmup-seconds 0.3 --sim-time-scale 0.05\n"
        f"dflash_port = {free_port()}\ndflash_draft_model = sim/dflash-drafter\n"
        "dflash_ready_timeout = 60\ndflash_report = report.json\n"
    )
    sim_ini.makepyfile(test_k=TESTS)
    (sim_ini.path / "kill").touch()
    result = sim_ini.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "2", "--max-worker-restart", "2"
    )  # fmt: skip
    text = result.stdout.str()
    killed = sim_ini.path / "killed"
    assert killed.exists(), text
    assert "already served by another process" not in text
    result.stdout.fnmatch_lines(["*crashed*"])
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) + outcomes.get("error", 0) >= 1
    # The other config's tests still ran on a fresh server.
    assert outcomes.get("passed", 0) >= 3, text
    pids = {int(line) for line in (sim_ini.path / "servers.txt").read_text().split()}
    assert int(killed.read_text()) in pids
    left = [pid for pid in pids if not process_gone(pid)]
    assert not left, f"servers outlived pytest: {left}"
