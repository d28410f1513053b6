"""Bringing the target server to each config, once, and proving it.

:class:`ServiceManager` is what the ``dflash_service`` fixture calls. Per
config it decides *whether* to restart (``--dflash-restart``: ``auto`` keeps
a live server that already passes the probe, ``always`` restarts, ``never``
only verifies), then has the pieces do the work: the controller
(:mod:`.controllers`) applies the launch the renderer made
(:mod:`.launch_command`), :class:`~.checks.ServerChecks` probes and gates the
server (external mode and a joining worker's check live there too), and
under pytest-xdist the lease (:mod:`.switch`) makes one worker restart while
the others join. A config whose gate failed keeps its error, so every test of
that config reports the same message while the next config is still tried.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

from pytest_specdecode.config import dialects
from pytest_specdecode.config.collection import template_args
from pytest_specdecode.config.settings import Host, Settings
from pytest_specdecode.config.spec import SpecConfig
from pytest_specdecode.errors import SpecDecodeError
from pytest_specdecode.output import redact
from pytest_specdecode.output.progress import Progress
from pytest_specdecode.service import drafter, retry, switch, weight_cache
from pytest_specdecode.service.base import ServiceController
from pytest_specdecode.service.checks import OtherConfigLive, ServerChecks, ServiceUnavailable
from pytest_specdecode.service.controllers import build_controller
from pytest_specdecode.service.handle import ServiceHandle
from pytest_specdecode.service.identity import Fingerprint
from pytest_specdecode.service.launch_command import LaunchRenderer, endpoint
from pytest_specdecode.service.probe import LOADING, Look
from pytest_specdecode.service.sharing import Lease, LeaseHostDown, LocalPlacement, Moved, Placement
from pytest_specdecode.service.start_phases import StartPhases, read_phases
from pytest_specdecode.service.weight_cache import WeightCache, WeightCacheFailed

# OtherConfigLive and ServiceUnavailable live in .checks; this path stays theirs too.
__all__ = ["OtherConfigLive", "ServiceHandle", "ServiceManager", "ServiceUnavailable"]

ControllerFactory = Callable[[Settings, Path, "Path | None", "Host | None"], ServiceController]

# Waiting for another worker's switch: the ready timeout plus a margin for the restart.
SWITCH_MARGIN = 300.0


class ServiceManager:
    """Applies configs to one target server; one live config at a time."""

    def __init__(
        self,
        settings: Settings,
        *,
        progress: Progress,
        dialect: dialects.Dialect | None = None,
        root: Path | None = None,
        controller_factory: ControllerFactory | None = None,
        target: Host | None = None,
        port: int | None = None,
        lease: Lease | None = None,
        placement: Placement | None = None,
        lease_for: Callable[[Host], Lease | None] | None = None,
        http: requests.Session | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        redactor: redact.Redactor | None = None,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.redactor = redactor or redact.for_settings(settings)
        self.progress = progress
        self.dialect = dialect or dialects.get_dialect(settings.dialect, **template_args(settings))
        # Under pytest-xdist each worker is bound to one host and shares its
        # server with the other workers bound there, through ``lease``. With
        # several hosts, ``placement`` says where a config runs once a host is lost.
        many = settings.remote and len(settings.hosts) > 1
        self.placement = placement or (LocalPlacement(settings.hosts) if many else None)
        self._lease_for = lease_for
        self._port = port
        self._http = http
        self._clock = clock
        self._wall = wall  # when a start began, for the report (the clock only measures)
        self._sleep = sleep
        self._bind(target or (settings.hosts[0] if settings.hosts else None), lease)
        # A local server starts in the project's root, so relative paths in
        # the launch command (e.g. --sim-answers answers.json) work from anywhere.
        self.root = root
        self._factory = controller_factory or build_controller
        self._controller: ServiceController | None = None
        self._live: ServiceHandle | None = None
        self._failed: dict[SpecConfig, SpecDecodeError] = {}
        self._messages: list[str] = []
        self._attempts: dict[SpecConfig, list[retry.Attempt]] = {}
        # --dflash-weight-cache: the daemon of this host, started before the first start.
        self._cache: WeightCache | None = None

    def _bind(self, target: Host | None, lease: Lease | None) -> None:
        """Serve from ``target`` (again: after its host was lost, another one)."""
        self.target = target
        self.where = endpoint(self.settings, target, self._port)
        self.renderer = LaunchRenderer(self.settings, self.dialect, self.where, self.redactor)
        self.checks = ServerChecks(
            self.settings,
            self.dialect,
            self.where.base_url,
            progress=self.progress,
            redactor=self.redactor,
            http=self._http,
            clock=self._clock,
            sleep=self._sleep,
        )
        self.lease = lease if self.settings.restart != "never" else None

    @property
    def port(self) -> int:
        return self.where.port

    @property
    def base_url(self) -> str:
        return self.where.base_url

    # --- what the session calls -------------------------------------------

    def acquire(self, config: SpecConfig, log_dir: Path) -> ServiceHandle:
        """Return a handle on a server verified to run ``config``.

        Raises :class:`ServiceUnavailable` (gate failed, now or earlier for this
        config) or :class:`OtherConfigLive` (external mode, other config).
        """
        if self._live is not None and self._live.config == config:
            return self._live
        if config in self._failed:
            raise _unavailable(self._failed[config], config)
        try:
            handle = self._somewhere(config, log_dir)
        except OtherConfigLive:
            raise
        except SpecDecodeError as exc:
            self._failed[config] = exc
            self._messages.append(f"{config.label()}: not ready: {exc.summary}")
            raise _unavailable(exc, config) from None
        self._messages.append(handle.ready_message())
        handle.log_dir = log_dir
        handle.host = self._host_name()
        handle.moves = self.placement.moves(config.key()) if self.placement else []
        if handle.restarted:
            handle.attempts = [a.to_json() for a in self._attempts.get(config, [])]
        self._live = handle
        return handle

    def start_log(self, config: SpecConfig) -> dict[str, Any] | None:
        """For the report of a config that did not come up: where it was tried, and how."""
        if config not in self._failed:
            return None
        return {
            "ready": False,
            "host": self._host_name(),
            "start_attempts": [a.to_json() for a in self._attempts.get(config, [])],
            "moves": self.placement.moves(config.key()) if self.placement else [],
        }

    def _somewhere(self, config: SpecConfig, log_dir: Path) -> ServiceHandle:
        """Bring ``config`` up on its host; when that host is lost, on the next one."""
        key = config.key()
        while True:
            if self.placement is not None:
                host = self.placement.host_for(key)  # raises when no host is left
                if host != self.target:
                    self._move_to(host)
            try:
                if self.lease is not None:
                    return self._leased(self.lease, config, log_dir)
                return self._bring_up(config, log_dir, None)[0]
            except Moved:
                continue  # the scheduler moved it while this worker waited
            except (retry.HostDown, LeaseHostDown) as exc:
                if self.placement is None:
                    raise
                self.placement.mark_down(self.target or Host("localhost"), exc.summary, key)
                self._messages.append(f"{config.label()}: host {self.target} lost: {exc.summary}")

    def _move_to(self, host: Host) -> None:
        self._drop_live()
        controller, self._controller = self._controller, None
        if controller is not None:
            controller.stop()  # closes its SSH connection; the remote server is left alone
        self._bind(host, self._lease_for(host) if self._lease_for else None)

    def drain_messages(self) -> list[str]:
        messages, self._messages = self._messages, []
        return messages

    def shutdown(self) -> None:
        """Stop what was started (and restore, when asked); safe to call twice."""
        self._drop_live()
        try:
            self._stop_servers()
        finally:
            # After the servers: a client must not outlive the weights it maps.
            cache, self._cache = self._cache, None
            kept = cache.finish() if cache is not None else None
            self._messages.extend([kept] if kept else [])

    def _stop_servers(self) -> None:
        if self.lease is not None:
            self.lease.leave()
            if self.settings.control == "local":
                # Other workers may still use the server this one started: the
                # xdist controller stops it once every worker is done.
                self._controller = None
                return
        controller, self._controller = self._controller, None
        if controller is None:
            return
        try:
            if self.settings.restore:
                controller.restore()
        finally:
            controller.stop()

    # --- deciding whether to restart --------------------------------------

    def _bring_up(
        self, config: SpecConfig, log_dir: Path, old_pgid: int | None
    ) -> tuple[ServiceHandle, dict[str, Any]]:
        """The handle and its lease facts; restarts unless the mode says otherwise."""
        if self.settings.restart == "never":
            return self.checks.external(config), {"base_url": self.base_url}
        look: Look | None = None
        if self.settings.restart == "auto" or self.settings.control == "script":
            # auto: maybe no restart is needed; script: what answered before,
            # so a restart can be told from a no-op.
            look = self.checks.look(config)
            if self.settings.restart == "auto" and look is not None and look.verified:
                return self.checks.live_handle(config, look), {"base_url": self.base_url}
        switch.stop_old_group(old_pgid if self.settings.control == "local" else None)
        return self._restart(config, log_dir, look)

    def _restart(
        self, config: SpecConfig, log_dir: Path, before: Look | None
    ) -> tuple[ServiceHandle, dict[str, Any]]:
        """Start ``config``, again after a pause while the failure looks transient
        (``--dflash-start-retries``); every failed try goes to the report."""
        self._drop_live()
        if self.settings.weight_cache.on:
            self._weight_cache(log_dir).ensure(self._messages.append)
        controller = self._get_controller(log_dir)
        label = config.label()

        def retrying(number: int, verdict: retry.Verdict, pause: float) -> None:
            where = self._host_name()
            self._messages.append(
                f"{label}: start {number} on {where} failed ({verdict.why}): "
                f"retrying in {pause:g} s"
            )
            self.progress.update(label, f"retrying in {pause:g}s", 0.0, verdict.why)

        return retry.with_retries(
            lambda: self._start(config, controller, before),
            retries=self.settings.start_retries,
            pause=self.settings.start_retry_pause,
            attempts=self._attempts.setdefault(config, []),
            where=self._host_name(),
            label=label,
            may_move=self.placement is not None,
            sleep=self._sleep,
            on_retry=retrying,
        )

    def _host_name(self) -> str:
        return str(self.target) if self.target is not None else "localhost"

    def _start(
        self, config: SpecConfig, controller: ServiceController, before: Look | None
    ) -> tuple[ServiceHandle, dict[str, Any]]:
        started, began = self._clock(), self._wall()
        self.progress.update(config.label(), "restarting", 0.0)
        try:
            launch = self.renderer.render(config)
            controller.apply(self._cache.client(launch) if self._cache is not None else launch)
            ready = self.checks.gate(
                config,
                controller,
                before=Fingerprint.of(before.info) if before is not None else None,
                down_before=before is not None and before.phase == LOADING,
            )
        finally:
            self.progress.done()
        first_generate = self._clock() - started
        log = drafter.read_log(controller, self.settings)
        # The drafter's own start-up line must agree too (raises DrafterMismatch).
        proof = drafter.check(
            config, controller, ready.identity, self.settings, url=self.base_url, log=log
        )
        self._messages.extend([proof.summary] if proof.summary else [])
        ready.unverified.extend(proof.unverified)
        watch = self.checks.watch(controller, config)
        total = self._clock() - started
        handle = self.checks.handle(config, ready, total, watch)
        handle.started_at = began
        text, where = log
        handle.start_phases = StartPhases.of(
            read_phases(text) if text is not None else None,
            total=total,
            first_generate=first_generate,
            weight_cache=self._cache.mode if self._cache is not None else "off",
            source=where if text is not None and "Load weight" in text else f"no phases: {where}",
        )
        where_log = controller.log_location() if self.settings.control == "local" else None
        return handle, switch.server_facts(
            handle, local=self.settings.control == "local", log=where_log
        )

    def _leased(self, lease: Lease, config: SpecConfig, log_dir: Path) -> ServiceHandle:
        placement, target = self.placement, self.target
        here = None
        if placement is not None and target is not None:
            here = lambda: placement.still_here(config.key(), target)  # noqa: E731
        timeout = self.settings.ready_timeout + SWITCH_MARGIN
        with lease.turn(config.key(), timeout=timeout, still_here=here) as turn:
            if not turn.switching:
                # Another worker brought it up: verify that server.
                return self.checks.join(config, turn.server or {})
            handle, facts = self._bring_up(config, log_dir, switch.old_group(turn.server))
            turn.switched(facts)
            return handle

    # --- the pieces -------------------------------------------------------

    def _get_controller(self, log_dir: Path) -> ServiceController:
        if self._controller is None:
            self._controller = self._factory(self.settings, log_dir, self.root, self.target)
            if self.lease is not None and hasattr(self._controller, "registry"):
                # Local servers of a worker are recorded in the lease directory.
                self._controller.registry = self.lease.registry
        return self._controller

    def _weight_cache(self, log_dir: Path) -> WeightCache:
        if self._cache is None:
            if self.lease is not None:
                raise WeightCacheFailed(
                    "--dflash-weight-cache does not run under pytest-xdist yet (one daemon per "
                    "host would be shared by its workers): run without -n, or without it",
                    reason="weight-cache",
                )
            self._cache = weight_cache.for_settings(self.settings, log_dir, self.root, self.target)
        return self._cache

    def _drop_live(self) -> None:
        if self._live is not None:
            self._live.client.close()
            self._live = None


def _unavailable(exc: SpecDecodeError, config: SpecConfig) -> ServiceUnavailable:
    """The user-facing error for a config that could not be brought up, keeping the cause's
    reason, phase and log tail."""
    return ServiceUnavailable(
        exc.message or exc.summary,
        reason=exc.reason or "unavailable",
        phase=exc.phase,
        log_tail=exc.log_tail,
        config=config.label(),
    )
