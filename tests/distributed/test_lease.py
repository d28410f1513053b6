"""The host lease: one live config, switched once, only to the scheduler's active
config; dead workers recovered."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_specdecode.distributed.lease import HostLease, LeaseTimeout, SwitchFailed, write_active
from pytest_specdecode.errors import SpecDecodeError
from pytest_specdecode.service.ownership import pid_alive
from pytest_specdecode.service.retry import HostDown
from pytest_specdecode.service.sharing import LeaseHostDown, Moved

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


def hold(
    lease: HostLease,
    key: str,
    switch: Callable[[dict[str, Any] | None], dict[str, Any]],
    *,
    timeout: float,
    still_here: Callable[[], bool] | None = None,
) -> tuple[dict[str, Any], bool]:
    """One turn as a worker takes it: (the server's facts, whether this worker switched)."""
    with lease.turn(key, timeout=timeout, still_here=still_here) as turn:
        if not turn.switching:
            return turn.server or {}, False
        facts = switch(turn.server)
        turn.switched(facts)
        return facts, True


def test_first_worker_switches_the_next_joins(tmp_path: Path) -> None:
    log: list[str] = []
    a, b = lease(tmp_path, "gw0", 100), lease(tmp_path, "gw1", 101)
    assert hold(a, "A", switcher(log, "A"), timeout=1) == ({"key": "A"}, True)
    assert hold(b, "A", switcher(log, "A"), timeout=1) == ({"key": "A"}, False)
    assert log == ["A (old None)"]
    with a._lock:
        assert a.read().users == {"gw0": 100, "gw1": 101}


def test_with_a_scheduler_only_the_active_config_may_become_live(tmp_path: Path) -> None:
    log: list[str] = []
    write_active(tmp_path, "host", "A")
    a, b = lease(tmp_path, "gw0", 200), lease(tmp_path, "gw1", 201)
    hold(a, "A", switcher(log, "A"), timeout=1)
    # gw1 asks for B while A is active: it waits for the scheduler, however long.
    waits: list[float] = []

    def scheduler(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 3:
            write_active(tmp_path, "host", "B")

    b._sleep = scheduler
    assert hold(b, "B", switcher(log, "B"), timeout=0) == ({"key": "B"}, True)
    assert len(waits) == 3
    # A late worker that still wants A cannot bring it back once B is active.
    late = lease(tmp_path, "gw2", 202)
    late._sleep = lambda seconds: (_ for _ in ()).throw(AssertionError("A must wait"))
    with pytest.raises(AssertionError, match="A must wait"):
        hold(late, "A", switcher(log, "A"), timeout=1)
    assert log == ["A (old None)", "B (old A)"]


def test_without_a_scheduler_a_switch_waits_for_the_users(tmp_path: Path) -> None:
    log: list[str] = []
    a, b = lease(tmp_path, "gw0", 300), lease(tmp_path, "gw1", 301)
    hold(a, "A", switcher(log, "A"), timeout=1)
    with pytest.raises(LeaseTimeout, match="used by \\['gw0'\\]"):
        hold(b, "B", switcher(log, "B"), timeout=0.05)
    result: list[Any] = []
    waiter = threading.Thread(
        target=lambda: result.append(hold(b, "B", switcher(log, "B"), timeout=5))
    )
    waiter.start()
    a.leave()
    waiter.join(timeout=5)
    assert result == [({"key": "B"}, True)]


def test_a_dead_worker_does_not_block_the_others(tmp_path: Path) -> None:
    log: list[str] = []
    a, b = lease(tmp_path, "gw0", 400), lease(tmp_path, "gw1", 401)
    hold(a, "A", switcher(log, "A"), timeout=1)
    ALIVE.discard(400)  # gw0 was killed while using A
    assert hold(b, "B", switcher(log, "B"), timeout=1)[1] is True


def test_a_switcher_that_died_leaves_no_live_config(tmp_path: Path) -> None:
    a, b = lease(tmp_path, "gw0", 500), lease(tmp_path, "gw1", 501)

    def die(old: dict[str, Any] | None) -> dict[str, Any]:
        ALIVE.discard(500)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        hold(a, "A", die, timeout=1)
    log: list[str] = []
    assert hold(b, "A", switcher(log, "A"), timeout=1)[1] is True


def test_a_failed_switch_is_not_retried_by_others(tmp_path: Path) -> None:
    a, b = lease(tmp_path, "gw0", 600), lease(tmp_path, "gw1", 601)

    def fail(old: dict[str, Any] | None) -> dict[str, Any]:
        raise RuntimeError("server for config 'A' exited with status 1")

    with pytest.raises(RuntimeError):
        hold(a, "A", fail, timeout=1)
    with pytest.raises(SwitchFailed, match="exited with status 1"):
        hold(b, "A", switcher([], "A"), timeout=1)
    assert hold(b, "B", switcher([], "B"), timeout=1)[1] is True


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


def test_a_worker_need_not_wait_for_tests_whose_holders_all_exited(tmp_path: Path) -> None:
    # With -x a worker stops without running what it holds: the active config
    # would never complete. Its holders are gone, so the next config may start.
    a, b = lease(tmp_path, "gw0", 700), lease(tmp_path, "gw1", 701)
    a.register()
    write_active(tmp_path, "host", "A", ["gw0"])
    b._sleep = lambda seconds: (_ for _ in ()).throw(AssertionError("must wait for gw0"))
    with pytest.raises(AssertionError, match="must wait"):
        hold(b, "B", switcher([], "B"), timeout=1)
    ALIVE.discard(700)  # gw0 exited
    assert hold(b, "B", switcher([], "B"), timeout=1)[1] is True


def test_a_host_found_down_is_not_the_configs_failure(tmp_path: Path) -> None:
    write_active(tmp_path, "host", "A")
    a, b = lease(tmp_path, "gw0", 400), lease(tmp_path, "gw1", 401)

    def lost(old: dict[str, Any] | None) -> dict[str, Any]:
        raise HostDown("host gpu3 cannot start config 'A': no SSH answer", host="gpu3")

    with pytest.raises(HostDown):
        hold(a, "A", lost, timeout=1)
    with a._lock:
        assert a.read().failed == {}  # A did not fail: it runs elsewhere
    # Another worker of that host learns at once that the host is gone.
    with pytest.raises(LeaseHostDown, match="host gpu3 cannot start config 'A'"):
        hold(b, "A", switcher([], "A"), timeout=1)


def test_a_waiting_worker_notices_its_config_moved(tmp_path: Path) -> None:
    write_active(tmp_path, "host", "A")
    a, b = lease(tmp_path, "gw0", 500), lease(tmp_path, "gw1", 501)
    hold(a, "A", switcher([], "A"), timeout=1)
    checks: list[bool] = []

    def here() -> bool:
        checks.append(True)
        return len(checks) < 3

    with pytest.raises(Moved, match="B moved to another host"):
        hold(b, "B", switcher([], "B"), timeout=1, still_here=here)
    assert len(checks) == 3


def test_a_switching_turn_that_ends_without_the_new_server_fails_for_everyone(
    tmp_path: Path,
) -> None:
    a, b = lease(tmp_path, "gw0", 800), lease(tmp_path, "gw1", 801)
    turns: list[bool] = []
    with (
        pytest.raises(SpecDecodeError, match="ended without the new server's facts"),
        a.turn("A", timeout=1) as turn,
    ):
        turns.append(turn.switching)
    assert turns == [True]
    with pytest.raises(SwitchFailed, match="ended without the new server's facts"):
        hold(b, "A", switcher([], "A"), timeout=1)
