"""How a sandbox process is started: its limits, environment and command line.

Shared by the fresh sandbox (:mod:`.sandbox`, one bubblewrap and interpreter
per answer) and the warm one (:mod:`.warm`, one per worker, forking a process
per answer); both run the stdlib-only :mod:`.worker` source inside.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_specdecode.coding import layout as fs
from pytest_specdecode.coding import template, worker
from pytest_specdecode.errors import SpecDecodeError

# Stdlib modules imported before the uid drop in fallback mode, where the
# interpreter may live somewhere the sandbox uid cannot read (e.g. /root/.pyenv),
# and by the warm template, so answers importing them pay nothing.
PREIMPORT = [
    "math", "cmath", "typing", "collections", "collections.abc", "itertools", "functools", "re",
    "string", "heapq", "bisect", "hashlib", "random", "statistics", "fractions", "decimal",
    "operator", "copy", "datetime", "dataclasses", "enum", "array", "numbers", "unicodedata",
    "textwrap",
]  # fmt: skip


@dataclass(frozen=True)
class Limits:
    """Resource limits for one answer; ``timeout`` is wall-clock for the whole check.

    ``memory_mb`` and ``nproc`` hold for each process (rlimits) and, where a
    cgroup can be had, for the whole answer together; ``disk_mb`` is the size
    of each of the answer's tmpfs (``/tmp``, ``/dev/shm``) under bwrap;
    ``file_size_mb`` caps any one file it writes.
    """

    timeout: float = 10.0
    memory_mb: int = 1024
    file_size_mb: int = 16
    disk_mb: int = 64
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
            # No POSIX message queues: nothing could list or remove one it left behind.
            "msgqueue": 0,
        }


class SandboxError(SpecDecodeError):
    """The worker broke the protocol, died, or could not start."""


class SandboxTimeout(SandboxError):
    """The deadline passed while waiting for the worker."""


def sandbox_env(home: str) -> dict[str, str]:
    """The whole environment of a sandbox: no API keys, SSH agent, PYTHONPATH or proxies."""
    return {"PATH": "/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8"}


@functools.cache
def _source(module_file: str) -> str:
    return Path(module_file).read_text(encoding="utf-8")


def worker_command(executable: str) -> list[str]:
    """One fresh worker: the interpreter running :mod:`.worker` (isolated, no site)."""
    return [executable, "-I", "-S", "-B", "-c", _source(worker.__file__)]


# The two stdlib-only sources in one namespace, then the template's loop.
_WARM_BOOT = (
    "import sys\n"
    "ns = {'__name__': 'specdecode_worker'}\n"
    "exec(compile(sys.argv[1], '<worker>', 'exec'), ns)\n"
    "exec(compile(sys.argv[2], '<template>', 'exec'), ns)\n"
    "ns['template'](ns['main'])\n"
)


def template_command(executable: str) -> list[str]:
    """The warm sandbox's pid 1: :mod:`.template` forking :mod:`.worker` processes."""
    sources = [_source(worker.__file__), _source(template.__file__)]
    return [executable, "-I", "-S", "-B", "-c", _WARM_BOOT, *sources]


def bwrap_argv(
    limits: Limits,
    extra_hidden: Sequence[str] = (),
    *,
    as_root: bool,
    warm: bool = False,
) -> list[str]:
    """The bubblewrap command line that runs a worker (or, ``warm``, the template)."""
    found = fs.discover()
    hide = tuple(os.path.realpath(p) for p in extra_hidden)
    command = template_command if warm else worker_command
    return fs.bwrap_argv(
        found,
        command(found.executable),
        as_root=as_root,
        disk_bytes=limits.disk_mb << 20,
        hide=hide,
        as_pid_1=warm,
    )


def visible_hidden(extra_hidden: Sequence[str]) -> tuple[str, ...]:
    """The paths of ``extra_hidden`` that the sandbox would show (the rest need no cover)."""
    found = fs.discover()
    real = (os.path.realpath(p) for p in extra_hidden)
    return tuple(sorted({p for p in real if found.visible(p)}))
