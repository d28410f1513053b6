"""The readiness gate: poll a freshly (re)started server until it can serve,
provably runs the requested config *and* is the process just started, or
fail with one clear error.

Each poll is one :class:`~pytest_specdecode.service.probe.ServerProbe` look
(health, then ``/server_info`` checked against the config). Answers that no
wait changes fail at once (API key refused, not SGLang, a silent listener,
nothing listening when nothing is being started); a process that died fails
within ``failure_check_interval`` with its log tail.

A mismatch is final when the answering process is provably the new one
(local and systemd stop the old process before ``apply()`` returns). Where an
old process may still answer for a moment (script mode, which may restart in
the background), a mismatch is first treated as ``stale`` for up to
``stale_grace`` seconds, unless the server was seen down since ``apply()`` or
its fingerprint (``launch_command``, ``random_seed``) changed.

Once verified, the gate asks the controller who listens on the port (local:
the kernel's socket table): another process there fails the gate. The
result says how the restart was proven (listener pid, MainPID, seen down,
changed fingerprint), or ``proof`` None: "restart not proven".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import requests

from pytest_specdecode.service.base import ProcessIdentity, ServiceController, ServiceError
from pytest_specdecode.service.identity import Fingerprint
from pytest_specdecode.service.probe import (
    LOADING,
    STALE,
    UNRESPONSIVE,
    VERIFIED,
    WARMING_UP,
    Look,
    ProbeFailed,
    ServerProbe,
    Verify,
)

__all__ = [
    "LOADING",
    "STALE",
    "UNRESPONSIVE",
    "VERIFIED",
    "WARMING_UP",
    "PhaseEntry",
    "ReadyResult",
    "ServiceNotReady",
    "wait_until_ready",
]

ProgressCallback = Callable[[str, float, "str | None"], None]


class PhaseEntry(NamedTuple):
    """A phase the gate entered: its name, when (seconds since start), what was seen."""

    phase: str
    at: float
    detail: str


class ServiceNotReady(ServiceError):
    """The gate failed. First line: the summary; then the log tail, if any.

    ``reason`` is one of ``"timeout"``, ``"died"``, ``"mismatch"``, ``"auth"``,
    ``"not-sglang"``, ``"silent"``, ``"not-running"``, ``"foreign"``.
    """

    def __init__(
        self,
        summary: str,
        *,
        reason: str,
        url: str,
        label: str,
        phase: str | None,
        elapsed: float,
        log_tail: str = "",
        mismatches: Sequence[str] = (),
        phases: Sequence[PhaseEntry] = (),
        server_info: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(summary, reason=reason, phase=phase, log_tail=log_tail, config=label)
        self.url = url
        self.label = label
        self.elapsed = elapsed
        self.mismatches = list(mismatches)
        self.phases = list(phases)
        # A mismatch's answer: what the server runs instead, for a message naming it.
        self.server_info = server_info


@dataclass
class ReadyResult:
    """A server that passed the gate; ``proof`` says how it is known to be new."""

    url: str
    server_info: dict[str, Any]
    phases: list[PhaseEntry]
    elapsed: float
    unverified: list[str] = field(default_factory=list)
    identity: ProcessIdentity | None = None
    proof: str | None = None

    def describe_phases(self) -> str:
        """``loading (connection refused) 0.0s -> warming up (HTTP 503) 0.6s -> verified 1.3s``."""
        return " -> ".join(
            f"{p.phase} ({p.detail}) {p.at:.1f}s" if p.detail else f"{p.phase} {p.at:.1f}s"
            for p in self.phases
        )


def wait_until_ready(
    base_url: str,
    *,
    verify: Verify,
    label: str,
    timeout: float,
    controller: ServiceController | None = None,
    api_key: str | None = None,
    poll_interval: float = 0.25,
    request_timeout: float = 10.0,
    silent_timeout: float = 3.0,
    stale_grace: float = 15.0,
    failure_check_interval: float = 1.0,
    progress_interval: float = 1.0,
    log_tail_lines: int = 30,
    expect_running: bool = False,
    before: Fingerprint | None = None,
    down_before: bool = False,
    session: requests.Session | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    on_progress: ProgressCallback | None = None,
    redact: Callable[[str], str] | None = None,
) -> ReadyResult:
    """Block until the server at ``base_url`` serves and runs the config ``label`` names.

    ``verify(server_info)`` returns the mismatch lines (a list of strings, or
    an object with ``mismatches`` and ``unverified``); empty means the config
    matches. ``expect_running``: nothing is being started (external mode); a
    refused connection is waited out like any start-up (SGLang opens its port
    only once its model is loaded, so a server still starting refuses too), and a
    server that never answered by the deadline is ``not-running``. ``before`` is
    the server's fingerprint seen before ``apply()`` and ``down_before`` whether
    nothing answered then (both prove a restart in script mode). ``on_progress(phase, elapsed,
    last_log_line)`` is called on every phase change and every
    ``progress_interval`` seconds. Raises :class:`ServiceNotReady`.
    ``redact`` masks secrets (SGLang logs its ``api_key``) in the log lines the
    gate reads, before they go anywhere.
    """
    probe = ServerProbe(
        base_url,
        verify=verify,
        label=label,
        api_key=api_key,
        session=session,
        request_timeout=request_timeout,
        silent_timeout=silent_timeout,
    )
    try:
        gate = _Gate(
            probe=probe,
            timeout=timeout,
            controller=controller,
            poll_interval=poll_interval,
            stale_grace=stale_grace,
            failure_check_interval=failure_check_interval,
            progress_interval=progress_interval,
            log_tail_lines=log_tail_lines,
            expect_running=expect_running,
            before=before,
            down_before=down_before,
            clock=clock,
            sleep=sleep,
            on_progress=on_progress,
            redact=redact or (lambda text: text),
        )
        return gate.run()
    finally:
        probe.close()


@dataclass(kw_only=True)
class _Gate:
    probe: ServerProbe
    timeout: float
    controller: ServiceController | None
    poll_interval: float
    stale_grace: float
    failure_check_interval: float
    progress_interval: float
    log_tail_lines: int
    expect_running: bool
    before: Fingerprint | None
    down_before: bool
    clock: Callable[[], float]
    sleep: Callable[[float], None]
    on_progress: ProgressCallback | None
    redact: Callable[[str], str]

    def __post_init__(self) -> None:
        self.url = self.probe.url
        self.label = self.probe.label
        self.seen_down = "not answering before the restart" if self.down_before else ""
        self.start = self.clock()
        self.deadline = self.start + self.timeout
        self.phases: list[PhaseEntry] = []
        self.answered = False  # any HTTP answer (not a refused or silent connection)
        self.detail = ""
        self.last_progress = self.start

    # -- helpers ---------------------------------------------------------

    @property
    def phase(self) -> str | None:
        return self.phases[-1].phase if self.phases else None

    def elapsed(self) -> float:
        return self.clock() - self.start

    def _logs(self, tail: int) -> str:
        if self.controller is None:
            return ""
        try:
            return self.redact(self.controller.logs(tail))
        except ServiceError as exc:
            return self.redact(f"(cannot read the logs: {exc.summary})")

    def _enter(self, phase: str, detail: str) -> None:
        self.detail = detail
        if phase != self.phase:
            self.phases.append(PhaseEntry(phase, round(self.elapsed(), 3), detail))
            self._progress()

    def _progress(self) -> None:
        self.last_progress = self.clock()
        if self.on_progress is not None and self.phase is not None:
            last = self._logs(1).strip() or None
            self.on_progress(self.phase, self.elapsed(), last)

    def _fail(
        self,
        summary: str,
        *,
        reason: str,
        mismatches: Sequence[str] = (),
        server_info: Mapping[str, Any] | None = None,
    ) -> ServiceNotReady:
        return ServiceNotReady(
            summary,
            reason=reason,
            url=self.url,
            label=self.label,
            phase=self.phase,
            elapsed=self.elapsed(),
            log_tail=self._logs(self.log_tail_lines),
            mismatches=mismatches,
            phases=self.phases,
            server_info=server_info,
        )

    def _where_logs(self) -> str:
        loc = self.controller.log_location() if self.controller is not None else None
        return f"full log: {loc}" if loc else "see the server's log"

    # -- the state machine -----------------------------------------------

    def run(self) -> ReadyResult:
        next_failure_check = self.start
        first_stale: float | None = None
        while True:
            now = self.clock()
            if self.controller is not None and now >= next_failure_check:
                next_failure_check = now + self.failure_check_interval
                self._check_failure()
            try:
                look = self.probe.look(self.deadline - self.clock())
            except ProbeFailed as exc:
                raise self._fail(exc.summary, reason=exc.reason) from None
            if look.verified:
                assert look.info is not None
                return self._ready(look)
            if look.info is not None:  # healthy, but /server_info contradicts the config
                changed = self._changed(look.info)
                stale_possible = (
                    self.controller is not None
                    and self.controller.may_answer_stale
                    and not self.seen_down
                    and not changed
                )
                if first_stale is None:
                    first_stale = self.clock()
                if not stale_possible or self.clock() - first_stale >= self.stale_grace:
                    raise self._mismatch(look.mismatches, waited=stale_possible, info=look.info)
                self._enter(STALE, "old process still answering? " + look.mismatches[0])
            else:
                self._not_up(look)
            if self.clock() - self.last_progress >= self.progress_interval:
                self._progress()
            remaining = self.deadline - self.clock()
            if remaining <= 0:
                raise self._timed_out()
            self.sleep(min(self.poll_interval, remaining))

    def _not_up(self, look: Look) -> None:
        if look.phase != LOADING:
            self.answered = True
        if look.phase in (LOADING, WARMING_UP) and not self.seen_down:
            self.seen_down = f"seen down ({look.detail}) after the restart"
        self._enter(look.phase, look.detail)

    def _changed(self, info: dict[str, Any]) -> str | None:
        now = Fingerprint.of(info)
        if self.before is None or now is None:
            return None
        return now.changed(self.before)

    def _ready(self, look: Look) -> ReadyResult:
        assert look.info is not None
        self._check_failure()
        proofs: list[str] = []
        if self.controller is not None:
            check = self.controller.check_listener()
            if check.ok is False:
                raise self._fail(
                    f"server for config {self.label!r} at {self.url} answers, but not from the "
                    f"process just started: {check.detail}; stop that process or use another "
                    "port (--dflash-port)",
                    reason="foreign",
                )
            if check.ok:
                proofs.append(check.detail)
        identity = self.controller.identity() if self.controller is not None else None
        if identity is not None and identity.proof:
            proofs.append(identity.proof)
        if self.seen_down:
            proofs.append(self.seen_down)
        changed = self._changed(look.info)
        if changed:
            proofs.append(changed)
        self._enter(VERIFIED, look.detail)
        return ReadyResult(
            url=self.url,
            server_info=look.info,
            phases=list(self.phases),
            elapsed=self.elapsed(),
            unverified=look.unverified,
            identity=identity,
            proof="; ".join(proofs) or None,
        )

    def _check_failure(self) -> None:
        if self.controller is None:
            return
        failure = self.controller.failure()
        if failure:
            raise self._fail(
                f"server for config {self.label!r} at {self.url} stopped during startup after "
                f"{self.elapsed():.1f} s in phase {self.phase or 'starting'!r}: {failure}; "
                f"{self._where_logs()}",
                reason="died",
            )

    def _mismatch(
        self, mismatches: Sequence[str], *, waited: bool, info: Mapping[str, Any] | None
    ) -> ServiceNotReady:
        extra = (
            f" (still after {self.stale_grace:g} s, so not an old process shutting down)"
            if waited
            else ""
        )
        return self._fail(
            f"server at {self.url} does not run config {self.label!r}{extra}: "
            + "; ".join(mismatches)
            + " — it was launched with other values or overrode them; check the launch "
            "command, the dialect and the server log",
            reason="mismatch",
            mismatches=mismatches,
            server_info=info,
        )

    def _timed_out(self) -> ServiceNotReady:
        if self.expect_running and not self.answered:
            return self._fail(
                f"no server answered at {self.url} ({self.detail}) for config {self.label!r} "
                f"within the ready timeout of {self.timeout:g} s, and none is being started "
                "(--dflash-restart=never): start it (a server still loading its model gets "
                "the ready timeout, --dflash-ready-timeout), or let the plugin restart it "
                "(--dflash-restart=auto)",
                reason="not-running",
            )
        return self._fail(
            f"server for config {self.label!r} at {self.url} not ready after "
            f"{self.elapsed():.1f} s (ready timeout {self.timeout:g} s): last phase "
            f"{self.phase!r} ({self.detail}); if it is only slow raise --dflash-ready-timeout, "
            f"else {self._where_logs()}",
            reason="timeout",
        )
