"""Files shared between workers and runs: written whole, read safely, waited for.

Every file the plugin leaves for another process (the lease state, the scheduler's
placement, the lossless baseline, the report, the resume copy, the server records)
goes through here, so one mechanism holds one promise each:

- :func:`write_bytes` / :func:`write_text` / :func:`write_json`: a reader sees the old
  file or the new one, never part of either. The content goes to a new temporary
  file beside the target (same file system), which then replaces it
  (``os.replace``). The file gets the usual permissions (0666 less the umask, as any
  file the user writes), not a temporary file's 0600.
- :func:`write_new`: the same, but only if no file has that name yet; of two writers
  choosing one name only one gets it (a hard link never replaces a file).
- :func:`load_bytes` / :func:`load_text` / :func:`load_json`: every file the plugin
  reads that a user, a repository or another program supplied (a saved run, a
  report, a baseline) is read here, within bounds: a regular file only (a FIFO is
  never waited on, a symlink to ``/dev/zero`` never read), at most ``limit`` bytes,
  JSON nested at most :data:`MAX_DEPTH` deep. Anything else is one
  :class:`FileRefused` line naming the file and what is wrong with it.
- :func:`read_text` / :func:`read_json`: the same reading, ``None`` for a file that
  is missing, refused or not JSON, so a caller decides what an absent value means.
- :func:`wait_until`: poll a condition until it holds, with a deadline and one clear
  :class:`WaitTimeout` when it passes.

It imports nothing of the plugin (layer 0): the service, the suites and the report
all use it.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pytest_specdecode.errors import SpecDecodeError

T = TypeVar("T")

PathLike = str | os.PathLike[str]


def _temporary(target: Path) -> Path:
    """A name beside ``target`` that no other writer (process or thread) picks."""
    return target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


def _beside(target: Path, data: bytes) -> Path:
    """``data`` in a new temporary file in ``target``'s directory (made if missing), for
    a rename or link onto ``target``; removed again if writing fails."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temporary(target)
    try:
        # "x": created here with the umask applied, never an existing file.
        with open(tmp, "xb") as handle:
            handle.write(data)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def write_bytes(path: PathLike, data: bytes) -> None:
    """Replace ``path`` with ``data`` at once: readers see the old file or the new one."""
    target = Path(path)
    tmp = _beside(target, data)
    try:
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text(path: PathLike, text: str) -> None:
    """:func:`write_bytes` of ``text`` in UTF-8."""
    write_bytes(path, text.encode("utf-8"))


def write_json(
    path: PathLike,
    data: object,
    *,
    indent: int | None = None,
    default: Callable[[Any], Any] | None = None,
) -> None:
    """:func:`write_text` of ``data`` as JSON (``indent``, ``default`` as for ``json.dumps``;
    a trailing newline when indented).

    The text is made before the file is touched: data that is not JSON raises
    ``TypeError`` and leaves the old file as it was."""
    text = json.dumps(data, indent=indent, default=default)
    write_text(path, text + "\n" if indent is not None else text)


def copy(source: PathLike, path: PathLike) -> None:
    """Replace ``path`` with a copy of ``source`` at once (``OSError`` if it cannot be read)."""
    target = Path(path)
    tmp = _beside(target, b"")
    try:
        shutil.copyfile(source, tmp)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_new(path: PathLike, data: bytes) -> bool:
    """Write ``data`` to ``path`` as :func:`write_bytes` does, but only if no file has
    that name yet (False then): the whole file appears at once, and of two writers
    choosing one name only one gets it."""
    target = Path(path)
    tmp = _beside(target, data)
    try:
        try:
            os.link(tmp, target)
        except FileExistsError:
            return False
        except OSError:  # no hard links here (some network file systems): exclusive create
            try:
                with open(target, "x", encoding="utf-8"):
                    pass
            except FileExistsError:
                return False
            os.replace(tmp, target)
        return True
    finally:
        tmp.unlink(missing_ok=True)


MAX_BYTES = 256 << 20
"""Bytes in one file the plugin reads (a report of thousands of configs is tens of MiB)."""

MAX_DEPTH = 64
"""How deep JSON read from a file may nest; the plugin's own files nest under ten deep."""


class FileRefused(SpecDecodeError, ValueError):
    """A file that cannot be used; ``str()`` is one line naming the file and why."""

    def __init__(self, path: PathLike, problem: str) -> None:
        super().__init__(f"{os.fspath(path)!r}: {problem}")
        self.path = os.fspath(path)
        self.problem = problem


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def load_bytes(path: PathLike, *, limit: int = MAX_BYTES) -> bytes:
    """The bytes of the regular file ``path``; :class:`FileRefused` for anything else.

    Opened without blocking (a FIFO with no writer would wait forever) and checked on
    the opened descriptor, so a symlink swapped in between cannot slip a device by;
    at most ``limit`` bytes are read (one more tells a longer file)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise FileRefused(path, f"cannot read: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise FileRefused(path, f"{_kind(mode)}, not a regular file; give a file")
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise FileRefused(path, f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if left <= 0:
        raise FileRefused(path, f"larger than {_size(limit)}, the most read from one file")
    return b"".join(chunks)


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and not n % (1 << 20) else f"{n:,} bytes"


def load_text(path: PathLike, *, limit: int = MAX_BYTES) -> str:
    """:func:`load_bytes` decoded as UTF-8; :class:`FileRefused` if it is not."""
    data = load_bytes(path, limit=limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileRefused(path, f"not UTF-8 text (byte {exc.start})") from None


def load_json(path: PathLike, *, limit: int = MAX_BYTES, depth: int = MAX_DEPTH) -> Any:
    """The JSON value in ``path`` (:func:`load_text`), nested at most ``depth`` deep;
    :class:`FileRefused` with the reason otherwise. Callers check the value's shape."""
    text = load_text(path, limit=limit)
    try:
        value = json.loads(text)
    except RecursionError:
        # The decoder recurses per level: a deep enough file would end the run.
        raise FileRefused(path, f"JSON nested deeper than {depth} levels") from None
    except ValueError as exc:
        raise FileRefused(path, f"not JSON: {exc}") from None
    if nesting(value, depth) > depth:
        raise FileRefused(path, f"JSON nested deeper than {depth} levels")
    return value


def nesting(value: Any, stop: int = MAX_DEPTH) -> int:
    """How deep ``value``'s lists and dicts nest (a scalar: 0), counted without
    recursion; counting ends once past ``stop`` (more than ``stop`` is all callers ask)."""
    if not isinstance(value, (dict, list)):
        return 0
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        deepest = max(deepest, level)
        if deepest > stop:
            break
        stack.extend((c, level + 1) for c in children if isinstance(c, (dict, list)))
    return deepest


def read_text(path: PathLike) -> str | None:
    """:func:`load_text` of ``path``; None when it is missing, refused or not UTF-8."""
    try:
        return load_text(path)
    except FileRefused:
        return None


def read_json(path: PathLike) -> Any:
    """:func:`load_json` of ``path``; None when it is missing, refused or not JSON.

    Callers check the value's shape: a file of another program may hold any JSON."""
    try:
        return load_json(path)
    except FileRefused:
        return None


class WaitTimeout(TimeoutError):
    """A condition did not hold before its deadline; ``str()`` says what and how long."""

    def __init__(self, what: str, timeout: float) -> None:
        super().__init__(f"{what}: not done within {timeout:g} s")
        self.what = what
        self.timeout = timeout


def wait_until(
    condition: Callable[[], T | None],
    *,
    timeout: float,
    what: str | Callable[[], str],
    poll: float = 0.1,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    timed: Callable[[], bool] | None = None,
) -> T:
    """Call ``condition`` until it returns something other than None or False; return that.

    Checks at once, then every ``poll`` seconds; once ``timeout`` seconds have
    passed (``clock``, monotonic) without it holding, raises :class:`WaitTimeout`
    naming ``what`` (a callable is asked then, for the state at the deadline).
    ``condition`` may raise to end the wait early. ``timed()`` False after a check
    means the wait is not on the clock just then (it makes progress of another
    kind): the deadline starts again from that moment.
    """
    started = clock()
    while True:
        result = condition()
        if result is not None and result is not False:
            return result
        now = clock()
        if timed is not None and not timed():
            started = now
            sleep(poll)
            continue
        if now - started >= timeout:
            raise WaitTimeout(what() if callable(what) else what, timeout)
        sleep(min(poll, started + timeout - now))
