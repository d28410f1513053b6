"""The host lease: one live config, switched once, in rank order; dead workers recovered."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_specdecode.service.lease import HostLease, LeaseTimeout, SwitchFailed, pid_alive

ALIVE: set[int] = set()


def lease(tmp_path: Path, worker: str, pid: int) -> HostLease:
    ALIVE.add(pid)
    return HostLease(
        tmp_path, "host", worker, pid=pid, alive=ALIVE.__contains__, poll_interval=0.01
    )


def switcher(log: list[str], key: str) -> Any:
    def switch(old: dict[str, Any] | None) -> dict[str, Any]:
        log.append(f"{key} (old {old['key'] if old else None})")
        return {"key": key}

    return switch


def test_first_worker_switches_the_next_joins(tmp_path: Path) -> None:
    log: list[str] = []
    a, b = lease(tmp_path, "gw0", 100), lease(tmp_path, "gw1", 101)
    assert a.hold("A", 0, switcher(log, "A"), timeout=1) == ({"key": "A"}, True)
    assert b.hold("A", 0, switcher(log, "A"), timeout=1) == ({"key": "A"}, False)
    assert log == ["A (old None)"]
    with a._lock:
        assert a.read()["users"] == {"gw0": 100, "gw1": 101}


def test_switch_waits_for_users_and_lower_needs(tmp_path: Path) -> None:
    log: list[str] = []
    a, b, c = lease(tmp_path, "gw0", 200), lease(tmp_path, "gw1", 201), lease(tmp_path, "gw2", 202)
    a.hold("A", 0, switcher(log, "A"), timeout=1)
    c.announce(0, keep=None)  # gw2 will run an A test next
    with pytest.raises(LeaseTimeout, match="used by \\['gw0'\\]"):
        b.hold("B", 1, switcher(log, "B"), timeout=0.05)
    a.announce(1, keep=None)  # gw0 moves on to B: A has no user, but gw2 still needs A
    with pytest.raises(LeaseTimeout):
        b.hold("B", 1, switcher(log, "B"), timeout=0.05)
    c.hold("A", 0, switcher(log, "A"), timeout=1)  # joins A without a restart
    c.leave()
    assert b.hold("B", 1, switcher(log, "B"), timeout=1) == ({"key": "B"}, True)
    assert a.hold("B", 1, switcher(log, "B"), timeout=1)[1] is False
    assert log == ["A (old None)", "B (old A)"]


def test_waiting_worker_gets_the_config_once_users_leave(tmp_path: Path) -> None:
    log: list[str] = []
    a, b = lease(tmp_path, "gw0", 300), lease(tmp_path, "gw1", 301)
    a.hold("A", 0, switcher(log, "A"), timeout=1)
    result: list[Any] = []
    waiter = threading.Thread(
        target=lambda: result.append(b.hold("B", 1, switcher(log, "B"), timeout=5))
    )
    waiter.start()
    a.leave()
    waiter.join(timeout=5)
    assert result == [({"key": "B"}, True)]


def test_a_dead_worker_does_not_block_the_others(tmp_path: Path) -> None:
    log: list[str] = []
    a, b = lease(tmp_path, "gw0", 400), lease(tmp_path, "gw1", 401)
    a.hold("A", 0, switcher(log, "A"), timeout=1)
    ALIVE.discard(400)  # gw0 was killed while using A
    assert b.hold("B", 1, switcher(log, "B"), timeout=1)[1] is True


def test_a_switcher_that_died_leaves_no_live_config(tmp_path: Path) -> None:
    a, b = lease(tmp_path, "gw0", 500), lease(tmp_path, "gw1", 501)

    def die(old: dict[str, Any] | None) -> dict[str, Any]:
        ALIVE.discard(500)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        a.hold("A", 0, die, timeout=1)
    log: list[str] = []
    assert b.hold("A", 0, switcher(log, "A"), timeout=1)[1] is True


def test_a_failed_switch_is_not_retried_by_others(tmp_path: Path) -> None:
    a, b = lease(tmp_path, "gw0", 600), lease(tmp_path, "gw1", 601)

    def fail(old: dict[str, Any] | None) -> dict[str, Any]:
        raise RuntimeError("server for config 'A' exited with status 1")

    with pytest.raises(RuntimeError):
        a.hold("A", 0, fail, timeout=1)
    with pytest.raises(SwitchFailed, match="exited with status 1"):
        b.hold("A", 0, switcher([], "A"), timeout=1)
    a.announce(None, keep=None)  # gw0 has no more tests
    assert b.hold("B", 1, switcher([], "B"), timeout=1)[1] is True


def test_a_zombie_is_not_alive() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    # Not reaped yet: the child is a zombie once it exits.
    while time.monotonic() < deadline:
        with open(f"/proc/{child.pid}/stat", "rb") as fh:
            if b") Z" in fh.read():
                break
        time.sleep(0.01)
    assert not pid_alive(child.pid)
    assert pid_alive(os.getpid())
    child.wait()
