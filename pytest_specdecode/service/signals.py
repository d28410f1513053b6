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
    """Installs the handler where SIGTERM still has its default action; restores it.

    It also notes every interrupt (SIGINT where Python's own handler has it, as that
    handler does: raising :class:`KeyboardInterrupt`), so :attr:`interrupted` says
    the run was interrupted even when a second Ctrl-C cut pytest's own bookkeeping
    of the first short (the exit status is then never 0).
    """

    def __init__(self) -> None:
        self._previous: Any = None
        self._previous_int: Any = None
        self._installed = False
        self._int_installed = False
        self.interrupted: str | None = None  # "SIGINT" / "SIGTERM" once one arrived

    def install(self) -> None:
        if self._installed or threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self._previous_int = signal.signal(signal.SIGINT, self._handle_int)
            self._int_installed = True
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return  # someone else (a CI runner, the user) handles it: leave theirs
        self._previous = signal.signal(signal.SIGTERM, self._handle)
        self._installed = True

    def restore(self) -> None:
        main = threading.current_thread() is threading.main_thread()
        if self._int_installed:
            self._int_installed = False
            if main and signal.getsignal(signal.SIGINT) == self._handle_int:
                signal.signal(signal.SIGINT, self._previous_int)
        if not self._installed:
            return
        self._installed = False
        if main:
            signal.signal(signal.SIGTERM, self._previous)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        self.interrupted = self.interrupted or "SIGTERM"
        raise KeyboardInterrupt("SIGTERM")

    def _handle_int(self, signum: int, frame: FrameType | None) -> None:
        self.interrupted = self.interrupted or "SIGINT"
        raise KeyboardInterrupt
