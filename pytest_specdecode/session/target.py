"""What the run targets: where its servers are, who may load them, and the header
that says so.

Under xdist a worker is bound to one host through its lease; the controller
holds the plugin that schedules by config (:mod:`pytest_specdecode.distributed.controller`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_specdecode.config.dialects import Dialect
from pytest_specdecode.config.settings import Settings
from pytest_specdecode.distributed import run, shared_files, worker_side
from pytest_specdecode.distributed.controller import start_controller
from pytest_specdecode.output.progress import Progress
from pytest_specdecode.output.redact import Redactor
from pytest_specdecode.service.manager import ServiceManager


class Target:
    """The run's hosts and how its processes share them. Made before any resource:
    a distribution the options do not allow is refused here."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.parallel = run.parallel_hosts(config, settings)
        # A dry run plans here, in this process: no workers, no servers.
        # A search chooses each config from the last one's figures: with fewer than two
        # hosts for the workers it runs here too, serially (search/loop.py says so).
        serial = settings.dry_run or (bool(settings.search) and self.parallel <= 1)
        self.dry_workers = run.serial_for_dry_run(config) if serial else 0
        run.check_options(config, settings)
        self.lease_dir: Path | None = None  # the xdist controller's, once it has one

    def services(self, progress: Progress, dialect: Dialect, redactor: Redactor) -> ServiceManager:
        """The run's service manager: on a worker, bound to its host's lease; in the
        xdist controller, with the controller plugin registered."""
        config, settings = self.config, self.settings
        bound = worker_side.worker_lease(config, settings)
        # A session started late in the xdist controller: the workers already have the
        # lease directory and port of the controller plugin made at configure (inert.py).
        shared_with = run.controller_of(config)
        manager = ServiceManager(
            settings,
            progress=progress,
            dialect=dialect,
            root=config.rootpath,
            target=bound.host if bound else None,
            port=bound.port if bound else shared_with.port if shared_with else None,
            lease=bound.lease if bound else None,
            placement=bound.placement if bound else None,
            lease_for=bound.lease_for if bound else None,
            redactor=redactor,
        )
        if (controller := start_controller(config, settings, manager.port)) is not None:
            self.lease_dir = controller.lease_dir
        return manager

    def share_resume(self, path: Path) -> None:
        """In the xdist controller: the workers read this copy, whatever happens next."""
        if self.lease_dir is not None:
            shared_files.share_resume(self.lease_dir, path)


def header_lines(settings: Settings, base_url: str) -> list[str]:
    """The run header: where the server is, how it is controlled, and the simulator note."""
    target = ", ".join(str(h) for h in settings.hosts) or "localhost"
    lines = [
        f"dflash: target {target} ({base_url}), control {settings.control}, "
        f"dialect {settings.dialect}, restart {settings.restart}"
    ]
    if settings.uses_simulator:
        lines.append(
            "dflash: using the bundled SGLang simulator: figures are simulated, not GPU results"
        )
        lines += [f"dflash: simulator default: {text}" for text in settings.sim_defaults]
    if settings.control == "systemd":
        lines.append(
            f"dflash: the systemd drop-in of {settings.unit} is removed at the end "
            "(--dflash-restore)"
            if settings.restore
            else f"dflash: the systemd drop-in of {settings.unit} (the last config) stays on "
            "the host after the run; --dflash-restore (ini dflash_restore = true) removes it"
        )
    return lines


def verbose_header_lines(settings: Settings, base_url: str, verbose: bool) -> list[str]:
    """The header, and with ``-v`` the launch line or the restart command."""
    lines = header_lines(settings, base_url)
    if verbose and settings.control != "external":
        script = settings.control == "script"
        command = settings.restart_cmd if script else settings.launch
        lines.append(f"dflash: {'restart command' if script else 'launch'} {command}")
    return lines
