"""The controller plugin: share the lease directory and port, schedule, clean up.

Registered by :func:`start_controller` only when pytest-xdist runs the session with workers,
once per run, and found again through :func:`.run.controller_of`.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from xdist.remote import Producer

from pytest_specdecode import statefiles
from pytest_specdecode.config.settings import Settings
from pytest_specdecode.distributed.dispatch import DispatchScheduling
from pytest_specdecode.distributed.placement import host_key
from pytest_specdecode.distributed.run import CONTROLLER, is_xdist_controller
from pytest_specdecode.distributed.schedule import Chooser
from pytest_specdecode.distributed.scheduling import ConfigScheduling
from pytest_specdecode.distributed.shared_files import LEASE_DIR, LEASES, PORT
from pytest_specdecode.distributed.worker_side import bound_host
from pytest_specdecode.service.local import stop_group_id
from pytest_specdecode.service.ownership import Registry


def start_controller(
    config: pytest.Config, settings: Settings, port: int
) -> XdistController | None:
    """The run's controller plugin, registered the first time this is called in a process
    that hands tests to xdist workers (None elsewhere: a worker, a run without ``-n``)."""
    if not is_xdist_controller(config):
        return None
    if (found := config.stash.get(CONTROLLER, None)) is not None:
        return found
    controller = config.stash[CONTROLLER] = XdistController(settings, port)
    config.pluginmanager.register(controller)
    return controller


class XdistController:
    """Controller-side hooks: share the lease directory and port, schedule, clean up."""

    def __init__(self, settings: Settings, port: int) -> None:
        self.settings = settings
        self.port = port
        self.lease_dir = Path(tempfile.mkdtemp(prefix="dflash-lease-"))
        self.scheduler: ConfigScheduling | None = None
        self.chooser: Chooser | None = None  # set by a search over several hosts

    def host_of(self, worker: str) -> str:
        return host_key(self.settings, bound_host(self.settings, worker), self.port)

    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Producer) -> Any:
        names = {host_key(self.settings, h, self.port): str(h) for h in self.settings.hosts}
        self.scheduler = ConfigScheduling(
            config,
            log,
            self.lease_dir,
            self.host_of,
            hosts=list(names),
            names=names,
            chooser=self.chooser,
        )
        # What xdist (or another plugin) would run: used when no test has a config.
        theirs = config.pluginmanager.subset_hook_caller(
            "pytest_xdist_make_scheduler", remove_plugins=[self]
        )(config=config, log=log)
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        return DispatchScheduling(
            self.scheduler,
            theirs,
            self.scheduler.has_configs,
            dist=str(config.getoption("dist", "load")),
            note=reporter.write_line if reporter is not None else lambda line: None,
        )

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[LEASE_DIR] = str(self.lease_dir)
        node.workerinput[PORT] = self.port

    def pytest_sessionfinish(self) -> None:
        if self.scheduler is not None:
            self.scheduler.stop()
        stop_local_servers(self.lease_dir)

    def pytest_unconfigure(self) -> None:
        stop_local_servers(self.lease_dir)
        shutil.rmtree(self.lease_dir, ignore_errors=True)


def stop_local_servers(lease_dir: Path) -> None:
    """Stop every local server a worker left running (recorded in the lease files), and
    every server a worker started and did not stop (the servers' records)."""
    Registry(lease_dir / LEASES).reap(only_orphans=False)
    for path in (lease_dir / LEASES).glob("*.json"):
        try:
            server = (statefiles.read_json(path) or {}).get("server") or {}
        except AttributeError:  # a lease file holding a list or a number
            continue
        if server.get("pgid"):
            stop_group_id(int(server["pgid"]))
