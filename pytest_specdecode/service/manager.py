"""Bringing the target server to each config, once, and proving it.

:class:`ServiceManager` is what the ``dflash_service`` fixture calls: it
builds the controller the settings ask for (local, systemd, script,
external), renders each config with the dialect, applies it, and passes the
readiness gate before any test request is sent. A config whose gate failed
keeps its error, so every test of that config reports the same message while
the next config is still tried.
"""

from __future__ import annotations

import json
import shlex
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from pytest_specdecode import redact
from pytest_specdecode.client import SGLangClient, SGLangError
from pytest_specdecode.config import dialects
from pytest_specdecode.config.collection import template_args
from pytest_specdecode.config.settings import Host, Settings
from pytest_specdecode.config.spec import SpecConfig, config_to_dict
from pytest_specdecode.errors import SpecDecodeError
from pytest_specdecode.progress import Progress
from pytest_specdecode.service import drafter
from pytest_specdecode.service.base import (
    LaunchSpec,
    ProcessIdentity,
    ServiceController,
    ServiceError,
)
from pytest_specdecode.service.lease import HostLease, LeaseTimeout, SwitchFailed
from pytest_specdecode.service.local import stop_group_id
from pytest_specdecode.service.readiness import ServiceNotReady, wait_until_ready


class ServiceUnavailable(SpecDecodeError):
    """The server could not be brought to a config; one-line summary first."""


class OtherConfigLive(SpecDecodeError):
    """External mode: the live server runs another config than the test needs."""


@dataclass
class ServiceHandle:
    """A server verified to run ``config``: what tests get from ``dflash_service``."""

    config: SpecConfig
    base_url: str
    server_info: dict[str, Any]
    client: SGLangClient
    identity: ProcessIdentity | None
    ready_seconds: float
    phases: list[tuple[str, float]] = field(default_factory=list)
    unverified: list[str] = field(default_factory=list)
    restarted: bool = True
    simulated: bool = False
    log_dir: Path = Path()

    def summary(self) -> dict[str, Any]:
        """JSON-able facts for the report."""
        info = self.server_info
        return {
            "base_url": self.base_url,
            "restarted": self.restarted,
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
        }


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (for the local simulator)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class ServiceManager:
    """Applies configs to one target server; one live config at a time."""

    def __init__(
        self,
        settings: Settings,
        *,
        progress: Progress,
        dialect: dialects.Dialect | None = None,
        root: Path | None = None,
        controller_factory: Callable[[Settings, Path, Path | None, Host | None], ServiceController]
        | None = None,
        clock: Callable[[], float] = time.monotonic,
        target: Host | None = None,
        port: int | None = None,
        lease: HostLease | None = None,
        redactor: redact.Redactor | None = None,
    ) -> None:
        self.settings = settings
        self.redactor = redactor or redact.for_settings(settings)
        self.progress = progress
        self.dialect = dialect or dialects.get_dialect(
            settings.dialect,
            **template_args(settings),
        )
        self._controller_factory = controller_factory or build_controller
        # A local server starts in the project's root, so relative paths in
        # the launch command (e.g. --sim-answers answers.json) work from anywhere.
        self.root = root
        self._controller: ServiceController | None = None
        self._clock = clock
        self._live: ServiceHandle | None = None
        self._failed: dict[SpecConfig, str] = {}
        self._messages: list[str] = []
        local = settings.control == "local"
        # Under pytest-xdist each worker is bound to one host and shares its
        # server with the other workers bound there, through ``lease``.
        self.target = target or (settings.hosts[0] if settings.hosts else None)
        self.host = self.target.name if self.target and not local else "127.0.0.1"
        if port is not None:
            self.port = port
        elif local and settings.uses_simulator and not settings.port_given:
            self.port = free_port()
        else:
            self.port = settings.port
        self.base_url = f"http://{_url_host(self.host)}:{self.port}"
        self.lease = lease
        self._switched: ServiceHandle | None = None

    # --- what tests see ---------------------------------------------------

    def header_lines(self) -> list[str]:
        s = self.settings
        target = ", ".join(str(h) for h in s.hosts) or "localhost"
        lines = [
            f"dflash: target {target} ({self.base_url}), control {s.control}, "
            f"dialect {s.dialect}, restart {s.restart}"
        ]
        if s.uses_simulator:
            lines.append(
                "dflash: using the bundled SGLang simulator: figures are simulated, not GPU results"
            )
        return lines

    def acquire(self, config: SpecConfig, log_dir: Path, rank: int = 0) -> ServiceHandle:
        """Return a handle on a server verified to run ``config``.

        Raises :class:`ServiceUnavailable` (gate failed, now or earlier for this
        config) or :class:`OtherConfigLive` (external mode, other config).
        ``rank`` orders configs for the xdist lease (collection order).
        """
        if self.lease is None and self._live is not None and self._live.config == config:
            return self._live
        if config in self._failed:
            raise ServiceUnavailable(self._failed[config])
        try:
            if self.lease is not None:
                handle = self._acquire_leased(self.lease, config, log_dir, rank)
            else:
                handle = self._bring_up(config, log_dir)
        except (ServiceNotReady, ServiceError, SwitchFailed, LeaseTimeout) as exc:
            message = str(exc)
            self._failed[config] = message
            self._messages.append(f"{config.label()}: not ready: {message.splitlines()[0]}")
            raise ServiceUnavailable(message) from None
        if handle is not self._live:
            self._messages.append(_ready_message(handle))
        handle.log_dir = log_dir
        self._live = handle
        return handle

    def announce(self, need: int | None, keep: SpecConfig | None) -> None:
        """Under the lease: the lowest config rank this worker still needs."""
        if self.lease is not None:
            self.lease.announce(need, None if keep is None else _lease_key(keep))

    def _acquire_leased(
        self, lease: HostLease, config: SpecConfig, log_dir: Path, rank: int
    ) -> ServiceHandle:
        self._switched = None
        _, switched = lease.hold(
            _lease_key(config),
            rank,
            lambda old: self._switch(config, log_dir, old),
            timeout=self.settings.ready_timeout + 300,
        )
        if switched and self._switched is not None:
            return self._switched
        if self._live is not None and self._live.config == config:
            return self._live
        handle = self._probe(config, self._verifier(config))
        if handle is None:
            raise ServiceUnavailable(
                f"the server at {self.base_url} should run {config.label()} (another worker "
                "brought it up) but does not answer /health_generate or verify"
            )
        return handle

    def _switch(
        self, config: SpecConfig, log_dir: Path, old: dict[str, Any] | None
    ) -> dict[str, Any]:
        """Restart for ``config`` under the lease; stops a local server another worker started."""
        if old and old.get("pgid") and self.settings.control == "local":
            stop_group_id(int(old["pgid"]))
        handle = self._restart(config, log_dir, self._verifier(config))
        self._switched = handle
        identity = handle.identity if self.settings.control == "local" else None
        return {"base_url": handle.base_url, "pgid": identity.pid if identity else None}

    def drain_messages(self) -> list[str]:
        messages, self._messages = self._messages, []
        return messages

    def shutdown(self) -> None:
        """Stop what was started (and restore, when asked); safe to call twice."""
        if self._live is not None:
            self._live.client.close()
            self._live = None
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

    # --- bringing a server up ---------------------------------------------

    def _bring_up(self, config: SpecConfig, log_dir: Path) -> ServiceHandle:
        verify = self._verifier(config)
        if self.settings.restart == "never":
            return self._external(config, verify)
        if self.settings.restart == "auto":
            live = self._probe(config, verify)
            if live is not None:
                return live
        return self._restart(config, log_dir, verify)

    def _restart(
        self, config: SpecConfig, log_dir: Path, verify: Callable[[Any], Any]
    ) -> ServiceHandle:
        if self._live is not None:
            self._live.client.close()
            self._live = None
        controller = self._get_controller(log_dir)
        started = self._clock()
        self.progress.update(config.label(), "restarting", 0.0)
        identity = controller.apply(self.launch_spec(config))
        return self._gate(config, verify, controller, identity, started)

    def _gate(
        self,
        config: SpecConfig,
        verify: Callable[[Any], Any],
        controller: ServiceController | None,
        identity: ProcessIdentity | None,
        started: float,
    ) -> ServiceHandle:
        try:
            ready = wait_until_ready(
                self.base_url,
                controller=controller,
                verify=verify,
                timeout=self.settings.ready_timeout,
                label=config.label(),
                api_key=self.settings.api_key,
                redact=self.redactor.text,
                on_progress=lambda phase, elapsed, line: self.progress.update(
                    config.label(), phase, elapsed, line or ""
                ),
            )
        finally:
            self.progress.done()
        # The drafter's own start-up line must agree too (raises DrafterMismatch).
        proof = drafter.check(config, controller, identity, self.settings, url=self.base_url)
        self._messages.extend([proof.summary] if proof.summary else [])
        return ServiceHandle(
            config=config,
            base_url=self.base_url,
            server_info=dict(ready.server_info),
            client=self._client(),
            identity=identity,
            ready_seconds=self._clock() - started,
            phases=[(p.phase, p.at) for p in ready.phases],
            unverified=[*ready.unverified, *proof.unverified],
            restarted=controller is not None,
            simulated=bool(ready.server_info.get("simulator")),
        )

    def _external(self, config: SpecConfig, verify: Callable[[Any], Any]) -> ServiceHandle:
        """``--dflash-restart=never``: wait for the live server; another config skips."""
        try:
            return self._gate(config, verify, None, None, self._clock())
        except ServiceNotReady as exc:
            if exc.reason != "mismatch":
                raise
            raise OtherConfigLive(
                f"the server at {self.base_url} does not run {config.label()} "
                f"({'; '.join(exc.mismatches)}) and --dflash-restart=never forbids restarting it"
            ) from None

    def _verifier(self, config: SpecConfig) -> Callable[[Any], Any]:
        def verify(server_info: Any) -> Any:
            return self.dialect.verify(config, server_info)

        return verify

    def _probe(self, config: SpecConfig, verify: Callable[[Any], Any]) -> ServiceHandle | None:
        """The live server, if it is ready and verified for ``config`` (no restart)."""
        client = self._client()
        try:
            health = client.session.get(f"{self.base_url}/health_generate", timeout=30.0)
            health.close()
            if health.status_code != 200:
                client.close()
                return None
            info = client.server_info()
        except (requests.RequestException, SGLangError):
            client.close()
            return None
        verification = verify(info)
        if not verification.ok:
            client.close()
            return None
        return ServiceHandle(
            config=config,
            base_url=self.base_url,
            server_info=dict(info),
            client=client,
            identity=None,
            ready_seconds=0.0,
            phases=[("verified", 0.0)],
            unverified=list(verification.unverified),
            restarted=False,
            simulated=bool(info.get("simulator")),
        )

    def launch_spec(self, config: SpecConfig) -> LaunchSpec:
        """The command line (or script) that brings the target to ``config``."""
        rendered = self.dialect.render(config)
        s = self.settings
        script = dialects.script_args(s.restart_cmd, config) if s.restart_cmd else None
        argv = shlex.split(s.launch)
        if s.control == "local":
            # "python" means the interpreter running pytest (its venv), as users expect.
            if argv and argv[0] in ("python", "python3"):
                argv[0] = sys.executable
            if "--port" not in argv:
                argv += ["--host", self.host, "--port", str(self.port)]
            if s.uses_simulator:  # play the SGLang build the dialect targets
                argv += dialects.simulator_flags(self.dialect)
        argv += list(rendered.argv)
        # A key among the config's extra flags is masked from now on, everywhere.
        self.redactor.learn(shlex.join(argv))
        return LaunchSpec(
            argv=tuple(argv), env=dict(rendered.env), script=script, label=config.label()
        )

    def _get_controller(self, log_dir: Path) -> ServiceController:
        if self._controller is None:
            self._controller = self._controller_factory(
                self.settings, log_dir, self.root, self.target
            )
        return self._controller

    def _client(self) -> SGLangClient:
        return SGLangClient(self.base_url, api_key=self.settings.api_key, timeout=60.0)


def build_controller(
    settings: Settings, log_dir: Path, root: Path | None, host: Host | None
) -> ServiceController:
    """The controller the settings ask for."""
    if settings.control == "local":
        from pytest_specdecode.service.local import LocalController

        return LocalController(log_dir, cwd=root)
    if settings.control == "external":
        from pytest_specdecode.service.external import ExternalController

        return ExternalController(where=", ".join(map(str, settings.hosts)) or "localhost")
    from pytest_specdecode.service import ssh

    host = host or settings.hosts[0]
    target = ssh.SSHTarget(
        host=host.name,
        user=settings.ssh_user,
        port=host.port or settings.ssh_port,
        key_filename=settings.ssh_key,
        accept_unknown_host_keys=settings.ssh_accept_new_host_key,
    )
    factory = ssh.connection_factory(target)
    where = ssh.describe(target)
    if settings.control == "systemd":
        from pytest_specdecode.service.systemd import SystemdController

        assert settings.unit is not None
        return SystemdController(factory, settings.unit, where=where, sudo=settings.sudo)
    from pytest_specdecode.service.script import ScriptController

    return ScriptController(factory, where=where, logs_command=settings.logs_cmd)


def _lease_key(config: SpecConfig) -> str:
    return json.dumps(config_to_dict(config), sort_keys=True)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


# What the server answered in each phase of the gate, for the -v line.
_PHASE_NAMES = {"loading": "loading (refused)", "warming up": "warming up (503)"}


def _ready_message(handle: ServiceHandle) -> str:
    label = handle.config.label()
    if not handle.restarted:
        return f"{label}: live server already verified, no restart"
    phases = " -> ".join(_PHASE_NAMES.get(name, name) for name, _ in handle.phases)
    command = handle.identity.command if handle.identity else None
    # The session masks secrets (an --api-key on this line) before showing it.
    launched = f"; launched: {command}" if command else ""
    return f"{label}: ready in {handle.ready_seconds:.1f}s ({phases}){launched}"
