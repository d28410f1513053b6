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
- :func:`read_text` / :func:`read_json`: ``None`` for a file that is missing,
  unreadable or not JSON, so a caller decides what an absent value means.
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
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

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


def json_text(
    data: object, *, indent: int | None = None, default: Callable[[Any], Any] | None = None
) -> str:
    """``data`` as the JSON text the writers here store (a trailing newline when indented)."""
    text = json.dumps(data, indent=indent, default=default)
    return text + "\n" if indent is not None else text


def write_json(
    path: PathLike,
    data: object,
    *,
    indent: int | None = None,
    default: Callable[[Any], Any] | None = None,
) -> None:
    """:func:`write_text` of ``data`` as JSON (``indent``, ``default`` as for ``json.dumps``).

    The text is made before the file is touched: data that is not JSON raises
    ``TypeError`` and leaves the old file as it was."""
    write_text(path, json_text(data, indent=indent, default=default))


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


def read_text(path: PathLike) -> str | None:
    """The text of ``path``; None when it is missing, unreadable or not UTF-8."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, ValueError):
        return None


def read_json(path: PathLike) -> Any:
    """The JSON value in ``path``; None when it is missing, unreadable or not JSON.

    Callers check the value's shape: a file of another program may hold any JSON."""
    text = read_text(path)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
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
