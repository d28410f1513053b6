"""Cleanup by ownership: whatever the run started, the run stops, whoever dies first.

Each local server a worker starts is recorded in the lease directory the moment it
starts (before its readiness wait): process group, the leader's start time, port,
config and the owner's pid (:class:`Registry`). A worker about to restart the server
reaps the servers of owners that died (SIGKILL, OOM), so a dead worker's server never
holds the port; the xdist controller reaps every recorded server at the end. Where
the OS offers it (Linux), a server of a run without workers also gets a parent-death
signal, so it ends with pytest even if pytest is killed (SIGKILL). Under xdist it does
not: a worker's server is shared, and must not end while another worker uses it
because its starter exited; the records and the controller stop it instead.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_specdecode import statefiles
from pytest_specdecode.processes import lineage
from pytest_specdecode.processes.lineage import start_time, stat_fields

PR_SET_PDEATHSIG = 1


def pid_alive(pid: int) -> bool:
    """Whether a process with ``pid`` runs (workers share one machine).

    A killed worker stays a zombie until xdist reaps it, and signal 0 still
    reaches zombies: on Linux, /proc tells them apart.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    fields = stat_fields(pid)
    if fields is None:
        return True  # no /proc (macOS): trust the signal
    return fields[0] not in (b"Z", b"X")


def parent_death_signal() -> Callable[[], None] | None:
    """A ``preexec_fn`` giving the child SIGTERM when this process dies (Linux), or None.

    The kernel sends it when the *thread* that forked exits, so it is only used from
    the main thread (which lives as long as the process)."""
    if not sys.platform.startswith("linux"):
        return None
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:  # runs in the child, between fork and exec
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the signal was armed
            os._exit(1)

    return preexec


class Registry:
    """The servers started by this run's workers, one small JSON file each."""

    def __init__(
        self,
        directory: Path,
        *,
        alive: Callable[[int], bool] | None = None,
        stop: Callable[[int], None] | None = None,
    ) -> None:
        self.directory = directory / "servers"
        self._alive = alive
        self._stop = stop

    def record(
        self,
        pgid: int,
        *,
        port: int | None,
        label: str,
        owner: int | None = None,
        marker: str | None = None,
    ) -> None:
        """Note a server just started (its group leader's pid is ``pgid``; ``marker``: the
        token its launch carries, which finds its processes outside the group)."""
        entry = {
            "marker": marker,
            "pgid": pgid,
            "start": start_time(pgid),
            "port": port,
            "config": label,
            "owner": os.getpid() if owner is None else owner,
        }
        statefiles.write_json(self.directory / f"{pgid}.json", entry)

    def forget(self, pgid: int) -> None:
        """The owner stopped it itself."""
        with contextlib.suppress(OSError):
            (self.directory / f"{pgid}.json").unlink()

    def entries(self) -> list[dict[str, Any]]:
        found = []
        for path in sorted(self.directory.glob("*.json")):
            data = statefiles.read_json(path)
            if isinstance(data, dict) and isinstance(data.get("pgid"), int):
                found.append(data)
        return found

    def reap(self, *, only_orphans: bool = True) -> list[int]:
        """Stop the recorded servers whose owner died (all of them: ``only_orphans=False``);
        returns their groups. A group whose leader pid now belongs to another process
        (a different start time) is left alone: the pid was reused."""
        from pytest_specdecode.service.local import group_running, stop_group_id

        alive = self._alive or pid_alive
        stop = self._stop or stop_group_id
        stopped = []
        for entry in self.entries():
            pgid, owner = entry["pgid"], entry.get("owner")
            if only_orphans and isinstance(owner, int) and alive(owner):
                continue
            now = start_time(pgid)
            reused = now is not None and entry.get("start") not in (None, now)
            ended = False
            if not reused and group_running(pgid):
                stop(pgid)
                ended = True
            # Those that left the group (setsid, a daemon): the token is this launch's
            # alone, so it holds whether or not the leader's pid was reused.
            marker = entry.get("marker")
            if isinstance(marker, str) and marker and lineage.Launch(token=marker).end():
                ended = True
            if ended:
                stopped.append(pgid)
            self.forget(pgid)
        return stopped
