"""What tests get from ``dflash_service``: a server verified to run their config.

A :class:`ServiceHandle` carries the gate's facts (server info, phases, how
the restart was proven) and a watch on the process: :meth:`ServiceHandle.gone`
says, without a request to the server, whether the controller knows the
server exited since the gate, so the remaining tests of that config error at
once instead of asking a dead server.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from pytest_specdecode.client import SGLangClient
from pytest_specdecode.config.spec import SpecConfig
from pytest_specdecode.service.base import ProcessIdentity, ServiceError

NOT_PROVEN = "restart not proven"


def _answers_http(base_url: str) -> bool:
    """Whether the server answers an HTTP request at all (any status) within a second."""
    try:
        requests.get(base_url + "/model_info", timeout=1.0).close()
    except requests.RequestException:
        return False
    return True


class ServerGone(ServiceError):
    """The server of a config exited after it passed the gate (``reason`` ``"died"``)."""


Watch = Callable[[], "ServerGone | None"]


def _never_gone() -> ServerGone | None:
    return None


@dataclass
class ServiceHandle:
    """A server verified to run ``config``.

    ``restarted``: this run restarted it (False: a live server was verified
    as it was, or another xdist worker restarted it). ``proof``: how the
    answering process is known to be the new one; None after a restart means
    the restart is not proven (script mode: never seen down, same identity).
    """

    config: SpecConfig
    base_url: str
    server_info: dict[str, Any]
    client: SGLangClient
    identity: ProcessIdentity | None
    ready_seconds: float
    phases: list[tuple[str, float]] = field(default_factory=list)
    unverified: list[str] = field(default_factory=list)
    restarted: bool = True
    proof: str | None = None
    simulated: bool = False
    log_dir: Path = Path()
    watch: Watch = _never_gone
    # Where it runs, the failed starts before it came up, and why it moved hosts.
    host: str | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)
    moves: list[dict[str, str]] = field(default_factory=list)

    def gone(self, *, settle: float = 0.0) -> ServerGone | None:
        """Why the server is known to be gone, or None (running, or unknowable).

        ``settle``: after a failed test, a server that no longer answers HTTP
        is given up to that long to be seen exiting (its process may still be
        on its way out); one that answers is not waited for.
        """
        found = self.watch()
        if found is not None or settle <= 0 or _answers_http(self.base_url):
            return found
        deadline = time.monotonic() + settle
        while found is None and time.monotonic() < deadline:
            time.sleep(0.05)
            found = self.watch()
        return found

    def summary(self) -> dict[str, Any]:
        """JSON-able facts for the report."""
        info = self.server_info
        return {
            "base_url": self.base_url,
            "host": self.host,
            "start_attempts": self.attempts,
            "moves": self.moves,
            "restarted": self.restarted,
            "restart_proof": self.proof if self.restarted else None,
            "restart_proven": bool(self.proof) if self.restarted else None,
            "ready_seconds": round(self.ready_seconds, 3),
            "phases": [[name, round(at, 3)] for name, at in self.phases],
            "identity": self.identity.describe() if self.identity else None,
            "unverified": self.unverified,
            "simulated": self.simulated,
            "version": info.get("version"),
            "speculative_algorithm": info.get("speculative_algorithm"),
            "speculative_num_draft_tokens": info.get("speculative_num_draft_tokens"),
            "speculative_eagle_topk": info.get("speculative_eagle_topk"),
            "speculative_draft_window_size": info.get("speculative_draft_window_size"),
            "launch_command": self.identity.command if self.identity else None,
        }

    def ready_message(self) -> str:
        """The ``-v`` line: how long the gate took, through which phases, and the proof."""
        label = self.config.label()
        if not self.restarted:
            return f"{label}: live server already verified, no restart"
        phases = " -> ".join(_PHASE_NAMES.get(name, name) for name, _ in self.phases)
        proven = f"; {NOT_PROVEN}: never seen down, same identity" if not self.proof else ""
        command = self.identity.command if self.identity else None
        # The session masks secrets (an --api-key on this line) before showing it.
        launched = f"; launched: {command}" if command else ""
        return f"{label}: ready in {self.ready_seconds:.1f}s ({phases}){proven}{launched}"


# What the server answered in each phase of the gate, for the -v line.
_PHASE_NAMES = {"loading": "loading (refused)", "warming up": "warming up (503)"}
