"""Ending what an answer left behind: its processes (by uid) and its files (any depth).

Used by :mod:`pytest_specdecode.coding.sandbox` when it closes a sandbox, and
by tests that check nothing survived.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator

from pytest_specdecode.coding.template import clear_tree

# Fresh uids handed to sandboxes when the test process is root.
UID_BASE = 0x5F000000


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


def remove_tree(path: str) -> None:
    """Remove the directory ``path`` and everything in it, however deep.

    No recursion (``shutil.rmtree`` raised RecursionError on a 5000-deep tree
    an answer built) and no long paths: the template's stdlib-only
    :func:`~pytest_specdecode.coding.template.clear_tree` works relative to one
    open directory at a time. Only for trees nothing writes to any more.
    Raises OSError when something cannot be removed.
    """
    if not os.path.lexists(path):
        return
    clear_tree(path)
    os.rmdir(path)
