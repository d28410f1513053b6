"""One sandboxed worker process per answer, and the pipe protocol to it.

Isolation, strongest available first:

- ``bwrap`` (bubblewrap): an allowlisted filesystem (:mod:`.layout`: an empty
  root with only the interpreter, its standard library and shared libraries
  read-only, a size-limited tmpfs at ``/tmp`` as the answer's working
  directory), new pid/net/ipc/uts namespaces (``--unshare-all`` when not
  root), ``--die-with-parent --new-session``, and ``python -I -S -B``. As
  root the worker drops to a fresh unprivileged uid (one per answer) before
  any answer code runs. Killing bwrap tears down the pid namespace: every
  process the answer started dies with it. By default the worker is forked
  from a warm sandbox (:mod:`.warm`: the same layout and namespaces, started
  once per worker process and reused one answer at a time, with its own
  working directory, uid, limits, cgroup and session per answer); a fresh
  bwrap per answer where no warm one can be had or ``warm=False``.
- fallback (no bwrap, or it cannot create namespaces, or asked for): the
  same worker under rlimits, its own session/process group, a temp cwd on
  the host, a minimal environment and the wall-clock timeout; as root it also
  drops to a fresh uid. There is no filesystem or network isolation;
  :func:`sandbox_warning` says what that leaves open.

In both, a cgroup holds the whole answer where one can be created
(:mod:`.cgroup`): memory and process count are limited for the answer, not
per process, and everything in it is killed at the end. Without one, a root
run kills every process of the answer's uid instead.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from pytest_specdecode.coding import inflight, worker
from pytest_specdecode.coding import layout as fs
from pytest_specdecode.coding.cgroup import AnswerGroup, hierarchies
from pytest_specdecode.coding.reaper import (
    UID_BASE,
    kill_uid,
    processes_of,
    remove_tree,
)
from pytest_specdecode.coding.sandbox_base import (
    PREIMPORT,
    Limits,
    SandboxError,
    SandboxTimeout,
    bwrap_argv,
    sandbox_env,
    worker_command,
)
from pytest_specdecode.coding.values import one_line
from pytest_specdecode.coding.warm import (
    Key,
    SandboxPool,
    WarmSandbox,
    WarmUnavailable,
    default_pool,
    key_for,
)
from pytest_specdecode.config.settings import SettingsError
from pytest_specdecode.processes.children import peek_exit, signal_group

MODES = ("auto", "bwrap", "fallback")
# The longest a worker that closed its pipe is given to exit before it is called alive.
EXIT_WAIT = 10.0
_uid_counter = itertools.count()


class SandboxUnavailable(SettingsError):
    """bubblewrap was required (``--dflash-sandbox=require``) but cannot run here."""


@functools.cache
def _probe() -> tuple[str, str | None]:
    """("bwrap", None) when bubblewrap works here, else ("fallback", why)."""
    if sys.platform != "linux":
        return "fallback", f"bubblewrap is Linux-only (platform {sys.platform!r})"
    if shutil.which("bwrap") is None:
        return "fallback", "bubblewrap is not installed (install the 'bubblewrap' package)"
    if not fs.supports("--perms"):
        return "fallback", "bubblewrap is too old (no --perms; 0.5 or newer is needed)"
    try:
        argv = bwrap_argv(Limits(), as_root=os.geteuid() == 0)
    except fs.LayoutError as exc:
        return "fallback", str(exc)
    argv[-1] = "import json, math, os; os.listdir('/tmp')"
    try:
        proc = subprocess.run(
            argv, capture_output=True, timeout=30, stdin=subprocess.DEVNULL, env=sandbox_env("/tmp")
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return "fallback", f"bwrap did not run: {exc}"
    if proc.returncode != 0:
        lines = proc.stderr.decode(errors="replace").strip().splitlines() or ["no output"]
        return "fallback", f"bwrap cannot create a sandbox here ({lines[-1]!r})"
    return "bwrap", None


def sandbox_mode() -> str:
    """``"bwrap"`` or ``"fallback"``: how answers are isolated on this machine."""
    return _probe()[0]


def sandbox_warning(mode: str = "auto") -> str | None:
    """One line to print once per run when answers run in the weaker fallback, else None.

    ``mode`` is a sandbox mode or a ``--dflash-sandbox`` value.

    It says what the fallback cannot protect, as this process runs (root or not,
    with or without a cgroup).
    """
    if mode in ("bwrap", "require"):
        return None
    why = "--dflash-sandbox=fallback" if mode == "fallback" else _probe()[1]
    if why is None:
        return None
    cgroup = bool(hierarchies())
    if os.geteuid() == 0:
        exposed = (
            "answers run as a fresh uid but can read every world-readable file (other "
            "checkouts, reference solutions in them), reach Unix sockets open to all and the "
            "network"
        )
    else:
        exposed = (
            "answers can read every file you can (home directory, SSH keys, other checkouts, "
            "the reference solutions), reach your Unix sockets (ssh-agent, docker) and the "
            "network, and signal your processes"
        )
        if not cgroup:
            exposed += "; a daemon an answer starts can outlive it"
    limit = "memory per answer through a cgroup" if cgroup else "memory per process only"
    return (
        f"coding sandbox is the weaker fallback ({why}): {exposed}; it has only the time "
        f"limit, a process group and rlimits ({limit})"
    )


def require_bwrap() -> None:
    """Raise :class:`SandboxUnavailable` (one line) unless bubblewrap works here."""
    mode, why = _probe()
    if mode != "bwrap":
        raise SandboxUnavailable(
            f"--dflash-sandbox=require: {why}; install bubblewrap and allow unprivileged user "
            "namespaces (sysctl kernel.unprivileged_userns_clone=1), or use "
            "--dflash-sandbox=auto to accept the weaker fallback"
        )


def _resolve_mode(mode: str) -> str:
    if mode == "auto":
        return sandbox_mode()
    if mode not in MODES:
        raise ValueError(f"sandbox mode must be 'auto', 'bwrap' or 'fallback', got {mode!r}")
    return mode


def _fresh_uid() -> int:
    """A uid no other answer of this run holds now (256 in turn per test process)."""
    return UID_BASE + ((os.getpid() & 0xFFFF) << 8 | next(_uid_counter) & 0xFF)


class Sandbox:
    """A running worker holding one candidate; a context manager, ``close()`` is idempotent.

    In bubblewrap mode the worker is, by default (``warm=True``), a process
    forked from a warm sandbox of the process's :func:`.warm.default_pool`
    (or of the pool given as ``warm``); ``warm=False``, the fallback mode, or
    a warm sandbox that cannot be had (:class:`.warm.WarmUnavailable`) start
    a fresh sandbox and interpreter for this answer alone.
    """

    def __init__(
        self,
        code: str,
        entry_point: str,
        *,
        preamble: str = "",
        limits: Limits | None = None,
        mode: str = "auto",
        hide: Sequence[str] = (),
        deadline: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        warm: bool | SandboxPool = True,
    ) -> None:
        self.limits = limits or Limits()
        self.mode = _resolve_mode(mode)
        self.clock = clock
        self.workdir: str | None = None  # on the host: the fallback's only
        self.uid: int | None = None
        self.warm: WarmSandbox | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self._pool: SandboxPool | None = None
        self._answer = -1
        self._inbuf = bytearray()
        self._outbuf = bytearray()
        self._next_id = 0
        self._answered = 0
        self._closed = False
        root = os.geteuid() == 0
        if root:
            self.uid = _fresh_uid()
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        self.group: AnswerGroup | None = None
        try:
            self.group = AnswerGroup.create(self.limits.memory_mb << 20, self.limits.nproc)
            if self.mode == "bwrap" and warm is not False:
                pool = warm if isinstance(warm, SandboxPool) else default_pool()
                self._start_warm(pool, key_for(self.limits, hide, as_root=root))
            if self.warm is None:
                self._start_fresh(hide, root)
            os.set_blocking(self._wfd, False)
            os.set_blocking(self._rfd, False)
        except BaseException:
            self._stderr.close()
            self._closed = True
            with contextlib.suppress(Exception):
                if self.warm is not None and self._pool is not None:
                    self.warm.broken = True  # its answer was never ended: not to be reused
                    self._pool.release(self.warm)
                if self.group is not None:
                    self.group.close()
                if self.workdir is not None:
                    remove_tree(self.workdir)
            raise
        # Starting a warm sandbox is not the answer's time: its deadline starts now.
        self.deadline = deadline if deadline is not None else clock() + self.limits.timeout
        setup = {
            "uid": self.uid,
            "gid": self.uid,
            "limits": self.limits.rlimits(),
            "preimport": PREIMPORT if self.mode == "fallback" and root else [],
            "workdir": f"{fs.WORKDIR}/answer-{self._answer}" if self.warm else None,
            "preamble": preamble,
            "code": code,
            "entry": entry_point,
        }
        self._send(setup)
        inflight.opened(self)

    def abort(self) -> None:
        """End the answer's time now (from another thread): its next wait times out."""
        self.deadline = float("-inf")

    def _start_warm(self, pool: SandboxPool, key: Key) -> None:
        groups = self.group.procs_fds() if self.group is not None else []
        for _attempt in range(2):  # an idle sandbox may have died since: then one new one
            try:
                sandbox = pool.acquire(key)
            except WarmUnavailable:
                return
            try:
                self._answer, self._wfd, self._rfd = sandbox.start(self._stderr.fileno(), groups)
            except SandboxError:
                sandbox.broken = True
                pool.release(sandbox)
                continue
            self.warm, self._pool = sandbox, pool
            return

    def _start_fresh(self, hide: Sequence[str], root: bool) -> None:
        if self.mode == "bwrap":
            argv = bwrap_argv(self.limits, hide, as_root=root)
            home, cwd = fs.WORKDIR, "/"
        else:
            argv = worker_command(fs.base_executable())
            home = cwd = self.workdir = tempfile.mkdtemp(prefix="specdecode-answer-")
            if self.uid is not None:
                os.chown(self.workdir, self.uid, self.uid)
            # Search permission for "other": root without capabilities must chdir into it.
            os.chmod(self.workdir, 0o711 if root else 0o700)
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            cwd=cwd,
            env=sandbox_env(home),
            start_new_session=True,
            close_fds=True,
            # Into the answer's cgroup before exec: everything it starts is inside.
            preexec_fn=self.group.join if self.group is not None else None,
        )
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self._wfd, self._rfd = self.proc.stdin.fileno(), self.proc.stdout.fileno()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ready(self) -> str | None:
        """Wait for the candidate to load: None when ready, else the load error."""
        reply = self._recv()
        if reply.get("ok") is True:
            return None
        error, setup = reply.get("error"), reply.get("setup")
        if reply.get("ok") is False and isinstance(error, str):
            return one_line(error)
        if reply.get("ok") is False and isinstance(setup, str):
            raise SandboxError(f"the sandbox could not set the answer up ({one_line(setup, 200)})")
        raise SandboxError(f"malformed reply while loading: {str(reply)[:100]}")

    def submit(self, args: tuple[Any, ...]) -> int:
        """Queue one call; the answer comes back from :meth:`result` in order."""
        call_id = self._next_id
        self._next_id += 1
        self._send({"id": call_id, "args": worker.encode(tuple(args))})
        return call_id

    def result(self, call_id: int) -> tuple[bool, Any]:
        """(True, value) or (False, "ExcType: message") for the call ``call_id``."""
        reply = self._recv()
        self._answered += 1
        if reply.get("id") != call_id or not isinstance(reply.get("ok"), bool):
            raise SandboxError(f"out-of-order or malformed reply {str(reply)[:100]}")
        if reply["ok"]:
            try:
                return True, worker.decode(reply.get("value"))
            except (ValueError, TypeError, RecursionError) as exc:
                raise SandboxError(f"unreadable result: {exc}") from None
        exc_text = reply.get("exc")
        if not isinstance(exc_text, str):
            raise SandboxError("malformed exception reply")
        return False, one_line(exc_text)

    def drain(self) -> None:
        """Read and drop the answers still owed for earlier calls."""
        while self._answered < self._next_id:
            self.result(self._answered)

    def call(self, args: tuple[Any, ...]) -> tuple[bool, Any]:
        """One round trip (used while shrinking)."""
        return self.result(self.submit(args))

    def _send(self, obj: dict[str, Any]) -> None:
        self._outbuf += json.dumps(obj).encode() + b"\n"
        self._pump(wait=False)

    def _recv(self) -> dict[str, Any]:
        while True:
            end = self._inbuf.find(b"\n")
            if end >= 0:
                line = bytes(self._inbuf[:end])
                del self._inbuf[: end + 1]
                try:
                    reply = json.loads(line)
                except (ValueError, RecursionError):
                    raise SandboxError("the worker sent something that is not JSON") from None
                if not isinstance(reply, dict):
                    raise SandboxError("the worker sent a non-object reply")
                return reply
            if len(self._inbuf) > self.limits.max_reply_bytes:
                raise SandboxError(f"a reply exceeded {self.limits.max_reply_bytes} bytes")
            self._pump(wait=True)

    def _pump(self, *, wait: bool) -> None:
        """Move bytes both ways; with ``wait``, block until something arrives or the deadline."""
        poller = select.poll()
        poller.register(self._rfd, select.POLLIN)
        if self._outbuf:
            poller.register(self._wfd, select.POLLOUT)
        remaining = self.deadline - self.clock()
        if wait and remaining <= 0:
            raise SandboxTimeout("deadline passed")
        # Waits are cut into slices: abort() may end the deadline meanwhile.
        slice_ = min(max(0.0, remaining), inflight.WAKE_SECONDS)
        for fd, _event in poller.poll(slice_ * 1000 if wait else 0):
            if fd == self._wfd:
                try:
                    written = os.write(self._wfd, self._outbuf[:65536])
                    del self._outbuf[:written]
                except BlockingIOError:
                    pass
                except OSError:  # the worker is gone; reading will say how
                    self._outbuf.clear()
            elif fd == self._rfd:
                try:
                    chunk = os.read(self._rfd, 1 << 20)
                except BlockingIOError:
                    continue
                if not chunk:
                    # While only sending, leave the news to the next read of an answer.
                    if wait:
                        raise SandboxError(self._exit_text())
                    return
                self._inbuf += chunk

    def _exit_code(self) -> int | None:
        # The pipe is closed, so the worker is exiting: the wait ends as soon as it has.
        # Its bound is for an answer that closed the pipe and lives on: the rest of its
        # time, at least a second and at most EXIT_WAIT (a loaded machine reaps late).
        wait = max(1.0, min(EXIT_WAIT, self.deadline - self.clock()))
        if self.warm is not None:
            try:
                return self.warm.status(self._answer, timeout=wait)
            except SandboxError:
                return None
        assert self.proc is not None
        # Not reaped: until close() its pid and group id stay ours to signal.
        return peek_exit(self.proc, timeout=wait)

    def _exit_text(self) -> str:
        code = self._exit_code()
        if code in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
            raise SandboxTimeout("CPU-time limit exceeded")
        if self.group is not None and self.group.oom_killed():
            return f"the answer exceeded its {self.limits.memory_mb} MB memory limit and was killed"
        self._stderr.seek(0)
        tail = self._stderr.read(4096).decode(errors="replace").strip().splitlines()
        detail = f" ({one_line(tail[-1], 200)})" if tail else ""
        if code is None:
            return f"the sandbox closed its pipe{detail}"
        return f"the sandbox process exited with status {code}{detail}"

    def close(self) -> None:
        """Kill the worker and everything it started; remove what it wrote.

        Every step runs; the first failure is raised afterwards (the verdict
        then becomes an error: a failed clean-up is never a silent pass).
        """
        if self._closed:
            return
        self._closed = True
        inflight.closed(self)
        errors: list[BaseException] = []

        def step(action: Callable[[], object]) -> None:
            try:
                action()
            except (ProcessLookupError, PermissionError):
                pass  # already gone, or no longer ours to signal
            except Exception as exc:
                errors.append(exc)

        cleared = False  # the warm template saw every process of the answer gone
        if self.warm is not None:
            cleared = self._end_warm(step)
        elif self.proc is not None:
            proc = self.proc
            step(lambda: signal_group(proc, signal.SIGKILL))
            step(proc.kill)
            step(proc.wait)
        emptied = False
        if self.group is not None:
            before = len(errors)
            step(self.group.close)
            # Every process of the answer was in its group (it joined before exec,
            # and a sandbox uid cannot move itself out): an empty group is proof.
            emptied = len(errors) == before
        if self.uid is not None and not emptied and not cleared:
            # bwrap's pid namespace dies with it, but asynchronously; the fallback
            # needs this to reach processes that left the process group.
            step(lambda: kill_uid(self.uid) if self.uid is not None else None)
        if self.proc is not None:
            for stream in (self.proc.stdin, self.proc.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
        else:
            for fd in (self._wfd, self._rfd):
                with contextlib.suppress(OSError):
                    os.close(fd)
        with contextlib.suppress(OSError):
            self._stderr.close()
        if self.workdir is not None:
            step(lambda: remove_tree(self.workdir) if self.workdir is not None else None)
        if errors:
            raise SandboxError(f"cleaning up after the answer failed: {worker.describe(errors[0])}")

    def _end_warm(self, step: Callable[[Callable[[], object]], None]) -> bool:
        """End the answer in its warm sandbox; True when the template saw it all gone.

        A sandbox that is not clean afterwards (or stopped answering) is closed,
        not reused: killing bwrap ends its pid namespace and all in it, as the
        fresh sandbox ends. Only a failure of that is a failed clean-up.
        """
        sandbox, pool = self.warm, self._pool
        assert sandbox is not None
        assert pool is not None
        left: list[str | None] = ["the template did not answer"]

        def end() -> None:
            with contextlib.suppress(SandboxError):
                left[0] = sandbox.end(self._answer, self.uid)

        step(end)
        if left[0] is not None:
            sandbox.broken = True  # not clean, or the template did not say: not reused
        step(lambda: pool.release(sandbox))
        return left[0] is None


__all__ = [
    "Limits",
    "Sandbox",
    "SandboxError",
    "SandboxTimeout",
    "SandboxUnavailable",
    "processes_of",
    "require_bwrap",
    "sandbox_mode",
    "sandbox_warning",
]
