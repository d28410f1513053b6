"""A child's exit is read without reaping it, so its pid cannot go to another process."""

from __future__ import annotations

import signal
import subprocess
import sys

from pytest_specdecode.processes.children import peek_exit, signal_group


def state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", "rb") as fh:
        stat = fh.read()
    return stat[stat.rfind(b")") + 2 :].split()[0].decode()


def test_the_exit_status_is_read_and_the_zombie_kept() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    assert peek_exit(proc, timeout=30.0) == 3
    assert state(proc.pid) == "Z"
    assert proc.returncode is None
    assert proc.wait() == 3


def test_a_killed_child_reads_as_minus_the_signal() -> None:
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    assert peek_exit(proc, timeout=0.05) is None  # still running
    assert signal_group(proc, signal.SIGKILL)
    assert peek_exit(proc, timeout=30.0) == -signal.SIGKILL
    assert proc.wait() == -signal.SIGKILL


def test_a_reaped_child_s_group_is_never_signalled() -> None:
    proc = subprocess.Popen(["true"], start_new_session=True)
    proc.wait()
    # Its number may belong to any process by now.
    assert not signal_group(proc, signal.SIGKILL)
    assert peek_exit(proc) == 0
