"""SIGTERM handled like Ctrl-C, so a cancelled CI job stops the server it started.

CI systems cancel a job with SIGTERM, as does ``timeout(1)``. Python's default
action for it ends the process on the spot: no ``finally``, no session
finish, and a local server (in its own session, so the signal never reaches
it) is left running with PPID 1. Raising :class:`KeyboardInterrupt` instead
takes pytest's interrupt path: the session finishes, the services are shut
down, the report keeps what was measured. A second SIGTERM during that
cleanup is ignored so it cannot cut the cleanup short (SIGKILL still ends
the process).
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any


class TermAsInterrupt:
    """Installs the handler where SIGTERM still has its default action; restores it."""

    def __init__(self) -> None:
        self._previous: Any = None
        self._installed = False

    def install(self) -> None:
        if self._installed or threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return  # someone else (a CI runner, the user) handles it: leave theirs
        self._previous = signal.signal(signal.SIGTERM, self._handle)
        self._installed = True

    def restore(self) -> None:
        if not self._installed:
            return
        self._installed = False
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._previous)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt("SIGTERM")
