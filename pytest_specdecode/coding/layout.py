"""The sandbox's filesystem, built from an allowlist: what the worker may see.

bubblewrap starts from an empty root (a tmpfs). Into it go, read-only and at
their real paths:

- the interpreter's executable and its standard library (``sys.path`` of
  ``python -I -S``: the stdlib and ``lib-dynload``),
- the directories of the shared libraries that interpreter maps once it has
  imported every extension module of ``lib-dynload`` (found by running it
  once, see :func:`discover`), the directory of its ELF program interpreter
  (``/lib64/ld-linux-x86-64.so.2``), ``/etc/ld.so.cache``, and the top-level
  symlinks of ``/`` (``/lib -> usr/lib``) so library paths resolve,

then every ``site-packages``/``dist-packages`` directory (and any path asked
to be hidden) that falls inside those is covered by an empty tmpfs. Nothing
else exists: no home, no project or other checkouts, no ``.git``, no conftest,
no ``/run`` or ``/tmp`` of the host (so no host Unix sockets). The answer gets
a fresh size-limited tmpfs at ``/tmp`` (its working directory) and at
``/dev/shm``, plus ``--proc /proc --dev /dev``. The layout is the same whether
pytest runs as root or not; only how the sandbox drops privileges differs
(see :func:`bwrap_argv`).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from pytest_specdecode.errors import SpecDecodeError

# Run by the interpreter itself: import every extension module it ships, then
# report where its stdlib is and which files it has mapped.
_PROBE = r"""
import json, os, sys, sysconfig, warnings
warnings.simplefilter("ignore")
dynload = [p for p in sys.path if os.path.basename(p) == "lib-dynload"]
for folder in dynload:
    for name in sorted(os.listdir(folder)):
        if name.endswith(".so"):
            try:
                __import__(name.split(".")[0])
            except BaseException:
                pass
maps = set()
with open("/proc/self/maps") as fh:
    for line in fh:
        fields = line.split(None, 5)
        if len(fields) == 6 and fields[5].startswith("/"):
            maps.add(fields[5].rstrip("\n"))
paths = sysconfig.get_paths()
print(json.dumps({"path": sys.path, "stdlib": [paths["stdlib"], paths["platstdlib"]],
                  "maps": sorted(maps)}))
"""

# Where an answer may write; each is a fresh tmpfs of the answer's disk limit.
WRITABLE = ("/tmp", "/dev/shm")
WORKDIR = "/tmp"


class LayoutError(SpecDecodeError):
    """The interpreter's files could not be found, so no sandbox can be built."""


@dataclass(frozen=True)
class Layout:
    """The host paths bound read-only into the sandbox, and those covered again."""

    executable: str
    binds: tuple[str, ...]
    hidden: tuple[str, ...]
    symlinks: tuple[tuple[str, str], ...]  # (target, link path) recreated in the sandbox

    def visible(self, path: str) -> bool:
        """Whether ``path`` (absolute, resolved) can be seen inside the sandbox."""
        if any(_within(path, h) for h in self.hidden):
            return False
        return path == self.executable or any(_within(path, b) for b in self.binds)


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def base_executable() -> str:
    """The real interpreter behind this one (a venv's python is a link to it)."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def program_interpreter(executable: str) -> str | None:
    """The ELF ``PT_INTERP`` of ``executable`` (the dynamic loader), or None."""
    try:
        with open(executable, "rb") as fh:
            head = fh.read(64)
            if head[:4] != b"\x7fELF" or head[4] not in (1, 2) or head[5] not in (1, 2):
                return None
            wide, order = head[4] == 2, "<" if head[5] == 1 else ">"
            if wide:
                phoff, phentsize, phnum = struct.unpack_from(order + "Q14xHH", head, 32)
            else:
                phoff, phentsize, phnum = struct.unpack_from(order + "I10xHH", head, 28)
            for index in range(min(phnum, 64)):
                fh.seek(phoff + index * phentsize)
                entry = fh.read(phentsize)
                if wide:
                    kind, _flags, offset, _v, _p, size = struct.unpack_from(order + "IIQQQQ", entry)
                else:
                    kind, offset, _v, _p, size = struct.unpack_from(order + "IIIII", entry)
                if kind == 3:  # PT_INTERP
                    fh.seek(offset)
                    return fh.read(min(size, 4096)).rstrip(b"\0").decode()
    except (OSError, struct.error, UnicodeDecodeError):
        return None
    return None


def _probe_interpreter(executable: str) -> dict[str, list[str]]:
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    try:
        proc = subprocess.run(
            [executable, "-I", "-S", "-B", "-c", _PROBE],
            capture_output=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd="/",
        )
        found = json.loads(proc.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        raise LayoutError(f"cannot list the files of {executable!r}: {exc}") from None
    if not isinstance(found, dict):
        raise LayoutError(f"cannot list the files of {executable!r}: {found!r}")
    return {k: [str(p) for p in found.get(k, [])] for k in ("path", "stdlib", "maps")}


def _top_level_symlinks() -> list[tuple[str, str]]:
    links = []
    for name in sorted(os.listdir("/")):
        path = "/" + name
        if os.path.islink(path) and name not in ("proc", "dev", "tmp"):
            links.append((os.readlink(path), path))
    return links


def _minimal(paths: set[str]) -> list[str]:
    """``paths`` without those inside another one, parents first."""
    out: list[str] = []
    for path in sorted(paths):
        if not any(_within(path, kept) for kept in out):
            out.append(path)
    return out


@functools.cache
def discover(executable: str | None = None) -> Layout:
    """The allowlist for ``executable`` (default: the base interpreter); cached."""
    exe = executable or base_executable()
    found = _probe_interpreter(exe)
    binds = {os.path.realpath(p) for p in [*found["path"], *found["stdlib"]] if os.path.isdir(p)}
    for mapped in found["maps"]:
        real = os.path.realpath(mapped)
        if real != exe and os.path.isfile(real):
            binds.add(os.path.dirname(real))
    interp = program_interpreter(exe)
    if interp is not None:
        binds.add(os.path.realpath(os.path.dirname(interp)))
    if os.path.isfile("/etc/ld.so.cache"):
        binds.add("/etc/ld.so.cache")
    binds -= {"/", os.path.dirname(exe)}
    bound = _minimal(binds)
    hidden = _hidden_inside(bound, found["stdlib"])
    return Layout(exe, tuple(bound), hidden, tuple(_top_level_symlinks()))


def _project_paths() -> list[str]:
    """This package and the checkout it lives in."""
    package = Path(__file__).resolve().parent.parent
    paths = [str(package)]
    root = package.parent
    if (root / "pyproject.toml").exists() or (root / ".git").exists():
        paths.append(str(root))
    return paths


def _hidden_inside(binds: list[str], stdlib: list[str]) -> tuple[str, ...]:
    """Package directories (and this project) that lie inside bound directories."""
    candidates = set(_project_paths())
    for folder in {*stdlib, *binds}:
        for name in ("site-packages", "dist-packages"):
            candidates.add(os.path.join(folder, name))
    hidden = {
        os.path.realpath(p)
        for p in candidates
        if os.path.exists(p) and any(_within(os.path.realpath(p), b) for b in binds)
    }
    return tuple(sorted(hidden - set(binds)))


@functools.cache
def supports(flag: str) -> bool:
    """Whether the installed bubblewrap knows ``flag`` (from ``bwrap --help``)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return False
    try:
        help_text = subprocess.run(
            [bwrap, "--help"], capture_output=True, timeout=10, stdin=subprocess.DEVNULL
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return flag.encode() in help_text


def _ancestors(path: str) -> list[str]:
    parts = Path(path).parts[1:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def bwrap_argv(
    layout: Layout,
    command: list[str],
    *,
    as_root: bool,
    disk_bytes: int,
    hide: tuple[str, ...] = (),
    as_pid_1: bool = False,
) -> list[str]:
    """The bubblewrap command line running ``command`` inside ``layout``.

    ``as_pid_1``: ``command`` is the pid namespace's init (the warm template),
    not a child of bwrap's reaper.

    Not root: ``--unshare-all`` (a user namespace maps the user to itself;
    nested user namespaces are refused where bwrap can). Root: every namespace
    but the user one, all capabilities dropped except CAP_SETUID/CAP_SETGID,
    which the worker uses to drop to a fresh unprivileged uid before any
    answer code runs (a user namespace would map only uid 0).
    """
    if as_root:
        argv = ["bwrap", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]
        argv.append("--unshare-cgroup-try")
    else:
        argv = ["bwrap", "--unshare-all"]
        if supports("--disable-userns"):
            argv += ["--unshare-user", "--disable-userns"]
    if as_pid_1:
        argv.append("--as-pid-1")
    argv += ["--die-with-parent", "--new-session", "--proc", "/proc", "--dev", "/dev"]
    for target, link in layout.symlinks:
        argv += ["--symlink", target, link]
    # --size needs bubblewrap 0.8; older ones make these tmpfs unbounded (but a
    # cgroup, where there is one, still counts their pages as the answer's memory).
    size = ["--size", str(disk_bytes)] if supports("--size") else []
    for path in WRITABLE:
        argv += [*size, "--perms", "1777", "--tmpfs", path]
    made: set[str] = {"/"}
    hidden = [*layout.hidden, *(h for h in hide if layout.visible(h))]
    for path in (*layout.binds, layout.executable):
        # Directories bwrap creates on its own are 0700: the dropped uid could not enter.
        for parent in _ancestors(path):
            if parent not in made and not layout.visible(parent):
                argv += ["--perms", "0755", "--dir", parent]
                made.add(parent)
        argv += ["--ro-bind", path, path]
    for path in hidden:
        argv += ["--tmpfs", path] if os.path.isdir(path) else ["--ro-bind", "/dev/null", path]
    # The root and /dev are tmpfs bwrap made: read-only once built, so only the
    # answer's own tmpfs (WRITABLE) take writes. Without a user namespace's
    # remapping (not root) the answer would own them: it could add a file on
    # sys.path (``/usr/lib/python311.zip``) for whatever runs there next.
    argv += ["--remount-ro", "/", "--remount-ro", "/dev", "--chdir", WORKDIR]
    if as_root:
        argv += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        if as_pid_1:  # the warm template kills the answers' processes (other uids)
            argv += ["--cap-add", "CAP_KILL"]
    return [*argv, *command]
