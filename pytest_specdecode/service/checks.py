"""Looking at one server and proving what it runs: the pieces the manager uses.

:class:`ServerChecks` is bound to one endpoint (the manager builds a new one
when a config moves to another host). It holds the one probe of a live
server (:meth:`~ServerChecks.look`, for auto mode and joining workers), the
readiness gate after a start (:meth:`~ServerChecks.gate`), external mode
(:meth:`~ServerChecks.external`: verify, never restart), the check of a
server another worker brought up (:meth:`~ServerChecks.join`), and the
handles and watches tests get.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import requests

from pytest_specdecode.client import SGLangClient
from pytest_specdecode.client.limits import Limits
from pytest_specdecode.config import dialects
from pytest_specdecode.config.settings import Settings
from pytest_specdecode.config.spec import SpecConfig
from pytest_specdecode.errors import SpecDecodeError
from pytest_specdecode.output import redact
from pytest_specdecode.output.progress import Progress
from pytest_specdecode.service.base import ServiceController, ServiceError
from pytest_specdecode.service.handle import (
    ServerGone,
    ServiceHandle,
    Watch,
    http_identity_reader,
    never_gone,
)
from pytest_specdecode.service.identity import Fingerprint, HttpIdentity
from pytest_specdecode.service.launch_command import endpoint
from pytest_specdecode.service.local import group_running, read_tail
from pytest_specdecode.service.probe import VERIFIED, Look, ProbeFailed, ServerProbe, probe_live
from pytest_specdecode.service.readiness import (
    PhaseEntry,
    ReadyResult,
    ServiceNotReady,
    wait_until_ready,
)

__all__ = [
    "LIVE_PROBE_TIMEOUT",
    "OtherConfigLive",
    "ServerChecks",
    "ServiceUnavailable",
    "live_config",
    "other_config_line",
]

# A live server (auto mode, joining workers) gets this long to answer health.
LIVE_PROBE_TIMEOUT = 30.0
# External mode's one look at what the live server runs, at collection.
LIVE_CONFIG_TIMEOUT = 10.0


class ServiceUnavailable(SpecDecodeError):
    """The server could not be brought to a config; one-line summary first."""


class OtherConfigLive(SpecDecodeError):
    """External mode: the live server runs another config than the test needs."""


class ServerChecks:
    """The probe, the gate and the handles for the server at ``base_url``."""

    def __init__(
        self,
        settings: Settings,
        dialect: dialects.Dialect,
        base_url: str,
        *,
        progress: Progress,
        redactor: redact.Redactor,
        http: requests.Session | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.settings = settings
        self.dialect = dialect
        self.base_url = base_url
        self.progress = progress
        self.redactor = redactor
        self._http = http
        self._clock = clock
        self._sleep = sleep
        # External mode: a server that never answered within a whole ready timeout is
        # not waited for again by the next config (nothing here would start it).
        self._not_running: ServiceNotReady | None = None

    def look(self, config: SpecConfig) -> Look | None:
        """One probe of the live server (no waiting for a startup); None if it cannot tell."""
        probe = ServerProbe(
            self.base_url,
            verify=self._verifier(config),
            label=config.label(),
            api_key=self.settings.api_key,
            session=self._http,
            request_timeout=min(LIVE_PROBE_TIMEOUT, self.settings.ready_timeout),
        )
        try:
            # Never longer than the ready timeout, whatever the server does.
            return probe_live(probe, self.settings.ready_timeout)
        except ProbeFailed:
            return None
        finally:
            probe.close()

    def gate(
        self,
        config: SpecConfig,
        controller: ServiceController | None,
        *,
        expect_running: bool = False,
        before: Fingerprint | None = None,
        down_before: bool = False,
    ) -> ReadyResult:
        """The readiness gate: block until the server serves and runs ``config``."""
        label = config.label()
        return wait_until_ready(
            self.base_url,
            controller=controller,
            verify=self._verifier(config),
            timeout=self.settings.ready_timeout,
            label=label,
            api_key=self.settings.api_key,
            expect_running=expect_running,
            before=before,
            down_before=down_before,
            session=self._http,
            clock=self._clock,
            sleep=self._sleep,
            redact=self.redactor.text,
            # A local process is polled for nothing; a remote one costs an SSH round trip.
            failure_check_interval=0.25 if self.settings.control == "local" else 1.0,
            on_progress=lambda phase, elapsed, line: self.progress.update(
                label, phase, elapsed, line or ""
            ),
        )

    def external(self, config: SpecConfig) -> ServiceHandle:
        """``--dflash-restart=never``: wait (up to the ready timeout) for the live server
        and verify it; another config skips."""
        if self._not_running is not None:
            raise self._not_running
        started = self._clock()
        try:
            ready = self.gate(config, None, expect_running=True)
        except ServiceNotReady as exc:
            if exc.reason == "not-running":
                self._not_running = exc
            if exc.reason != "mismatch":
                raise
            live = self.dialect.live_config(exc.server_info) if exc.server_info else None
            raise OtherConfigLive(
                other_config_line(self.base_url, config, live, exc.mismatches),
                reason="other-config",
                config=config.label(),
            ) from None
        finally:
            self.progress.done()
        return self.handle(config, ready, self._clock() - started, restarted=False)

    def join(self, config: SpecConfig, server: Mapping[str, Any]) -> ServiceHandle:
        """Under the lease: verify the server another worker brought up for ``config``."""
        look = self.look(config)
        if look is None or not look.verified:
            seen = f" ({look.phase}: {look.detail})" if look is not None else ""
            raise ServiceUnavailable(
                f"the server at {self.base_url} should run {config.label()} (another worker "
                f"brought it up) but does not pass the probe{seen}",
                reason="mismatch",
                config=config.label(),
            )
        handle = self.live_handle(config, look)
        if server.get("pgid"):
            handle.watch = _group_watch(
                config.label(), self.base_url, int(server["pgid"]), server.get("log")
            )
        return handle

    def handle(
        self,
        config: SpecConfig,
        ready: ReadyResult,
        seconds: float,
        watch: Watch = never_gone,
        *,
        restarted: bool = True,
    ) -> ServiceHandle:
        """The handle on a server that passed the gate."""
        return ServiceHandle(
            config=config,
            base_url=self.base_url,
            server_info=dict(ready.server_info),
            client=self.client(),
            identity=ready.identity,
            ready_seconds=seconds,
            phases=[(p.phase, p.at) for p in ready.phases],
            unverified=list(ready.unverified),
            restarted=restarted,
            proof=ready.proof,
            simulated=bool(ready.server_info.get("simulator")),
            watch=watch,
            read_identity=self.identity_reader(),
            http_identity=HttpIdentity.of(ready.server_info, None),
        )

    def live_handle(self, config: SpecConfig, look: Look) -> ServiceHandle:
        """The handle on a live server that passed the probe (nothing restarted)."""
        assert look.info is not None
        verified = [PhaseEntry(VERIFIED, 0.0, "")]
        seen = ReadyResult(self.base_url, look.info, verified, 0.0, unverified=look.unverified)
        return self.handle(config, seen, 0.0, restarted=False)

    def watch(self, controller: ServiceController, config: SpecConfig) -> Watch:
        """Whether the server ``controller`` started for ``config`` is gone since."""
        label, url = config.label(), self.base_url
        started = controller.identity()

        def gone() -> ServerGone | None:
            try:
                failure = controller.failure()
                current = controller.identity()
            except ServiceError:
                return None  # cannot tell (SSH down): the requests will say
            if not failure and current is started:
                return None
            where = controller.log_location()
            what = failure or "it was stopped (the controller started another config)"
            return ServerGone(
                f"server for config {label!r} at {url} exited after it passed the gate: {what}"
                + (f"; full log: {where}" if where else ""),
                reason="died",
                log_tail=controller.logs(30) if failure else "",
                config=label,
            )

        return gone

    def identity_reader(self) -> Callable[[], HttpIdentity]:
        """How a handle reads the server's identity again (before figures are filed)."""
        return http_identity_reader(self.base_url, self.settings.api_key)

    def client(self) -> SGLangClient:
        return SGLangClient(self.base_url, api_key=self.settings.api_key, timeout=60.0)

    def _verifier(self, config: SpecConfig) -> Callable[[Any], Any]:
        return functools.partial(self.dialect.verify, config)


def live_config(settings: Settings, dialect: dialects.Dialect) -> SpecConfig | None:
    """External mode: the config the live server runs (every host's, when they all run
    the same), read from /server_info; None when one cannot be read or they differ.

    One short look per host: a server that is down gives None here and its own
    one-line failure at the gate, which waits for nothing in external mode either.
    """
    found: set[SpecConfig] = set()
    for host in settings.hosts or (None,):
        url = endpoint(settings, host).base_url
        timeout = min(LIVE_CONFIG_TIMEOUT, settings.ready_timeout)
        # The whole answer within it (a server trickling bytes resets a per-read timeout).
        bounds = Limits(base=timeout, stall=timeout)
        with SGLangClient(url, api_key=settings.api_key, timeout=timeout, limits=bounds) as client:
            try:
                info = client.server_info()
            except SpecDecodeError:
                return None
        config = dialect.live_config(info)
        if config is None:
            return None
        found.add(config)
    return found.pop() if len(found) == 1 else None


def other_config_line(
    url: str, asked: SpecConfig, live: SpecConfig | None, mismatches: Sequence[str]
) -> str:
    """External mode's one line for a test whose config the live server does not run:
    which fields differ (live against asked) and the two ways out."""
    runs = f"runs {live.label()}, not {asked.label()}" if live else f"does not run {asked.label()}"
    ask = (
        f"ask for its config (@pytest.mark.dflash({', '.join(_knobs(live, '{}={!r}'))}) or "
        f"--dflash-config {','.join(_knobs(live, '{}={}'))})"
        if live
        else "start it with the config the test asks"
    )
    return (
        f"the server at {url} {runs} ({'; '.join(mismatches)}); --dflash-restart=never does "
        f"not restart it: {ask}, or drop --dflash-restart=never so the plugin restarts it"
    )


def _knobs(config: SpecConfig, form: str) -> list[str]:
    """``config``'s keys as a marker or ``--dflash-config`` writes them (its drafter aside)."""
    knobs = ("algorithm", "budget", "topk", "window", "steps")
    shown = [form.format(k, getattr(config, k)) for k in knobs if getattr(config, k) is not None]
    shown.extend(form.format(name.replace("-", "_"), value) for name, value in config.extra)
    return shown


def _group_watch(label: str, url: str, pgid: int, log: str | None) -> Watch:
    """For a local server another worker started: gone once its process group is."""

    def gone() -> ServerGone | None:
        if group_running(pgid):
            return None
        return ServerGone(
            f"server for config {label!r} at {url} exited after it passed the gate: its "
            f"process group {pgid} is gone" + (f"; full log: {log}" if log else ""),
            reason="died",
            log_tail=read_tail(log, 30) if log else "",
            config=label,
        )

    return gone
