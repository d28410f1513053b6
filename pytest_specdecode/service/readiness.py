"""The readiness gate: poll a freshly (re)started server until it can serve
*and* provably runs the requested config, or fail with one clear error.

Phases, from what ``GET /health_generate`` answers:

- connection refused (or reset)  -> ``loading``: weights still loading
- HTTP 503                       -> ``warming up``: listening, warmup not done
- request timed out              -> ``unresponsive``
- other 5xx                      -> ``unhealthy``
- HTTP 200                       -> ``verifying``: ``GET /server_info`` and
  compare it with the config; a match is ``verified`` (ready).

A mismatch is final when the controller proves the answering process is the
new one (local and systemd stop the old process before ``apply()`` returns).
Where an old process may still answer for a moment (script mode, which may
restart in the background), a mismatch is first treated as ``stale`` for up
to ``stale_grace`` seconds, unless the server was seen down (refused / 503)
since ``apply()``, which proves it restarted.

401/403 (API key) and 404 (not an SGLang server) fail at once. The
controller's ``failure()`` is checked every ``failure_check_interval`` so a
dead process fails the gate within seconds, with its log tail.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, runtime_checkable

import requests

from pytest_specdecode.service.base import ProcessIdentity, ServiceController, ServiceError

LOADING = "loading"
WARMING_UP = "warming up"
UNRESPONSIVE = "unresponsive"
UNHEALTHY = "unhealthy"
VERIFYING = "verifying"
STALE = "stale"
VERIFIED = "verified"

HEALTH_PATH = "/health_generate"
SERVER_INFO_PATHS = ("/server_info", "/get_server_info")


class PhaseEntry(NamedTuple):
    """A phase the gate entered: its name, when (seconds since start), what was seen."""

    phase: str
    at: float
    detail: str


@runtime_checkable
class VerificationLike(Protocol):
    """What a dialect's ``verify()`` returns: lines for mismatches and unverified values."""

    @property
    def mismatches(self) -> Sequence[str]: ...

    @property
    def unverified(self) -> Sequence[str]: ...


Verify = Callable[[Mapping[str, Any]], "Sequence[str] | VerificationLike"]
ProgressCallback = Callable[[str, float, "str | None"], None]


class ServiceNotReady(ServiceError):
    """The gate failed. First line: the summary; then the log tail, if any.

    ``reason`` is one of ``"timeout"``, ``"died"``, ``"mismatch"``,
    ``"auth"``, ``"not-sglang"``.
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
    ) -> None:
        super().__init__(summary, reason=reason, phase=phase, log_tail=log_tail, config=label)
        self.url = url
        self.label = label
        self.elapsed = elapsed
        self.mismatches = list(mismatches)
        self.phases = list(phases)


@dataclass
class ReadyResult:
    """A server that passed the gate."""

    url: str
    server_info: dict[str, Any]
    phases: list[PhaseEntry]
    elapsed: float
    unverified: list[str] = field(default_factory=list)
    identity: ProcessIdentity | None = None

    def describe_phases(self) -> str:
        """``loading (connection refused) 0.0s -> warming up (HTTP 503) 0.6s -> verified 1.3s``."""
        return " -> ".join(
            f"{p.phase} ({p.detail}) {p.at:.1f}s" if p.detail else f"{p.phase} {p.at:.1f}s"
            for p in self.phases
        )


class _Probe(NamedTuple):
    phase: str
    detail: str
    status: int | None


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
    stale_grace: float = 15.0,
    failure_check_interval: float = 1.0,
    progress_interval: float = 1.0,
    log_tail_lines: int = 30,
    session: requests.Session | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    on_progress: ProgressCallback | None = None,
    redact: Callable[[str], str] | None = None,
) -> ReadyResult:
    """Block until the server at ``base_url`` serves and runs the config ``label`` names.

    ``verify(server_info)`` returns the mismatch lines (a list of strings, or
    an object with ``mismatches`` and ``unverified``); empty means the config
    matches. ``on_progress(phase, elapsed, last_log_line)`` is called on
    every phase change and every ``progress_interval`` seconds. Raises
    :class:`ServiceNotReady`. ``redact`` masks secrets (SGLang logs its
    ``api_key``) in the log lines the gate reads, before they go anywhere.
    """
    own_session = session is None
    http = requests.Session() if session is None else session
    try:
        gate = _Gate(
            base_url.rstrip("/"),
            verify=verify,
            label=label,
            timeout=timeout,
            controller=controller,
            headers={"Authorization": f"Bearer {api_key}"} if api_key else {},
            api_key_sent=bool(api_key),
            poll_interval=poll_interval,
            request_timeout=request_timeout,
            stale_grace=stale_grace,
            failure_check_interval=failure_check_interval,
            progress_interval=progress_interval,
            log_tail_lines=log_tail_lines,
            session=http,
            clock=clock,
            sleep=sleep,
            on_progress=on_progress,
            redact=redact,
        )
        return gate.run()
    finally:
        if own_session:
            http.close()


class _Gate:
    def __init__(
        self,
        url: str,
        *,
        verify: Verify,
        label: str,
        timeout: float,
        controller: ServiceController | None,
        headers: dict[str, str],
        api_key_sent: bool,
        poll_interval: float,
        request_timeout: float,
        stale_grace: float,
        failure_check_interval: float,
        progress_interval: float,
        log_tail_lines: int,
        session: requests.Session,
        clock: Callable[[], float],
        sleep: Callable[[float], None],
        on_progress: ProgressCallback | None,
        redact: Callable[[str], str] | None = None,
    ) -> None:
        self.url = url
        self.redact = redact or (lambda text: text)
        self.verify = verify
        self.label = label
        self.timeout = timeout
        self.controller = controller
        self.headers = headers
        self.api_key_sent = api_key_sent
        self.poll_interval = poll_interval
        self.request_timeout = request_timeout
        self.stale_grace = stale_grace
        self.failure_check_interval = failure_check_interval
        self.progress_interval = progress_interval
        self.log_tail_lines = log_tail_lines
        self.session = session
        self.clock = clock
        self.sleep = sleep
        self.on_progress = on_progress
        self.start = clock()
        self.deadline = self.start + timeout
        self.phases: list[PhaseEntry] = []
        self.detail = ""
        self.info_path: str | None = None
        self.last_progress = self.start

    # -- helpers ---------------------------------------------------------

    @property
    def phase(self) -> str | None:
        return self.phases[-1].phase if self.phases else None

    def elapsed(self) -> float:
        return self.clock() - self.start

    def _remaining(self) -> float:
        return self.deadline - self.clock()

    def _req_timeout(self) -> float:
        return max(0.05, min(self.request_timeout, self._remaining()))

    def _logs(self, tail: int) -> str:
        if self.controller is None:
            return ""
        try:
            return self.redact(self.controller.logs(tail))
        except ServiceError as exc:
            return self.redact(f"(cannot read the logs: {exc})")

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
        self, summary: str, *, reason: str, mismatches: Sequence[str] = ()
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
        )

    def _where_logs(self) -> str:
        loc = self.controller.log_location() if self.controller is not None else None
        return f"full log: {loc}" if loc else "see the server's log"

    # -- the state machine -----------------------------------------------

    def run(self) -> ReadyResult:
        self.last_progress = self.start
        next_failure_check = self.start
        first_stale: float | None = None
        seen_down = False
        while True:
            now = self.clock()
            if self.controller is not None and now >= next_failure_check:
                next_failure_check = now + self.failure_check_interval
                self._check_failure()
            probe = self._probe_health()
            if probe.status == 200:
                checked = self._check_config()
                if checked is not None:
                    info, mismatches, unverified = checked
                    if not mismatches:
                        self._check_failure()
                        self._enter(VERIFIED, "/server_info matches")
                        return ReadyResult(
                            url=self.url,
                            server_info=info,
                            phases=list(self.phases),
                            elapsed=self.elapsed(),
                            unverified=unverified,
                            identity=self.controller.identity() if self.controller else None,
                        )
                    stale_possible = (
                        self.controller is not None
                        and self.controller.may_answer_stale
                        and not seen_down
                    )
                    if first_stale is None:
                        first_stale = self.clock()
                    if not stale_possible or self.clock() - first_stale >= self.stale_grace:
                        raise self._mismatch(mismatches, waited=stale_possible)
                    self._enter(STALE, "old process still answering? " + mismatches[0])
            else:
                if probe.phase in (LOADING, WARMING_UP):
                    seen_down = True
                self._enter(probe.phase, probe.detail)
            if self.clock() - self.last_progress >= self.progress_interval:
                self._progress()
            remaining = self._remaining()
            if remaining <= 0:
                raise self._timed_out()
            self.sleep(min(self.poll_interval, remaining))

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

    def _probe_health(self) -> _Probe:
        try:
            resp = self.session.get(
                self.url + HEALTH_PATH, timeout=self._req_timeout(), headers=self.headers
            )
        except requests.exceptions.ConnectTimeout:
            return _Probe(LOADING, "connect timed out", None)
        except requests.exceptions.Timeout:
            return _Probe(UNRESPONSIVE, f"no answer within {self._req_timeout():.1f} s", None)
        except requests.exceptions.ConnectionError as exc:
            return _Probe(LOADING, _connection_detail(exc), None)
        status = int(resp.status_code)
        resp.close()
        if status == 200:
            return _Probe(VERIFYING, "HTTP 200", 200)
        if status == 503:
            return _Probe(WARMING_UP, "HTTP 503", 503)
        if status in (401, 403):
            what = "refused the API key it was given" if self.api_key_sent else "needs an API key"
            raise self._fail(
                f"server at {self.url} {what} (HTTP {status} on {HEALTH_PATH}) for config "
                f"{self.label!r}: give the server's --api-key to the plugin "
                "(--dflash-api-key or DFLASH_API_KEY)",
                reason="auth",
            )
        if status == 404:
            raise self._fail(
                f"server at {self.url} answered HTTP 404 on {HEALTH_PATH} for config "
                f"{self.label!r}: it is not an SGLang server; check the host and port",
                reason="not-sglang",
            )
        return _Probe(UNHEALTHY, f"HTTP {status}", status)

    def _check_config(self) -> tuple[dict[str, Any], list[str], list[str]] | None:
        info = self._server_info()
        if info is None:
            return None
        result = self.verify(info)
        if isinstance(result, VerificationLike):
            return info, list(result.mismatches), list(result.unverified)
        return info, list(result), []

    def _server_info(self) -> dict[str, Any] | None:
        paths = (self.info_path,) if self.info_path else SERVER_INFO_PATHS
        for path in paths:
            assert path is not None
            try:
                resp = self.session.get(
                    self.url + path, timeout=self._req_timeout(), headers=self.headers
                )
            except requests.exceptions.RequestException as exc:
                self._enter(VERIFYING, f"GET {path} failed: {type(exc).__name__}")
                return None
            try:
                if resp.status_code == 404 and path != SERVER_INFO_PATHS[-1]:
                    continue
                if resp.status_code != 200:
                    self._enter(VERIFYING, f"GET {path}: HTTP {resp.status_code}")
                    return None
                try:
                    data = resp.json()
                except ValueError:
                    self._enter(VERIFYING, f"GET {path}: not JSON")
                    return None
            finally:
                resp.close()
            if not isinstance(data, dict):
                self._enter(VERIFYING, f"GET {path}: not a JSON object")
                return None
            self.info_path = path
            return data
        return None

    def _mismatch(self, mismatches: Sequence[str], *, waited: bool) -> ServiceNotReady:
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
        )

    def _timed_out(self) -> ServiceNotReady:
        return self._fail(
            f"server for config {self.label!r} at {self.url} not ready after "
            f"{self.elapsed():.1f} s (ready timeout {self.timeout:g} s): last phase "
            f"{self.phase!r} ({self.detail}); if it is only slow raise --dflash-ready-timeout, "
            f"else {self._where_logs()}",
            reason="timeout",
        )


def _connection_detail(exc: BaseException) -> str:
    seen: set[int] = set()
    stack: list[BaseException | None] = [exc]
    text = str(exc)
    while stack:
        cur = stack.pop()
        if cur is None or id(cur) in seen:
            continue
        seen.add(id(cur))
        if isinstance(cur, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cur, ConnectionResetError):
            return "connection reset"
        stack.extend(
            [cur.__cause__, cur.__context__, *[a for a in cur.args if isinstance(a, BaseException)]]
        )
        reason = getattr(cur, "reason", None)
        if isinstance(reason, BaseException):
            stack.append(reason)
    if "refused" in text.lower():
        return "connection refused"
    return "cannot connect"
