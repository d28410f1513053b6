"""The warm sandbox's template: the first process inside it, forking one process per answer.

Stdlib-only, like :mod:`.worker`, and for the same reason: the parent runs
this file's source and the worker's in one namespace inside bubblewrap
(``template(main)``), where this package is not visible.

The template is pid 1 of the sandbox's pid namespace (``bwrap --as-pid-1``):
every process an answer starts is its descendant, orphans are reparented to
it, and once it has no child left no other process exists in the sandbox.
It never runs answer code, holds no fd an answer can reach and cannot be
traced or signalled by one: it makes itself non-dumpable (no ptrace, no
``/proc/1/mem``) before any answer starts, ignores the signals it has
handlers for, and as root answers run under other uids.

Protocol: one JSON object per message on the SOCK_SEQPACKET socket at fd 0,
fds attached with SCM_RIGHTS; the parent sends, the template answers each:

1. ``{"preimport": [...]}``: import the modules answers use (so their import
   costs nothing), become non-dumpable; answer
   ``{"ok": true, "pid": 1, "protected": bool}``.
2. ``{"op": "run", "id": n}`` with fds ``[request, reply, stderr, *cgroup.procs]``:
   fork the answer. The child joins the answer's cgroups (``cgroup.procs``
   files the parent opened), starts a session of its own, keeps only its
   three fds and runs the worker's ``main()``, which reads its setup (limits,
   uid, working directory, code) from ``request``. Answer ``{"id": n}``.
3. ``{"op": "status", "id": n, "timeout": s}``: the answer's exit status once
   it has exited (``-signal`` when killed), else null.
4. ``{"op": "end", "id": n, "uid": u}``: kill every process of the answer
   (pid 1 does it: ``kill(-1)`` and reaping until it has no child; as root it
   holds CAP_KILL for that, nothing else beyond CAP_SETUID/CAP_SETGID), empty
   ``/tmp`` and ``/dev/shm`` as the answer's uid, check that nothing is left
   (no process, no file, no SysV IPC object); answer ``{"id": n, "clean": true}`` or
   ``{"id": n, "clean": false, "why": "..."}``. The parent then throws this
   sandbox away and starts a fresh one: nothing unclean reaches the next answer.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import time
from collections.abc import Callable
from typing import Any

PR_SET_DUMPABLE = 4
SCRATCH = ("/tmp", "/dev/shm")
SYSV = ("/proc/sysvipc/shm", "/proc/sysvipc/sem", "/proc/sysvipc/msg")
MAX_FDS = 16
GRACE = 5.0
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _non_dumpable() -> bool:
    """prctl(PR_SET_DUMPABLE, 0): no process without CAP_SYS_PTRACE may trace us."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0)
    except BaseException:
        return False


def _exit_code(status: int) -> int:
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _answer(fds: list[int], answer_main: Callable[[], None]) -> None:
    """In the forked child: become the answer's process, then run the worker. Never returns."""
    code = 70
    try:
        request, reply, errors, *groups = fds
        try:
            for fd in groups:  # into the answer's cgroups before anything else runs
                os.write(fd, b"0")
        except OSError as exc:
            os.write(errors, f"cannot join the answer's cgroup: {exc}\n".encode())
            raise
        os.setsid()
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as a fresh interpreter has it
        for target, fd in ((0, request), (1, reply), (2, errors)):
            os.dup2(fd, target)
        os.closerange(3, 1 << 16)
        code = 71
        answer_main()
        code = 0
    except BaseException:
        # Like an uncaught exception in a fresh interpreter: the traceback on stderr, status 1.
        with contextlib.suppress(BaseException):
            import traceback

            traceback.print_exc()
        code = 1 if code == 71 else code
    finally:
        os._exit(code)


def clear_tree(path: str) -> None:
    """Remove everything inside the directory ``path``, however deep (also used by
    :func:`pytest_specdecode.coding.reaper.remove_tree` outside the sandbox).

    No recursion and one open directory at a time (a 5000-deep tree must not
    exhaust the stack or the fds); only for trees nothing writes to any more.
    """
    fd = os.open(path, _DIR_FLAGS)
    names: list[str] = []  # the path from ``path`` down to ``fd``
    pending = [_unlink_files(fd)]  # subdirectories still to remove, per level
    try:
        while True:
            if pending[-1]:
                name = pending[-1].pop()
                try:
                    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except PermissionError:
                    os.chmod(name, stat.S_IRWXU, dir_fd=fd)
                    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = child
                names.append(name)
                pending.append(_unlink_files(fd))
                continue
            if not names:
                break
            parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = parent
            os.rmdir(names.pop(), dir_fd=fd)
            pending.pop()
    finally:
        os.close(fd)


def _unlink_files(fd: int) -> list[str]:
    """Unlink every non-directory in the directory ``fd``; return its subdirectories."""
    with contextlib.suppress(OSError):
        os.fchmod(fd, os.fstat(fd).st_mode | stat.S_IRWXU)  # the answer may have made it 0
    subdirs = []
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                subdirs.append(entry.name)
            else:
                os.unlink(entry.name, dir_fd=fd)
    return subdirs


def _wipe(uid: int | None) -> None:
    """Empty the answer's tmpfs, as its uid (root: in a forked helper, the files are its)."""
    if uid is None:
        for path in SCRATCH:
            with contextlib.suppress(OSError):
                os.chmod(path, 0o1777)  # the answer owned it, and may have changed it
            clear_tree(path)
        return
    helper = os.fork()
    if helper == 0:
        code = 1
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            for path in SCRATCH:
                clear_tree(path)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(helper, 0)
    if status != 0:
        raise OSError(f"removing the answer's files failed (status {_exit_code(status)})")


def _leftovers() -> list[str]:
    """What the answer left that the sweep did not remove; empty when clean."""
    found = []
    for path in SCRATCH:
        try:
            mode = os.stat(path).st_mode
            names = os.listdir(path)
        except OSError as exc:
            found.append(f"{path}: {exc.__class__.__name__}")
            continue
        if names:
            found.append(f"{len(names)} entries left in {path}")
        if stat.S_IMODE(mode) != 0o1777:
            found.append(f"{path} has mode {stat.S_IMODE(mode):o}")
    for path in SYSV:
        try:
            with open(path, encoding="ascii", errors="replace") as fh:
                rows = fh.read().splitlines()[1:]
        except OSError:
            continue
        if rows:
            found.append(f"{len(rows)} SysV IPC objects in {path}")
    return found


class _Template:
    def __init__(self, control: socket.socket, answer_main: Callable[[], None]) -> None:
        self.control = control
        self.answer_main = answer_main
        self.pids: dict[int, int] = {}  # answer id -> pid of its first process
        self.codes: dict[int, int] = {}  # pid -> exit code, once reaped

    def send(self, obj: dict[str, Any]) -> None:
        self.control.sendall(json.dumps(obj).encode())

    def run(self, msg: dict[str, Any], fds: list[int]) -> None:
        pid = os.fork()
        if pid == 0:
            self.control.close()
            _answer(fds, self.answer_main)
        for fd in fds:
            os.close(fd)
        self.pids[msg["id"]] = pid
        self.send({"id": msg["id"]})

    def status(self, msg: dict[str, Any]) -> None:
        pid = self.pids.get(msg["id"], -1)
        deadline = time.monotonic() + float(msg.get("timeout", 1.0))
        while pid not in self.codes:
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                break
            if done:
                self.codes[pid] = _exit_code(status)
            elif time.monotonic() > deadline:
                break
            else:
                time.sleep(0.002)
        self.send({"id": msg["id"], "status": self.codes.get(pid)})

    def end(self, msg: dict[str, Any]) -> None:
        why: list[str] = []
        if not self._kill_all():
            why.append("a process of the answer survived SIGKILL")
        else:
            try:
                _wipe(msg.get("uid"))
            except OSError as exc:
                why.append(f"removing its files failed: {exc}")
        why += _leftovers()
        self.pids.pop(msg["id"], None)
        self.codes.clear()
        self.send({"id": msg["id"], "clean": not why, "why": "; ".join(why)})

    def _kill_all(self) -> bool:
        """SIGKILL every other process in the sandbox until none is left; False on timeout.

        Done here, not in a helper of the answer's uid: a process of the answer
        could kill the helper, but cannot signal pid 1. Everything in the sandbox
        descends from us, so once we have no child (dead or alive) nothing is left.
        """
        deadline = time.monotonic() + GRACE
        while True:
            with contextlib.suppress(ProcessLookupError):
                os.kill(-1, signal.SIGKILL)  # all we may signal but ourselves
            while True:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    return True
                if not pid:
                    break
                self.codes[pid] = _exit_code(status)
            if time.monotonic() > deadline:
                return False
            time.sleep(0.0005)

    def serve(self) -> None:
        while True:
            try:
                data, fds, _flags, _addr = socket.recv_fds(self.control, 1 << 16, MAX_FDS)
            except OSError:
                return
            if not data:
                return  # the parent is gone; as pid 1 our exit ends the sandbox
            msg = json.loads(data)
            op = msg.get("op")
            if op == "run":
                self.run(msg, fds)
                continue
            for fd in fds:
                os.close(fd)
            if op == "status":
                self.status(msg)
            elif op == "end":
                self.end(msg)
            else:
                return


def template(answer_main: Callable[[], None]) -> None:
    """Serve the parent on fd 0 until it goes away (see the module docstring)."""
    control = socket.socket(fileno=os.dup(0))
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    os.close(null)
    # pid 1 only receives the signals it has a handler for: Python's SIGINT one is the only.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    data, fds, _flags, _addr = socket.recv_fds(control, 1 << 16, MAX_FDS)
    for fd in fds:
        os.close(fd)
    setup = json.loads(data)
    protected = _non_dumpable()
    for module in setup.get("preimport", []):
        with contextlib.suppress(BaseException):
            __import__(module)
    server = _Template(control, answer_main)
    server.send({"ok": True, "pid": os.getpid(), "protected": protected})
    server.serve()
