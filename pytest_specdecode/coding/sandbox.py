"""One sandboxed worker process per answer, and the pipe protocol to it.

Isolation, strongest available first:

- ``bwrap`` (bubblewrap): ``--ro-bind / / --tmpfs /tmp --proc /proc --dev /dev
  --unshare-net --unshare-pid --unshare-ipc --unshare-uts --unshare-cgroup-try
  --die-with-parent --new-session``, the temp working dir bound writable, a
  tmpfs over this package, its checkout and every site-packages directory (so
  the reference and the datasets cannot be read), the interpreter's prefix
  re-bound read-only at ``/tmp/.python`` and run as ``python -I -S -B``.
  When the test process is root, bwrap keeps only CAP_SETUID/CAP_SETGID and
  the worker drops to a fresh unprivileged uid (one per sandbox, so
  RLIMIT_NPROC is enforced and counted per answer) before any candidate code
  runs. Killing bwrap tears down the pid namespace: every process the
  candidate started dies with it.
- fallback (no bwrap, or it cannot create namespaces): the same worker under
  rlimits, its own session/process group, a temp cwd, a minimal environment
  and the wall-clock timeout; as root it also drops to a fresh uid and the
  parent kills every process of that uid afterwards. There is no network or
  filesystem isolation; :func:`sandbox_warning` says so in one line.
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
import site
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_specdecode.coding import worker
from pytest_specdecode.errors import SpecDecodeError

# Stdlib modules imported before the uid drop in fallback mode, where the
# interpreter may live somewhere the sandbox uid cannot read (e.g. /root/.pyenv).
PREIMPORT = [
    "math",
    "cmath",
    "typing",
    "collections",
    "collections.abc",
    "itertools",
    "functools",
    "re",
    "string",
    "heapq",
    "bisect",
    "hashlib",
    "random",
    "statistics",
    "fractions",
    "decimal",
    "operator",
    "copy",
    "datetime",
    "dataclasses",
    "enum",
    "array",
    "numbers",
    "unicodedata",
    "textwrap",
]

SANDBOX_PYTHON = "/tmp/.python"
_UID_BASE = 0x5F000000
_uid_counter = itertools.count()


@dataclass(frozen=True)
class Limits:
    """Resource limits for one answer; ``timeout`` is wall-clock for the whole check."""

    timeout: float = 10.0
    memory_mb: int = 1024
    file_size_mb: int = 16
    nproc: int = 64
    nofile: int = 64
    max_reply_bytes: int = 4 << 20

    def rlimits(self) -> dict[str, int]:
        """The RLIMIT_* values the worker applies to itself."""
        return {
            "as": self.memory_mb << 20,
            "cpu": max(1, int(self.timeout + 0.999)),
            "fsize": self.file_size_mb << 20,
            "nproc": self.nproc,
            "nofile": self.nofile,
            "core": 0,
        }


class SandboxError(SpecDecodeError):
    """The worker broke the protocol, died, or could not start."""


class SandboxTimeout(SandboxError):
    """The deadline passed while waiting for the worker."""


def _interpreter() -> tuple[str, str]:
    """(real executable, its installation prefix)."""
    exe = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    return exe, os.path.realpath(sys.base_prefix)


def _hidden_paths() -> list[str]:
    """Directories the candidate must not see: this package, its checkout, site-packages."""
    package = Path(__file__).resolve().parent.parent
    paths = {str(package)}
    root = package.parent
    if (root / "pyproject.toml").exists() or (root / ".git").exists():
        paths.add(str(root))
    candidates = [*site.getsitepackages(), site.getusersitepackages()]
    base = {"base": sys.base_prefix, "platbase": sys.base_prefix}
    for paths_of in (sysconfig.get_paths(), sysconfig.get_paths(vars=base)):
        candidates += [paths_of["purelib"], paths_of["platlib"]]
    paths.update(os.path.realpath(p) for p in candidates if os.path.isdir(p))
    return sorted(p for p in paths if p != "/")


def _env(workdir: str) -> dict[str, str]:
    # Only what an interpreter needs: no API keys, SSH agent, PYTHONPATH or proxies.
    return {"PATH": "/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8"}


def bwrap_argv(workdir: str, extra_hidden: Sequence[str] = (), *, as_root: bool) -> list[str]:
    """The bubblewrap command line that runs the worker with ``workdir`` writable."""
    exe, prefix = _interpreter()
    argv = [
        "bwrap", "--ro-bind", "/", "/", "--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev",
        "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
        "--unshare-cgroup-try", "--die-with-parent", "--new-session",
    ]  # fmt: skip
    for path in [*_hidden_paths(), *extra_hidden]:
        if os.path.isdir(path):
            argv += ["--tmpfs", path]
        elif os.path.exists(path):
            argv += ["--ro-bind", "/dev/null", path]
    python = exe
    if exe.startswith(prefix + os.sep):
        # Re-bound where the unprivileged sandbox uid can reach it even when the
        # real prefix sits under a private home (e.g. /root/.pyenv).
        python = SANDBOX_PYTHON + exe[len(prefix) :]
        argv += ["--ro-bind", prefix, SANDBOX_PYTHON]
        for path in _hidden_paths():
            if path.startswith(prefix + os.sep):
                argv += ["--tmpfs", SANDBOX_PYTHON + path[len(prefix) :]]
    argv += ["--bind", workdir, workdir, "--chdir", workdir]
    if as_root:
        argv += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    return [*argv, python, "-I", "-S", "-B", "-c", _worker_source()]


@functools.cache
def _worker_source() -> str:
    return Path(worker.__file__).read_text(encoding="utf-8")


@functools.cache
def _probe() -> tuple[str, str | None]:
    """("bwrap", None) when bubblewrap works here, else ("fallback", why)."""
    if sys.platform != "linux":
        return "fallback", f"bubblewrap is Linux-only (platform {sys.platform!r})"
    if shutil.which("bwrap") is None:
        return "fallback", "bubblewrap not found (install the 'bubblewrap' package)"
    with tempfile.TemporaryDirectory(prefix="specdecode-probe-") as tmp:
        argv = bwrap_argv(tmp, as_root=os.geteuid() == 0)
        argv[-1] = "pass"
        try:
            proc = subprocess.run(
                argv, capture_output=True, timeout=10, stdin=subprocess.DEVNULL, env=_env(tmp)
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


def sandbox_warning() -> str | None:
    """One line to print once per run when the sandbox is the weaker fallback, else None."""
    mode, why = _probe()
    if mode == "bwrap":
        return None
    return (
        f"coding sandbox is weaker: {why}; answers run under rlimits, a process group and a"
        " timeout only, without network or filesystem isolation"
    )


def _resolve_mode(mode: str) -> str:
    if mode == "auto":
        return sandbox_mode()
    if mode not in ("bwrap", "fallback"):
        raise ValueError(f"sandbox mode must be 'auto', 'bwrap' or 'fallback', got {mode!r}")
    return mode


class Sandbox:
    """A running worker holding one candidate; a context manager, ``close()`` is idempotent."""

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
    ) -> None:
        self.limits = limits or Limits()
        self.mode = _resolve_mode(mode)
        self.deadline = deadline if deadline is not None else time.monotonic() + self.limits.timeout
        self.workdir = tempfile.mkdtemp(prefix="specdecode-answer-")
        self.uid: int | None = None
        self._inbuf = bytearray()
        self._outbuf = bytearray()
        self._next_id = 0
        self._answered = 0
        self._closed = False
        self.exit_detail = ""
        root = os.geteuid() == 0
        if root:
            self.uid = _UID_BASE + ((os.getpid() & 0xFFFFF) << 4 | next(_uid_counter) & 0xF)
            os.chown(self.workdir, self.uid, self.uid)
        # Search permission for "other": bwrap (root without capabilities) must chdir into it.
        os.chmod(self.workdir, 0o711 if root else 0o700)
        if self.mode == "bwrap":
            argv = bwrap_argv(self.workdir, hide, as_root=root)
        else:
            argv = [_interpreter()[0], "-I", "-S", "-B", "-c", _worker_source()]
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                cwd=self.workdir,
                env=_env(self.workdir),
                start_new_session=True,
                close_fds=True,
            )
        except BaseException:
            self._stderr.close()
            shutil.rmtree(self.workdir, ignore_errors=True)
            raise
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self._wfd, self._rfd = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        os.set_blocking(self._wfd, False)
        os.set_blocking(self._rfd, False)
        setup = {
            "uid": self.uid,
            "gid": self.uid,
            "limits": self.limits.rlimits(),
            "preimport": PREIMPORT if self.mode == "fallback" and root else [],
            "preamble": preamble,
            "code": code,
            "entry": entry_point,
        }
        self._send(setup)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ready(self) -> str | None:
        """Wait for the candidate to load: None when ready, else the load error."""
        reply = self._recv()
        if reply.get("ok") is True:
            return None
        error = reply.get("error")
        if reply.get("ok") is False and isinstance(error, str):
            return " ".join(error.split())[:300]
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
        return False, " ".join(exc_text.split())[:300]

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
        remaining = self.deadline - time.monotonic()
        if wait and remaining <= 0:
            raise SandboxTimeout("deadline passed")
        for fd, _event in poller.poll(max(0.0, remaining) * 1000 if wait else 0):
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

    def _exit_text(self) -> str:
        try:
            code = self.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return "the sandbox closed its pipe"
        if code in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
            raise SandboxTimeout("CPU-time limit exceeded")
        self._stderr.seek(0)
        tail = self._stderr.read(4096).decode(errors="replace").strip().splitlines()
        detail = f" ({tail[-1][:200]})" if tail else ""
        return f"the sandbox process exited with status {code}{detail}"

    def close(self) -> None:
        """Kill the worker and everything it started; remove the temp dir."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.kill()
        self.proc.wait()
        if self.uid is not None:
            # bwrap's pid namespace dies with it, but asynchronously; the fallback
            # needs this to reach processes that left the process group.
            kill_uid(self.uid)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._stderr.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


def _live_uids() -> Iterator[tuple[int, int]]:
    """(pid, real uid) of every live process; zombies are dead and only wait to be reaped."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields: dict[str, str] = {}
        try:
            with open(f"/proc/{entry}/status", encoding="ascii", errors="replace") as fh:
                for line in fh:
                    key, _, value = line.partition(":")
                    fields[key] = value.strip()
        except OSError:
            continue
        if fields.get("State", "Z")[:1] in ("Z", "X") or "Uid" not in fields:
            continue
        yield int(entry), int(fields["Uid"].split()[0])


def processes_of(uid: int) -> list[int]:
    """Live pids whose real uid is ``uid`` (Linux /proc)."""
    return [pid for pid, owner in _live_uids() if owner == uid]


def sandbox_processes() -> list[int]:
    """Live pids under any uid this module hands to sandboxes (for tests and cleanup checks)."""
    return [pid for pid, uid in _live_uids() if _UID_BASE <= uid < _UID_BASE + (1 << 24)]


def kill_uid(uid: int, *, grace: float = 5.0) -> None:
    """SIGKILL every process of ``uid`` until none is left (forks may race the first rounds).

    A killed process can take a while to leave the process table on a loaded
    machine, so this keeps going for up to ``grace`` seconds, not a fixed count.
    """
    if not os.path.isdir("/proc"):
        return
    deadline = time.monotonic() + grace
    quiet = 0
    # A fork in flight is not in /proc yet: only several empty scans in a row count.
    while quiet < 3 and time.monotonic() < deadline:
        pids = processes_of(uid)
        quiet = 0 if pids else quiet + 1
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)


__all__ = [
    "Limits",
    "Sandbox",
    "SandboxError",
    "SandboxTimeout",
    "sandbox_mode",
    "sandbox_warning",
]
