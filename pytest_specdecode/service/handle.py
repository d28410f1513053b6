"""What tests get from ``dflash_service``: a server verified to run their config.

A :class:`ServiceHandle` carries the gate's facts (server info, phases, how
the restart was proven) and a watch on the process: :meth:`ServiceHandle.gone`
says, without a request to the server, whether the controller knows the
server exited since the gate, so the remaining tests of that config error at
once instead of asking a dead server.

:meth:`ServiceHandle.changed` says whether the server answering now is still
the one that passed the gate, from what it shows over HTTP
(:class:`~pytest_specdecode.service.identity.HttpIdentity`): the
``/server_info`` fields of the gate and the ``/metrics`` counters first read
when the config's first test starts, which only grow while one server runs.
It works in every mode, so an external server or a kept live server replaced
behind the plugin's back is noticed too; the runners ask it before they file
a test's figures.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from pytest_specdecode import statefiles
from pytest_specdecode.client import SGLangClient
from pytest_specdecode.config.spec import SpecConfig
from pytest_specdecode.service.base import ProcessIdentity, ServiceError
from pytest_specdecode.service.identity import HttpIdentity, IdentityUnreadable, read_http_identity
from pytest_specdecode.service.start_phases import StartPhases

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
IdentityReader = Callable[[], HttpIdentity]


def http_identity_reader(base_url: str, api_key: str | None) -> IdentityReader:
    """Reads the identity of the server at ``base_url``: one /server_info and one /metrics GET."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def read() -> HttpIdentity:
        with requests.Session() as session:
            session.max_redirects = 0
            return read_http_identity(session, base_url, headers)

    return read


def never_gone() -> ServerGone | None:
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
    # When this run's start of it began (seconds since the epoch; None: not started here),
    # so that starts on several hosts can be laid side by side.
    started_at: float | None = None
    unverified: list[str] = field(default_factory=list)
    restarted: bool = True
    proof: str | None = None
    simulated: bool = False
    log_dir: Path = Path()
    watch: Watch = never_gone
    # Where it runs, the failed starts before it came up, and why it moved hosts.
    host: str | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)
    moves: list[dict[str, str]] = field(default_factory=list)
    # The identity seen at the gate (fields) and at the first test (counters), and how
    # to read it again; None: not checked (no reader).
    read_identity: IdentityReader | None = None
    http_identity: HttpIdentity | None = None
    # What this start cost, phase by phase (None: nothing was started).
    start_phases: StartPhases | None = None
    _counters_seen: bool = field(default=False, init=False, repr=False)
    _changed: str | None = field(default=None, init=False, repr=False)

    def note_identity(self) -> None:
        """Take the counters to compare with, once (when the config's first test starts)."""
        if self.read_identity is None or self._counters_seen:
            return
        self._counters_seen = True
        try:
            now = self.read_identity()
        except IdentityUnreadable:
            return  # changed() says so, when figures are about to be filed
        gate = self.http_identity or HttpIdentity(now.fields, ())
        found = gate.changed(HttpIdentity(now.fields, ()))
        if found:
            self._changed = self._line(found)
        self.http_identity = HttpIdentity(gate.fields, now.counters)

    def known_change(self) -> str | None:
        """The change already seen (no request), or None."""
        return self._changed

    def changed(self) -> str | None:
        """The one line saying the server is not the one of the gate, or None.

        A change is final: every later test of the config gets the same line.
        """
        if self._changed is not None or self.read_identity is None:
            return self._changed
        self.note_identity()
        if self._changed is not None:
            return self._changed
        try:
            now = self.read_identity()
        except IdentityUnreadable as exc:
            if self.gone(settle=2.0) is not None:
                # The process the plugin watches answered, then exited: its figures are
                # its own, and the death is reported (the config's next tests error).
                return None
            return (
                f"cannot tell whether the server at {self.base_url} is still the one that "
                f"passed the gate ({exc}); its figures are not filed under "
                f"{self.config.label()}"
            )
        before = self.http_identity or now
        found = before.changed(now)
        if found:
            self._changed = self._line(found)
            return self._changed
        self.http_identity = now  # counters only grow: compare with the latest
        return None

    def _line(self, what: str) -> str:
        return (
            f"the server at {self.base_url} changed between the gate and this test: {what}; "
            f"its figures are not filed under {self.config.label()}"
        )

    def gone(self, *, settle: float = 0.0) -> ServerGone | None:
        """Why the server is known to be gone, or None (running, or unknowable).

        ``settle``: after a failed test, a server that no longer answers HTTP
        is given up to that long to be seen exiting (its process may still be
        on its way out); one that answers is not waited for.
        """
        found = self.watch()
        if found is not None or settle <= 0 or _answers_http(self.base_url):
            return found
        try:
            return statefiles.wait_until(
                self.watch, timeout=settle, what="the server's exit", poll=0.05
            )
        except statefiles.WaitTimeout:
            return None

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
            "started_at": None if self.started_at is None else round(self.started_at, 3),
            "ready_at": (
                None if self.started_at is None else round(self.started_at + self.ready_seconds, 3)
            ),
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
            "start_phases": self.start_phases.to_json() if self.start_phases else None,
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
        cost = f"; {self.start_phases.describe()}" if self.start_phases else ""
        return f"{label}: ready in {self.ready_seconds:.1f}s ({phases}){cost}{proven}{launched}"


# What the server answered in each phase of the gate, for the -v line.
_PHASE_NAMES = {"loading": "loading (refused)", "warming up": "warming up (503)"}
