"""Judging answers in parallel: one thread per worker, each with a warm sandbox of its own.

The judging in the test process is mostly waiting on the sandbox (the answer
runs there); the threads overlap that waiting across the machine's cores. A
:class:`Checker` holds at most ``workers`` answers in flight; each takes a
warm sandbox from the pool for its answer and gives it back afterwards, so
there are as many warm sandboxes as answers checked at once (created when
first needed, not before). :func:`check_workers` is the default: the cores
this process may run on, shared among pytest-xdist workers.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from pytest_specdecode.coding.check import Verdict, check_reply
from pytest_specdecode.coding.problem import Problem


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def check_workers(requested: int | None = None, environ: dict[str, str] | None = None) -> int:
    """Answers to check at once: ``requested``, else all usable cores split among xdist workers."""
    if requested is not None:
        return max(1, requested)
    env = os.environ if environ is None else environ
    try:
        processes = max(1, int(env.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    except ValueError:
        processes = 1
    return max(1, usable_cores() // processes)


class Checker:
    """Judges replies on ``workers`` threads; a context manager, ``close()`` waits for them.

    ``submit`` returns a future of the :class:`Verdict` of ``judge``
    (:func:`check_reply`, which never raises: its keyword arguments pass
    through); whatever ``judge`` raises, ``result()`` raises in the caller.
    """

    def __init__(self, workers: int | None = None) -> None:
        self.workers = check_workers(workers)
        self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix="specdecode-check")

    def __enter__(self) -> Checker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def submit(
        self,
        problem: Problem,
        reply: str,
        *,
        judge: Callable[..., Verdict] = check_reply,
        **kwargs: Any,
    ) -> Future[Verdict]:
        return self._executor.submit(judge, problem, reply, **kwargs)

    def map(self, pairs: Iterable[tuple[Problem, str]], **kwargs: Any) -> Iterator[Verdict]:
        """The verdicts of ``(problem, reply)`` pairs, in their order."""
        futures = [self.submit(problem, reply, **kwargs) for problem, reply in pairs]
        return (future.result() for future in futures)

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
