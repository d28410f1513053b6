"""The warm sandbox: one bubblewrap sandbox and interpreter serving many answers in turn.

Starting bubblewrap and an interpreter costs most of a fresh sandbox's time
per answer. A :class:`WarmSandbox` starts them once: the same allowlisted
layout and namespaces as the fresh one (:mod:`.layout`), with the
:mod:`.template` as pid 1. Each answer is a process forked from that clean
template, with its own pipes, working directory, uid (as root), rlimits,
cgroup (where one can be had) and session; one answer at a time per
sandbox. When the answer ends the template kills every process of it and
empties the answer's tmpfs, and says whether anything is left; a sandbox that
is not clean, or that broke the protocol, is thrown away (killing bwrap takes
the pid namespace and everything in it down) and the next answer gets a new
one. What an answer changed in its own process (modules, builtins, signal
handlers, fds) dies with the process; the template never runs answer code
and cannot be reached by it (see :mod:`.template`).

:class:`SandboxPool` keeps idle warm sandboxes for reuse, one per answer
being checked at a time; :func:`default_pool` is the process's own (closed
at the end of the session and at exit).
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import os
import select
import signal
import socket
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from pytest_specdecode.coding import layout as fs
from pytest_specdecode.coding.sandbox_base import (
    PREIMPORT,
    Limits,
    SandboxError,
    bwrap_argv,
    sandbox_env,
    visible_hidden,
)
from pytest_specdecode.coding.values import one_line
from pytest_specdecode.processes.children import peek_exit, signal_group

# What answers import most (HumanEval's and the built-ins' solutions), loaded once.
WARM_PREIMPORT = [*PREIMPORT, "json", "ctypes", "traceback"]
START_TIMEOUT = 30.0
RUN_TIMEOUT = 10.0  # for the template to fork an answer
END_TIMEOUT = 15.0  # the template gives up killing after 5 s; then the files
START_FAILURES = 2  # sandboxes that fail to start before the pool stops trying

Key = tuple[int, tuple[str, ...], bool]  # (tmpfs bytes, extra hidden paths, as root)


class WarmUnavailable(SandboxError):
    """No warm sandbox can be had here; answers get a fresh sandbox each (the reason says why)."""


class WarmBroken(SandboxError):
    """The warm sandbox stopped answering its protocol; it is thrown away."""


def key_for(limits: Limits, hide: Sequence[str], *, as_root: bool) -> Key:
    """Which warm sandboxes can serve an answer: same tmpfs size, hidden paths and uid mode."""
    return (limits.disk_mb << 20, visible_hidden(hide), as_root)


class WarmSandbox:
    """One running bubblewrap sandbox with the template inside; ``close()`` is idempotent."""

    def __init__(
        self,
        key: Key,
        *,
        timeout: float = START_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.key = key
        self.clock = clock
        self.broken = False
        self._closed = False
        self._ids = itertools.count()
        disk_bytes, hidden, as_root = key
        limits = Limits(disk_mb=max(1, disk_bytes >> 20))
        argv = bwrap_argv(limits, hidden, as_root=as_root, warm=True)
        self._sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=theirs.fileno(),
                stdout=subprocess.DEVNULL,
                stderr=self._stderr,
                cwd="/",
                env=sandbox_env(fs.WORKDIR),
                start_new_session=True,
                close_fds=True,
            )
        except BaseException:
            theirs.close()
            self._sock.close()
            self._stderr.close()
            self._closed = True
            raise
        theirs.close()
        try:
            self._send({"preimport": WARM_PREIMPORT})
            hello = self._recv(clock() + timeout)
        except SandboxError as exc:
            self.close()
            raise WarmUnavailable(f"the warm sandbox did not start: {exc}{self._tail()}") from None
        if hello.get("ok") is not True or hello.get("pid") != 1:
            self.close()
            raise WarmUnavailable(f"the warm sandbox did not start: {str(hello)[:100]}")
        if hello.get("protected") is not True and not as_root:
            # Without another uid per answer only non-dumpability keeps answers from
            # tracing the template; without it the template is not safe to reuse.
            self.close()
            raise WarmUnavailable("the template cannot make itself non-dumpable (prctl)")

    def _tail(self) -> str:
        with contextlib.suppress(OSError, ValueError):
            self._stderr.seek(0)
            lines = self._stderr.read(4096).decode(errors="replace").strip().splitlines()
            if lines:
                return f" ({one_line(lines[-1], 200)})"
        return ""

    def _send(self, obj: dict[str, Any], fds: Sequence[int] = ()) -> None:
        try:
            socket.send_fds(self._sock, [json.dumps(obj).encode()], list(fds))
        except OSError as exc:
            self.broken = True
            raise WarmBroken(f"the warm sandbox is gone ({exc.strerror or exc})") from None

    def _recv(self, deadline: float) -> dict[str, Any]:
        poller = select.poll()
        poller.register(self._sock, select.POLLIN)
        remaining = deadline - self.clock()
        if remaining <= 0 or not poller.poll(remaining * 1000):
            self.broken = True
            raise WarmBroken("the warm sandbox did not answer in time")
        try:
            data = self._sock.recv(1 << 16)
        except OSError:
            data = b""
        if not data:
            self.broken = True
            raise WarmBroken("the warm sandbox exited")
        try:
            reply = json.loads(data)
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            self.broken = True
            raise WarmBroken("the warm sandbox sent a malformed reply")
        return reply

    def _ask(self, obj: dict[str, Any], timeout: float, fds: Sequence[int] = ()) -> dict[str, Any]:
        self._send(obj, fds)
        reply = self._recv(self.clock() + timeout)
        if reply.get("id") != obj["id"]:
            self.broken = True
            raise WarmBroken(f"out-of-order reply from the warm sandbox: {str(reply)[:100]}")
        return reply

    def alive(self) -> bool:
        # Not reaped (poll() would): until close() the group id stays this sandbox's.
        return not self._closed and not self.broken and peek_exit(self.proc) is None

    def start(self, stderr_fd: int, group_fds: Sequence[int]) -> tuple[int, int, int]:
        """Fork one answer's process: (answer id, its request fd, its reply fd) for the parent."""
        answer = next(self._ids)
        request_r, request_w = os.pipe()
        reply_r, reply_w = os.pipe()
        try:
            self._ask(
                {"op": "run", "id": answer},
                RUN_TIMEOUT,
                [request_r, reply_w, stderr_fd, *group_fds],
            )
        except BaseException:
            for fd in (request_w, reply_r):
                os.close(fd)
            raise
        finally:
            os.close(request_r)
            os.close(reply_w)
        return answer, request_w, reply_r

    def status(self, answer: int, timeout: float = 1.0) -> int | None:
        """The answer's exit code (``-signal`` if killed) once it has exited, else None."""
        reply = self._ask({"op": "status", "id": answer, "timeout": timeout}, timeout + 5.0)
        code = reply.get("status")
        return code if type(code) is int else None

    def end(self, answer: int, uid: int | None) -> str | None:
        """Kill the answer's processes and remove its files: None when clean, else what is left.

        Anything but a clean answer marks this sandbox broken: it is not reused.
        """
        reply = self._ask({"op": "end", "id": answer, "uid": uid}, END_TIMEOUT)
        if reply.get("clean") is True:
            return None
        self.broken = True
        return one_line(str(reply.get("why") or "the template did not say"), 200)

    def close(self) -> None:
        """Kill bwrap (the pid namespace and every process in it die with it)."""
        if self._closed:
            return
        self._closed = True
        signal_group(self.proc, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        self.proc.wait()
        self._sock.close()
        self._stderr.close()


class SandboxPool:
    """Idle warm sandboxes by key; thread-safe. ``close()`` ends the idle ones."""

    def __init__(self, idle_per_key: int | None = None) -> None:
        self.idle_per_key = idle_per_key or max(2, os.cpu_count() or 1)
        self.unavailable: str | None = None  # why warm sandboxes cannot work here
        self._idle: dict[Key, list[WarmSandbox]] = {}
        self._lock = threading.Lock()
        self._failures = 0
        self.started = 0
        _POOLS.add(self)

    def _forget(self) -> None:
        """In a forked child: the idle sandboxes are the parent's, not to be used or closed."""
        self._lock = threading.Lock()
        self._idle = {}

    def acquire(self, key: Key) -> WarmSandbox:
        """An idle warm sandbox for ``key``, or a new one; raises WarmUnavailable."""
        if self.unavailable is not None:
            raise WarmUnavailable(self.unavailable)
        while True:
            with self._lock:
                idle = self._idle.get(key)
                candidate = idle.pop() if idle else None
            if candidate is None:
                break
            if candidate.alive():
                return candidate
            candidate.close()
        try:
            sandbox = WarmSandbox(key)
        except WarmUnavailable as exc:
            with self._lock:
                self._failures += 1
                # A refusal (no prctl) is final; a start that failed may be the load.
                if self._failures >= START_FAILURES or "non-dumpable" in str(exc):
                    self.unavailable = str(exc)
            raise
        with self._lock:
            self.started += 1
            self._failures = 0
        return sandbox

    def release(self, sandbox: WarmSandbox) -> None:
        """Give a sandbox back after its answer ended; a broken one is closed instead."""
        if sandbox.alive():
            with self._lock:
                idle = self._idle.setdefault(sandbox.key, [])
                if len(idle) < self.idle_per_key:
                    idle.append(sandbox)
                    return
        sandbox.close()

    def close(self) -> None:
        with self._lock:
            idle = [s for group in self._idle.values() for s in group]
            self._idle.clear()
        for sandbox in idle:
            sandbox.close()


_POOLS: weakref.WeakSet[SandboxPool] = weakref.WeakSet()


def _after_fork() -> None:
    for pool in list(_POOLS):
        pool._forget()


os.register_at_fork(after_in_child=_after_fork)
_DEFAULT = SandboxPool()


def default_pool() -> SandboxPool:
    """The process's pool (one per pytest worker; closed at session end and at exit)."""
    return _DEFAULT


atexit.register(_DEFAULT.close)
