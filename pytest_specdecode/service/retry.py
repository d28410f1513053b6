"""Start-up failures: which are worth another try, and which say the host cannot serve.

On a GPU host a start costs a model load of minutes, so only failures whose
cause is expected to go away are retried (``--dflash-start-retries``):

- the process was killed by a signal (the kernel's OOM killer, an operator);
- CUDA ran out of memory at start-up (the previous process's memory is freed
  a little after it exits);
- the port was still in use (the old server still shutting down);
- the host did not answer over SSH (refused, timed out, connection lost).

A failure that the same command would meet again is never retried: an
argument error (exit status 2, SGLang's parser), a ``ValueError`` from
SGLang's validation, a server that runs another config, a refused API key,
a timeout (it already waited the whole ready timeout). Anything not
recognised is not retried either: a wasted model load costs more than a
rerun by hand.

The transient causes are also what a host that cannot serve looks like: when
a config's start fails for one of them on every attempt (at least twice, or
once when the host does not answer over SSH at all), the host is taken to be
down (:func:`host_down`) and, in a multi-host run, the config moves on.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pytest_specdecode.errors import SpecDecodeError
from pytest_specdecode.service.base import ServiceError, SSHError

SIGNAL = "signal"
CUDA_OOM = "cuda-oom"
PORT_BUSY = "port-busy"
SSH_UNREACHABLE = "ssh-unreachable"
DETERMINISTIC = "deterministic"
UNKNOWN = "unknown"

T = TypeVar("T")

# SSHError reasons that mean the host did not answer (see service/ssh.py).
UNREACHABLE_REASONS = frozenset({"ssh-refused", "ssh-timeout", "ssh-lost", "stalled"})
# Gate reasons no retry can change.
FINAL_REASONS = frozenset(
    {"mismatch", "auth", "not-sglang", "foreign", "timeout", "not-running", "drafter"}
)

_EXIT_2 = re.compile(r"exited with status 2\b|exit status 2\b")
_VALUE_ERROR = re.compile(r"^\s*(?:\w+\.)*ValueError\b", re.MULTILINE)
_ARG_ERROR = re.compile(r": error: (unrecognized arguments|argument |ambiguous option)")
_OOM = re.compile(r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory", re.IGNORECASE)
_PORT = re.compile(r"address already in use|\[Errno 98\]", re.IGNORECASE)
_SIGNAL = re.compile(r"killed by signal (SIG\w+)|Result=signal")


@dataclass(frozen=True)
class Verdict:
    """What a start-up failure is: ``kind`` (one of the constants), and why, in words."""

    kind: str
    why: str

    @property
    def transient(self) -> bool:
        return self.kind in (SIGNAL, CUDA_OOM, PORT_BUSY, SSH_UNREACHABLE)


def classify(exc: BaseException) -> Verdict:
    """Sort a start-up failure (an error from ``apply()``, the gate or the drafter check)."""
    if isinstance(exc, SSHError):
        if exc.reason in UNREACHABLE_REASONS:
            return Verdict(SSH_UNREACHABLE, "the host did not answer over SSH")
        return Verdict(DETERMINISTIC, "SSH refused the login or the command")
    if not isinstance(exc, SpecDecodeError):
        return Verdict(UNKNOWN, type(exc).__name__)
    message = exc.message or str(exc)
    text = f"{message}\n{exc.log_tail}"
    if exc.reason in FINAL_REASONS:
        return Verdict(DETERMINISTIC, f"the gate said {exc.reason!r}")
    if _EXIT_2.search(message) or _ARG_ERROR.search(text):
        return Verdict(DETERMINISTIC, "an argument error (exit status 2)")
    if _VALUE_ERROR.search(exc.log_tail):
        return Verdict(DETERMINISTIC, "a ValueError from the server's validation")
    if _OOM.search(text):
        return Verdict(CUDA_OOM, "CUDA out of memory at start-up")
    if exc.reason == "port-busy" or _PORT.search(text):
        return Verdict(PORT_BUSY, "the port was still in use")
    found = _SIGNAL.search(message)
    if found:
        return Verdict(SIGNAL, f"killed by signal {found[1]}" if found[1] else "killed by a signal")
    return Verdict(UNKNOWN, "a failure not known to be transient")


def host_down(verdicts: list[Verdict]) -> bool:
    """Whether a config's failed attempts on one host say that host cannot serve: every
    attempt failed for a transient cause, at least twice, or the host did not answer SSH."""
    if not verdicts or not all(v.transient for v in verdicts):
        return False
    return len(verdicts) >= 2 or verdicts[-1].kind == SSH_UNREACHABLE


@dataclass
class Attempt:
    """One failed start of a config, for the report: where, which try, why, what followed."""

    host: str
    number: int
    kind: str
    why: str
    error: str
    retried_after: float | None  # the pause before the next try; None: not retried

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "attempt": self.number,
            "kind": self.kind,
            "why": self.why,
            "error": self.error,
            "retried_after_seconds": self.retried_after,
        }


class HostDown(ServiceError):
    """A config could not start on a host for reasons of the host, not of the config."""

    def __init__(self, message: str, *, host: str, config: str | None = None) -> None:
        super().__init__(message, reason="host-down", config=config)
        self.host = host


def with_retries(
    start: Callable[[], T],
    *,
    retries: int,
    pause: float,
    attempts: list[Attempt],
    where: str,
    label: str,
    may_move: bool,
    sleep: Callable[[float], None],
    on_retry: Callable[[int, Verdict, float], None] = lambda n, v, p: None,
) -> T:
    """``start()``, tried again after ``pause`` s while its failure is transient, at most
    ``retries`` more times. Each failed try is appended to ``attempts``. Raises
    :class:`HostDown` when the failures say the host cannot serve and ``may_move``
    (another host could take the config); else the last error, saying every try failed."""
    verdicts: list[Verdict] = []
    while True:
        try:
            return start()
        except SpecDecodeError as exc:
            verdict = classify(exc)
            verdicts.append(verdict)
            n = len(verdicts)
            again = verdict.transient and n <= retries
            attempts.append(
                Attempt(where, n, verdict.kind, verdict.why, exc.summary, pause if again else None)
            )
            if again:
                on_retry(n, verdict, pause)
                sleep(pause)
                continue
            if may_move and host_down(verdicts):
                raise HostDown(
                    f"host {where} cannot start config {label!r} ({verdict.why}, {n} "
                    f"attempt{'s' if n > 1 else ''}): {exc.summary}",
                    host=where,
                    config=label,
                ) from None
            if n == 1:
                raise
            raise ServiceError(
                f"{exc.message or exc.summary} (all {n} starts failed: "
                f"{', '.join(dict.fromkeys(v.why for v in verdicts))})",
                reason=exc.reason,
                phase=exc.phase,
                log_tail=exc.log_tail,
                config=label,
            ) from None
