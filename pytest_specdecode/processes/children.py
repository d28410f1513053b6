"""Child processes whose pid stays ours until the very end.

A process group is signalled by number (``killpg(pid)``), and a pid is free
for the kernel to hand out again as soon as its process is reaped. On a busy
machine pids wrap within minutes (``pid_max`` is often 32768), so signalling
the group of a child that was reaped earlier (by ``Popen.poll()``, say) can
kill an unrelated process that became a group leader under that number:
another run's sandbox, or anything else of the user's.

So a child is reaped only when it is ended for good: :func:`peek_exit`
reads its exit status without reaping it (``waitid`` with ``WNOWAIT``; its
zombie keeps the pid, and the group id, taken), and :func:`signal_group`
signals the group only while the child is unreaped. :func:`free_port` gives a local
child server (the simulator) a port to listen on.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import subprocess
import time
from typing import Any

_KILLED = {getattr(os, "CLD_KILLED", 2), getattr(os, "CLD_DUMPED", 3)}


def _status(info: os.waitid_result) -> int:
    # Popen's convention: -signal when killed, else the exit status.
    return -info.si_status if info.si_code in _KILLED else info.si_status


def _peek(proc: subprocess.Popen[Any]) -> int | None:
    if proc.returncode is not None:
        return proc.returncode
    try:
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:  # reaped by someone else: Popen can still tell
        return proc.poll()
    return None if info is None else _status(info)


def peek_exit(proc: subprocess.Popen[Any], timeout: float = 0.0) -> int | None:
    """The child's exit code (``-signal`` if killed) once it exited within ``timeout``
    seconds, else None; the child is not reaped (``proc.wait()`` does that)."""
    found = _peek(proc)
    if found is not None or timeout <= 0:
        return found
    deadline = time.monotonic() + timeout
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # an older kernel: look again every 10 ms
        while found is None and (remaining := deadline - time.monotonic()) > 0:
            time.sleep(min(0.01, remaining))
            found = _peek(proc)
        return found
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)  # readable once the process has exited
        poller.poll(max(0.0, deadline - time.monotonic()) * 1000)
        return _peek(proc)
    finally:
        os.close(pidfd)


def signal_group(proc: subprocess.Popen[Any], sig: int) -> bool:
    """Signal the process group the child leads (``start_new_session``), but only while
    the child is unreaped, so the group id is still its own. True when sent."""
    if proc.returncode is not None:
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)
        return True
    return False


def free_port() -> int:
    """A TCP port nobody listens on right now on 127.0.0.1, for a local child server
    (the simulator) to listen on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


__all__ = ["free_port", "peek_exit", "signal_group"]
