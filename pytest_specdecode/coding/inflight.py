"""The sandboxes judging an answer right now, so an interrupted run stops them at once.

Answers are judged on the checker's threads. When the run is interrupted
(Ctrl-C, or SIGTERM handled like it) the main thread stops waiting for
verdicts, but closing the checker waits for its threads: an answer in an
endless loop would hold the run, its server and its working directory until
its time limit. :func:`abort_all` ends the deadline of every open sandbox;
its thread's next wait (at most :data:`WAKE_SECONDS` away) ends the answer
as a timeout and cleans up as always: processes killed, directory removed.
"""

from __future__ import annotations

import threading
from typing import Protocol

# The longest a sandbox waits for its worker before it looks at its deadline again.
WAKE_SECONDS = 0.1


class Abortable(Protocol):
    def abort(self) -> None: ...


_LOCK = threading.Lock()
_OPEN: dict[int, Abortable] = {}


def opened(box: Abortable) -> None:
    with _LOCK:
        _OPEN[id(box)] = box


def closed(box: Abortable) -> None:
    with _LOCK:
        _OPEN.pop(id(box), None)


def abort_all() -> int:
    """Cut the deadline of every open sandbox; how many there were."""
    with _LOCK:
        boxes = list(_OPEN.values())
    for box in boxes:
        box.abort()
    return len(boxes)
