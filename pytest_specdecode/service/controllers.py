"""Building the controller the settings ask for: local, systemd, script or external.

fabric is imported only for the SSH modes, so local runs do not load it.
"""

from __future__ import annotations

from pathlib import Path

from pytest_specdecode.config.settings import Host, Settings
from pytest_specdecode.service.base import ServiceController

# Remote commands other than the restart itself (daemon-reload, show, ...).
SYSTEMD_STEP_TIMEOUT = 180.0


def build_controller(
    settings: Settings,
    log_dir: Path,
    root: Path | None,
    host: Host | None,
    *,
    unit: str | None = None,
    whole_unit: bool = False,
    runtime_directory: str | None = None,
) -> ServiceController:
    """The controller for ``settings``; ``root`` is where a local server starts.

    ``unit``, ``whole_unit``, ``runtime_directory``: systemd control of another unit than
    the server's, one of the plugin's own (the weight-cache daemon's, service.weight_cache).
    """
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
    # A remote step never outlives the ready timeout: a stalled network is an
    # error within it, not a hang.
    step = max(5.0, min(SYSTEMD_STEP_TIMEOUT, settings.ready_timeout))
    if settings.control == "systemd":
        from pytest_specdecode.service.systemd import SystemdController

        assert settings.unit is not None
        return SystemdController(
            factory,
            unit or settings.unit,
            where=where,
            sudo=settings.sudo,
            command_timeout=step,
            secrets=[settings.api_key],
            whole_unit=whole_unit,
            runtime_directory=runtime_directory,
        )
    from pytest_specdecode.service.script import ScriptController

    return ScriptController(
        factory, where=where, logs_command=settings.logs_cmd, timeout=settings.ready_timeout
    )
