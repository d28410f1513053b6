"""Live progress on the terminal, visible even while pytest captures output.

pytest captures file descriptors 1 and 2 while fixtures run, so a server that
takes minutes to load would otherwise look like a hung run. The plugin keeps
a duplicate of the real stderr, taken at configure time (before any capture
is active), and writes progress there: one rewritten line on a TTY, at most a
line every few seconds otherwise (CI logs stay short).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import IO


class Progress:
    """Writes ``label: phase, elapsed, last log line`` while long work runs."""

    def __init__(
        self,
        stream: IO[str] | None,
        *,
        isatty: bool,
        interval: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        width: int = 120,
        redact: Callable[[str], str] | None = None,
    ) -> None:
        self._stream = stream
        # Log lines shown here may carry an API key (SGLang logs its server_args).
        self._redact = redact or (lambda text: text)
        self._isatty = isatty
        self._interval = interval
        self._clock = clock
        self._width = width
        self._last_line = ""
        self._last_write = float("-inf")
        self._dirty = False
        self.context = ""  # where the whole sweep is, e.g. "3/6 configs, about 5m left"

    @classmethod
    def for_stderr(
        cls, enabled: bool = True, redact: Callable[[str], str] | None = None
    ) -> Progress:
        """Duplicate the real stderr now, so later capture cannot swallow it."""
        if not enabled:
            return cls(None, isatty=False)
        try:
            fd = os.dup(2)
        except OSError:
            return cls(None, isatty=False)
        stream = os.fdopen(fd, "w", buffering=1, encoding="utf-8", errors="replace")
        return cls(stream, isatty=stream.isatty(), redact=redact)

    def update(self, label: str, phase: str, elapsed: float, detail: str = "") -> None:
        """Report the current state; throttled, and only rewritten on change."""
        if self._stream is None:
            return
        where = f" {self.context}" if self.context else ""
        line = f"[dflash{where}] {label}: {phase}, {elapsed:.0f}s"
        if detail:
            line += f" | {detail.strip()}"
        # Masked before cutting, so a cut cannot leave half a key unrecognised.
        line = self._redact(line)[: self._width]
        now = self._clock()
        changed_phase = line.split(",")[0] != self._last_line.split(",")[0]
        if self._isatty:
            # Start below pytest's own progress line, then keep rewriting ours.
            self._stream.write(("\r\x1b[K" if self._dirty else "\n") + line)
            self._dirty = True
        elif changed_phase or now - self._last_write >= self._interval:
            self._stream.write(line + "\n")
        else:
            return
        self._stream.flush()
        self._last_line = line
        self._last_write = now

    def done(self, message: str = "") -> None:
        """End the live line (TTY: it stays, as the last state) and optionally add a message."""
        if self._stream is None:
            return
        if self._dirty:
            self._stream.write("\n")
            self._dirty = False
        if message:
            self._stream.write(self._redact(f"[dflash] {message}") + "\n")
        self._stream.flush()
        self._last_line = ""

    def close(self) -> None:
        """Close the duplicated descriptor; safe to call twice."""
        if self._stream is not None:
            self.done()
            self._stream.close()
            self._stream = None
