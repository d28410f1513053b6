"""The servers' records in the lease directory: a dead owner's server is stopped by whoever
reaps, a live owner's is left alone, a reused pid is never signalled."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from pytest_specdecode.processes import lineage
from pytest_specdecode.service.local import group_running
from pytest_specdecode.service.ownership import Registry, parent_death_signal


def start() -> subprocess.Popen[bytes]:
    code = "import time\nwhile True: time.sleep(1)"
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True)


def test_a_dead_owners_server_is_reaped_and_a_live_owners_is_not(tmp_path: Path) -> None:
    orphan, kept = start(), start()
    try:
        owners = {orphan.pid: 1_000_001, kept.pid: 1_000_002}
        alive = {1_000_001: False, 1_000_002: True}
        registry = Registry(tmp_path, alive=lambda pid: alive[pid])
        for proc in (orphan, kept):
            registry.record(proc.pid, port=1234, label="DFLASH", owner=owners[proc.pid])
        assert registry.reap() == [orphan.pid]
        assert orphan.wait(timeout=30) is not None
        assert group_running(kept.pid)
        assert [e["pgid"] for e in registry.entries()] == [kept.pid]
        assert registry.reap(only_orphans=False) == [kept.pid]  # the controller, at the end
        assert kept.wait(timeout=30) is not None
        assert registry.entries() == []
    finally:
        for proc in (orphan, kept):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_a_reused_pid_is_left_alone(tmp_path: Path) -> None:
    proc = start()
    try:
        stopped: list[int] = []
        registry = Registry(tmp_path, alive=lambda pid: False, stop=stopped.append)
        registry.record(proc.pid, port=None, label="x", owner=1)
        entry = registry.directory / f"{proc.pid}.json"
        entry.write_text(entry.read_text().replace('"start": "', '"start": "9'))
        assert registry.reap() == []
        assert stopped == []
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_the_server_gets_a_parent_death_signal_on_linux() -> None:
    if sys.platform.startswith("linux"):
        assert parent_death_signal() is not None
    else:
        assert parent_death_signal() is None


def test_a_dead_owners_server_outside_its_group_is_found_by_its_marker(tmp_path: Path) -> None:
    # A worker's launch under setsid: the recorded group holds only the leader.
    token = "t" + os.urandom(8).hex()
    code = "import os, time\nos.setsid()\nprint(os.getpid(), flush=True)\ntime.sleep(120)"
    server = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        env={**os.environ, lineage.MARKER: token},
    )
    try:
        assert server.stdout is not None
        with server.stdout:
            assert int(server.stdout.readline()) == server.pid
        leader = start()  # stands for the launch's leader, still in its group
        registry = Registry(tmp_path, alive=lambda pid: False)
        registry.record(leader.pid, port=None, label="x", owner=1, marker=token)
        assert registry.reap() == [leader.pid]
        assert server.wait(timeout=30) == -signal.SIGTERM
        assert leader.wait(timeout=30) is not None
    finally:
        for proc in (server, leader):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
