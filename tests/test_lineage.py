"""The processes of a launch: found by lineage and marker, ended, reaped, and nothing else."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_specdecode.processes import lineage
from pytest_specdecode.processes.children import peek_exit
from pytest_specdecode.statefiles import wait_until

from .conftest import process_gone

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc and prctl")


def _below(pid: int, roots: set[int], parents: dict[int, int]) -> bool:
    """Whether walking up from ``pid`` meets a root (the reference for descendants)."""
    seen = {pid}
    while (parent := parents.get(pid)) is not None:
        if parent in roots:
            return True
        if parent in seen:
            return False
        seen.add(parent)
        pid = parent
    return False


@given(
    st.dictionaries(st.integers(1, 40), st.integers(0, 40), max_size=40),
    st.sets(st.integers(0, 40), max_size=5),
)
def test_descendants_are_exactly_the_processes_below_a_root(
    parents: dict[int, int], roots: set[int]
) -> None:
    # Any parent map, loops included (a table read while pids are reused may hold one).
    procs = {pid: lineage.Entry(ppid, True, "1", pid) for pid, ppid in parents.items()}
    expected = {pid for pid in parents if _below(pid, roots, parents)}
    assert lineage.descendants(roots, procs) == expected


def _subreaper() -> bool:
    flag = ctypes.c_int(0)
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(lineage.PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) == 0
    return bool(flag.value)


@pytest.fixture
def launch() -> Iterator[lineage.Launch]:
    tracked = lineage.Launch()
    yield tracked
    tracked.kill(grace=5)
    tracked.reap()
    tracked.close()


SERVER = "import os, sys, time; print(os.getpid(), flush=True); time.sleep(120)"


@linux
def test_a_process_that_left_the_session_is_the_launchs_after_its_parent_died(
    launch: lineage.Launch,
) -> None:
    assert not _subreaper()  # inert until a launch begins
    assert launch.begin() is True
    assert _subreaper()
    leader = subprocess.Popen(
        ["setsid", "-w", sys.executable, "-c", SERVER],
        stdout=subprocess.PIPE,
        env={**os.environ, **launch.env},
        start_new_session=True,
    )
    launch.started(leader.pid)
    assert leader.stdout is not None
    with leader.stdout:
        server = int(leader.stdout.readline())
    assert os.getsid(server) != leader.pid  # outside the launch's session and group
    assert launch.processes() == [server]
    os.kill(leader.pid, signal.SIGKILL)
    leader.wait()
    # Orphaned, it comes to us (not to init), and is still known as the launch's.
    wait_until(lambda: _ppid(server) == os.getpid(), timeout=30, what="the re-parenting")
    assert launch.processes() == [server]
    launch.kill(grace=10)
    assert process_gone(server)
    assert launch.reap() == [server]  # its zombie was ours: reaped by pid
    assert _ppid(server) is None
    launch.close()
    launch.close()  # twice is fine
    assert not _subreaper()


def _ppid(pid: int) -> int | None:
    fields = lineage.stat_fields(pid)
    return None if fields is None else int(fields[1])


@linux
def test_the_marker_finds_a_daemon_whose_parents_exited_before_anyone_looked(
    launch: lineage.Launch,
) -> None:
    launch.begin()
    daemon = (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(120)\n"
        "    os._exit(0)\n"
        "os.wait()\n"
    )
    leader = subprocess.Popen(
        [sys.executable, "-c", daemon], env={**os.environ, **launch.env}, start_new_session=True
    )
    launch.started(leader.pid)
    assert leader.wait(timeout=30) == 0
    found = wait_until(lambda: launch.processes() or None, timeout=30, what="the daemon")
    assert all(_ppid(pid) == os.getpid() for pid in found)
    launch.kill(grace=10)
    assert all(process_gone(pid) for pid in found)


@linux
def test_reaping_leaves_the_zombies_of_other_children_to_their_waiters(
    launch: lineage.Launch,
) -> None:
    launch.begin()
    other = subprocess.Popen(["true"])  # not the launch's: no marker, not below its leader
    assert peek_exit(other, timeout=30) == 0
    assert launch.processes() == []
    assert launch.reap() == []
    # Still a zombie for its own Popen to reap, with its exit status.
    assert os.waitid(os.P_PID, other.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    assert other.wait() == 0


@linux
def test_the_subreaper_stays_on_while_any_launch_is_live() -> None:
    first, second = lineage.Launch(), lineage.Launch()
    first.begin()
    second.begin()
    first.close()
    assert _subreaper()
    second.close()
    assert not _subreaper()
