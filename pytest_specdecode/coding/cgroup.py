"""A cgroup per answer, where one can be had: memory and process limits for the whole answer.

rlimits count per process: six children of one answer may each use the
memory limit. A cgroup counts them together (and the answer's tmpfs pages
with them). This module finds, never assumes, a place to create one:

- cgroup v1: the ``memory`` and ``pids`` hierarchies, a child of this
  process's own cgroup in each (``memory.limit_in_bytes``,
  ``memory.memsw.limit_in_bytes``, ``pids.max``);
- cgroup v2: a child of this process's own cgroup when that cgroup delegates
  ``memory`` and ``pids`` to its children (``memory.max``,
  ``memory.swap.max``, ``pids.max``; ``cgroup.kill`` to end it).

Children of the own cgroup keep the answer inside whatever limits the run
itself has. Where nothing is writable (an ordinary user without a delegated
cgroup, most containers) :func:`AnswerGroup.create` returns None and the
sandbox keeps to per-process rlimits (see docs/coding.md, "The sandbox").

The answer's first process joins from inside ``preexec_fn`` (before it
execs, so everything it starts is inside): it writes ``0`` to
``cgroup.procs`` files the parent opened.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import signal
import subprocess
import time
from dataclasses import dataclass

_counter = itertools.count()


@dataclass(frozen=True)
class Hierarchy:
    """Where this process's cgroup sits in one hierarchy and what it controls there."""

    version: int  # 1 or 2
    path: str  # the own cgroup's directory
    controllers: frozenset[str]  # of "memory", "pids" usable in children


def parse_hierarchies(cgroup_text: str, mountinfo_text: str) -> list[Hierarchy]:
    """The own cgroup directories for memory/pids, from /proc/self/{cgroup,mountinfo}."""
    mounts: list[tuple[str, str, str, set[str]]] = []  # (fstype, root, mountpoint, options)
    for line in mountinfo_text.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or len(tail) < 3:
            continue
        if tail[0] in ("cgroup", "cgroup2"):
            mounts.append((tail[0], fields[3], fields[4], set(tail[2].split(","))))
    found: list[Hierarchy] = []
    for line in cgroup_text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, names, own = parts
        wanted = set(names.split(",")) & {"memory", "pids"} if names else set()
        if names and not wanted:
            continue
        for fstype, root, point, options in mounts:
            if (fstype == "cgroup2") != (names == "") or (names and not wanted <= options):
                continue
            if not (own == root or own.startswith(root.rstrip("/") + "/")):
                continue
            path = os.path.join(point, own[len(root) :].lstrip("/"))
            found.append(Hierarchy(2 if not names else 1, path.rstrip("/"), frozenset(wanted)))
            break
    return found


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def _usable(hierarchy: Hierarchy) -> Hierarchy | None:
    """The hierarchy reduced to the controllers a child of it can use, or None."""
    if not os.access(hierarchy.path, os.W_OK | os.X_OK):
        return None
    if hierarchy.version == 1:
        return hierarchy
    delegated = set(_read(os.path.join(hierarchy.path, "cgroup.subtree_control")).split())
    usable = frozenset(delegated & {"memory", "pids"})
    return Hierarchy(2, hierarchy.path, usable) if "memory" in usable else None


@functools.cache
def hierarchies() -> tuple[Hierarchy, ...]:
    """The hierarchies where this process may create answer cgroups (cached, tested once)."""
    try:
        parsed = parse_hierarchies(_read("/proc/self/cgroup"), _read("/proc/self/mountinfo"))
    except ValueError:
        return ()
    usable = [u for h in parsed if (u := _usable(h)) is not None]
    v2 = [h for h in usable if h.version == 2]
    chosen = tuple(v2[:1]) if v2 else tuple(h for h in usable if h.version == 1)
    if not any("memory" in h.controllers for h in chosen):
        return ()
    if not _works(chosen):
        return ()
    return chosen


def _works(chosen: tuple[Hierarchy, ...]) -> bool:
    """Create a group, start a process in it, end both: the probe of :func:`hierarchies`."""
    group = AnswerGroup.make(chosen, memory_bytes=64 << 20, pids=8)
    if group is None:
        return False
    try:
        proc = subprocess.run(["/bin/sh", "-c", "exit 0"], preexec_fn=group.join, timeout=10)
        return proc.returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        with contextlib.suppress(OSError):
            group.close()


class AnswerGroup:
    """One answer's cgroup(s): limits, joining, killing and removal."""

    def __init__(self, dirs: list[tuple[int, str]]) -> None:
        self.dirs = dirs  # (version, directory) per hierarchy
        self._fds: list[int] = []
        for _version, path in dirs:
            self._fds.append(os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY))

    @classmethod
    def create(cls, memory_bytes: int, pids: int) -> AnswerGroup | None:
        """A new group with these limits, or None where no cgroup can be had."""
        chosen = hierarchies()
        return cls.make(chosen, memory_bytes, pids) if chosen else None

    @classmethod
    def make(
        cls, chosen: tuple[Hierarchy, ...], memory_bytes: int, pids: int
    ) -> AnswerGroup | None:
        name = f"specdecode-{os.getpid()}-{next(_counter)}"
        made: list[tuple[int, str]] = []
        try:
            for hierarchy in chosen:
                path = os.path.join(hierarchy.path, name)
                os.mkdir(path)
                made.append((hierarchy.version, path))
                _limit(hierarchy, path, memory_bytes, pids)
            return cls(made)
        except OSError:
            for _version, path in made:
                with contextlib.suppress(OSError):
                    os.rmdir(path)
            return None

    def join(self) -> None:
        """Move the calling process into the group (for ``preexec_fn``: no allocation)."""
        for fd in self._fds:
            os.write(fd, b"0")

    def procs_fds(self) -> list[int]:
        """The open ``cgroup.procs`` files: writing ``0`` to each moves the writer in."""
        return list(self._fds)

    def processes(self) -> list[int]:
        pids: set[int] = set()
        for _version, path in self.dirs:
            pids.update(int(p) for p in _read(os.path.join(path, "cgroup.procs")).split())
        return sorted(pids)

    def kill(self, grace: float = 5.0) -> None:
        """SIGKILL everything in the group until it is empty (or ``grace`` seconds)."""
        for version, path in self.dirs:
            if version == 2:
                kill_file = os.path.join(path, "cgroup.kill")
                with contextlib.suppress(OSError), open(kill_file, "w", encoding="ascii") as fh:
                    fh.write("1")
        deadline = time.monotonic() + grace
        while (pids := self.processes()) and time.monotonic() < deadline:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of the answer for the group's memory limit."""
        for version, path in self.dirs:
            name = "memory.oom_control" if version == 1 else "memory.events"
            for line in _read(os.path.join(path, name)).splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill" and value.strip().isdigit() and int(value) > 0:
                    return True
        return False

    def close(self) -> None:
        """Kill what is left and remove the group; raises OSError if it cannot be removed."""
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds = []
        self.kill()
        error: OSError | None = None
        for _version, path in self.dirs:
            deadline = time.monotonic() + 5.0
            while True:
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:  # EBUSY while the last process is leaving
                    if time.monotonic() > deadline:
                        error = exc
                        break
                    time.sleep(0.005)
        self.dirs = []
        if error is not None:
            raise error


def _limit(hierarchy: Hierarchy, path: str, memory_bytes: int, pids: int) -> None:
    def write(name: str, value: int | str, *, required: bool = True) -> None:
        try:
            with open(os.path.join(path, name), "w", encoding="ascii") as fh:
                fh.write(str(value))
        except OSError:
            if required:
                raise

    if hierarchy.version == 1:
        if "memory" in hierarchy.controllers:
            write("memory.limit_in_bytes", memory_bytes)
            write("memory.memsw.limit_in_bytes", memory_bytes, required=False)  # no swap
        if "pids" in hierarchy.controllers:
            write("pids.max", pids)
        return
    write("memory.max", memory_bytes)
    write("memory.swap.max", 0, required=False)
    if "pids" in hierarchy.controllers:
        write("pids.max", pids)
