"""Every process a launch started, however far it left the launch's process group.

A process group is a label a process may drop (``setsid``, ``setpgid``): a
server started under ``setsid -w``, or by a wrapper that double-forks into a
daemon, is in no group of ours, and stopping the launch's group leaves it
running after the run. Two facts outlast that:

- lineage: while this process is a *child subreaper*
  (``PR_SET_CHILD_SUBREAPER``, Linux 3.4), an orphan among its descendants is
  re-parented to it instead of to init, so whatever the launch started stays
  a descendant of ours, in whatever session it moved to;
- a marker: each launch gets an environment variable holding a random token
  of its own (:attr:`Launch.env`), inherited by all it starts unless a process
  clears its environment.

A launch's processes (:meth:`Launch.processes`) are those descending from its
leader, those carrying its token, and those seen as its processes before (the
same pid with the same start time: a daemon whose parents exited), each with
all its descendants. With the subreaper on, only our descendants are looked
at; without it (another OS, an old kernel) every process this user may read.

Being a subreaper is switched on only while a launch is live (a count over
launches), so a run that launches nothing is unchanged, and back off when the
last one ends (unless this process was one already). An orphan of the launch
that died is a zombie of ours: it is reaped by its pid, never by
``waitpid(-1)``, which would take the exit status of children someone else
in this process waits for.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

MARKER = "PYTEST_SPECDECODE_LAUNCH"

PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37

_PROC = "/proc"
# More than any environment execve accepts in practice (ARG_MAX is 2 MB on Linux).
_ENVIRON_BYTES = 4 << 20


def stat_fields(pid: int, proc: str = _PROC) -> list[bytes] | None:
    """The fields of ``/proc/PID/stat`` after the parenthesised command (state, ppid,
    pgrp, session, ...; field 3 of proc(5) is index 0); None when unreadable."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2 :].split()


def start_time(pid: int, proc: str = _PROC) -> str | None:
    """The process's start time in clock ticks since boot, to tell a reused pid apart."""
    fields = stat_fields(pid, proc)
    return fields[19].decode() if fields is not None and len(fields) > 19 else None


@dataclass(frozen=True)
class Entry:
    """One process of the table: its parent, whether it still runs, when it started, its
    process group."""

    ppid: int
    running: bool  # not a zombie
    start: str  # clock ticks since boot: tells a reused pid apart
    pgrp: int


def table(proc: str = _PROC) -> dict[int, Entry]:
    """Every process in ``/proc`` (empty where there is none)."""
    found: dict[int, Entry] = {}
    try:
        names = os.listdir(proc)
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        fields = stat_fields(int(name), proc)
        if fields is None or len(fields) < 20:
            continue
        with contextlib.suppress(ValueError):
            found[int(name)] = Entry(
                int(fields[1]), fields[0] not in (b"Z", b"X"), fields[19].decode(), int(fields[2])
            )
    return found


def descendants(roots: Iterable[int], procs: Mapping[int, Entry]) -> set[int]:
    """The pids in ``procs`` whose chain of parents meets one of ``roots``."""
    children: dict[int, list[int]] = {}
    for pid, entry in procs.items():
        children.setdefault(entry.ppid, []).append(pid)
    found: set[int] = set()
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def carries(pid: int, variable: str, value: str, proc: str = _PROC) -> bool:
    """Whether ``pid``'s environment (as it was at exec) holds ``variable=value``."""
    try:
        with open(f"{proc}/{pid}/environ", "rb") as fh:
            environ = fh.read(_ENVIRON_BYTES)
    except OSError:  # gone, or another user's
        return False
    return f"{variable}={value}".encode() in environ.split(b"\0")


def _why_no_prctl() -> str | None:
    if not sys.platform.startswith("linux"):
        return f"{sys.platform} has no child subreaper"
    try:
        ctypes.CDLL(None, use_errno=True).prctl  # noqa: B018 - whether it resolves
    except (OSError, AttributeError):
        return "prctl() cannot be called from Python here"
    return None


def untracked() -> str | None:
    """Why a launch's orphans cannot be kept as our descendants here, or None where they
    can (or nothing was tried yet on Linux)."""
    return SUBREAPER.unavailable or _why_no_prctl()


class _Subreaper:
    """This process as a child subreaper while at least one launch is live."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._already = False
        self.unavailable: str | None = None  # why it cannot be, once found out

    def _prctl(self) -> Callable[..., int] | None:
        self.unavailable = self.unavailable or _why_no_prctl()
        return None if self.unavailable else ctypes.CDLL(None, use_errno=True).prctl

    def acquire(self) -> bool:
        """Become (or stay) a subreaper for one more launch; False where that cannot be."""
        with self._lock:
            if self._count:
                self._count += 1
                return True
            if self.unavailable is not None or (prctl := self._prctl()) is None:
                return False
            flag = ctypes.c_int(0)
            if prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) != 0:
                self.unavailable = f"PR_GET_CHILD_SUBREAPER: {os.strerror(ctypes.get_errno())}"
                return False
            self._already = bool(flag.value)
            if not self._already and prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
                self.unavailable = f"PR_SET_CHILD_SUBREAPER: {os.strerror(ctypes.get_errno())}"
                return False
            self._count = 1
            return True

    def release(self) -> None:
        """One launch fewer; the last one switches the subreaper off (if we switched it on)."""
        with self._lock:
            if not self._count:
                return
            self._count -= 1
            if self._count or self._already:
                return
            prctl = self._prctl()
            if prctl is not None:
                prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)

    @property
    def active(self) -> bool:
        return self._count > 0


SUBREAPER = _Subreaper()


class Launch:
    """The processes of one launch: marked, found, signalled, ended and reaped.

    Call :meth:`begin` before starting the leader (with :attr:`env` in its
    environment) and :meth:`started` with its pid. :meth:`signal`, :meth:`kill`
    and :meth:`reap` reach every process of the launch but the leader, which
    its starter signals by its group and reaps; :meth:`close` (safe twice)
    gives the subreaper back.
    """

    def __init__(self, *, token: str | None = None, proc: str = _PROC) -> None:
        # Given: the launch of another process (an xdist worker that died), found by
        # its marker alone.
        self.token = token or secrets.token_hex(12)
        self._ours = token is None
        self.leader: int | None = None
        self.tracked = False  # whether this process is a subreaper for it
        self._proc = proc
        self._seen: dict[int, str] = {}  # pid -> start time, of the launch's processes
        self._open = False

    @property
    def env(self) -> dict[str, str]:
        """The marker to add to the leader's environment."""
        return {MARKER: self.token}

    def begin(self) -> bool:
        """Track orphans from now on; False where only the marker and lineage can."""
        if not self._open:
            self.tracked = SUBREAPER.acquire()
            self._open = True
        return self.tracked

    def started(self, leader: int) -> None:
        self.leader = leader

    def processes(self) -> list[int]:
        """The launch's running processes, the leader left out (noted for later calls)."""
        procs = table(self._proc)
        me = os.getpid()
        # Our own launch's orphans come to us while we are a subreaper; another
        # process's are anywhere.
        ours = SUBREAPER.active and self._ours
        scope = descendants([me], procs) if ours else set(procs) - {me}
        roots = {
            pid
            for pid in scope
            if self._seen.get(pid) == procs[pid].start
            or carries(pid, MARKER, self.token, self._proc)
        }
        if self.leader is not None and self.leader in procs:
            roots.add(self.leader)
        members = roots | descendants(roots, procs)
        members.discard(me)
        for pid in members:
            self._seen[pid] = procs[pid].start
        return sorted(p for p in members if p != self.leader and procs[p].running)

    def signal(self, sig: int) -> list[int]:
        """Send ``sig`` to each process of the launch (not the leader); those it reached."""
        return [pid for pid in self.processes() if self._send(pid, sig)]

    def _send(self, pid: int, sig: int) -> bool:
        # Through a pidfd checked against the start time seen: a pid that was
        # reaped and handed out again in between is never signalled.
        try:
            fd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            fd = None
        try:
            if start_time(pid, self._proc) != self._seen.get(pid):
                return False
            if fd is not None:
                signal.pidfd_send_signal(fd, sig)
            else:
                os.kill(pid, sig)
            return True
        except (ProcessLookupError, PermissionError):
            return False
        finally:
            if fd is not None:
                os.close(fd)

    def kill(
        self,
        grace: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """SIGKILL the launch's processes until none runs (forks in flight race the first
        rounds: only a few empty looks in a row count), for up to ``grace`` seconds."""
        deadline = clock() + grace
        quiet = 0
        while quiet < 3 and clock() < deadline:
            quiet = 0 if self.signal(signal.SIGKILL) else quiet + 1
            sleep(0.02)

    def end(
        self,
        grace: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> list[int]:
        """SIGTERM the launch's processes, SIGKILL what is left after ``grace`` seconds,
        reap; the pids it found at first."""
        found = self.signal(signal.SIGTERM)
        deadline = clock() + grace
        while self.processes():
            if clock() > deadline:
                self.kill(grace, clock, sleep)
                break
            sleep(0.05)
        self.reap()
        return found

    def reap(self) -> list[int]:
        """Reap the launch's zombies that were re-parented to us; their pids."""
        me = os.getpid()
        reaped: list[int] = []
        if not self._ours:  # another process's launch: a child of ours is not its orphan
            return reaped
        for pid, entry in table(self._proc).items():
            if pid == self.leader or entry.running or entry.ppid != me:
                continue
            if self._seen.get(pid) != entry.start:
                continue  # not known as the launch's: a child someone else here waits for
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    reaped.append(pid)
        return reaped

    def close(self) -> None:
        """Give back the subreaper (after :meth:`end`); safe to call twice."""
        if self._open:
            self._open = False
            if self.tracked:
                SUBREAPER.release()
            self.tracked = False


__all__ = [
    "MARKER",
    "SUBREAPER",
    "Entry",
    "Launch",
    "carries",
    "descendants",
    "start_time",
    "stat_fields",
    "table",
]
