"""pytest-xdist support: workers share each host's server through a lease.

Registered only when pytest-xdist runs the session with workers. The
controller process makes a lease directory and, for the local simulator, one
port, and hands both to every worker (``pytest_configure_node``); each worker
binds to one host (worker N to host N modulo the number of hosts) and takes
its server through :class:`pytest_specdecode.service.lease.HostLease`. At the end the
controller stops the local servers the workers left running.

With several hosts, whole configs go to one worker each: workers write which
config each collected test runs under to the lease directory, and the
controller schedules with :class:`ConfigGroupScheduling`, which groups tests by
that config (xdist's own ``--dist loadgroup`` marks do not group on pytest 9.2,
whose node ids ignore the suffix it adds). Throughput cases skip under xdist
(pytest-benchmark switches itself off there): they need the server to
themselves.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

from pytest_specdecode.config.settings import Host, Settings, SettingsError
from pytest_specdecode.service.lease import HostLease
from pytest_specdecode.service.local import stop_group_id

LEASE_DIR = "dflash_lease_dir"
PORT = "dflash_port"


def is_xdist_controller(config: pytest.Config) -> bool:
    """Whether this process hands tests to xdist workers (``-n N`` with N >= 1)."""
    return bool(
        config.pluginmanager.hasplugin("xdist")
        and not hasattr(config, "workerinput")
        and getattr(config.option, "numprocesses", None)
        and getattr(config.option, "dist", "no") != "no"
    )


def check_options(config: pytest.Config, settings: Settings) -> None:
    """Option combinations that cannot work with workers; :class:`SettingsError` says why."""
    if not is_xdist_controller(config):
        return
    if settings.restore:
        raise SettingsError(
            "--dflash-restore does not work with -n: run the restore in a run without workers"
        )


GROUPS = "groups.json"


def write_groups(config: pytest.Config, groups: dict[str, str]) -> None:
    """On a worker: which config group each collected test id belongs to."""
    info: dict[str, Any] | None = getattr(config, "workerinput", None)
    if not info or LEASE_DIR not in info:
        return
    path = Path(info[LEASE_DIR]) / GROUPS
    tmp = path.with_name(f"{GROUPS}.{info['workerid']}")
    tmp.write_text(json.dumps(groups), encoding="utf-8")
    tmp.replace(path)  # every worker writes the same content; atomically


class ConfigGroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
    """xdist scheduling that keeps each config's tests on one worker (so one host)."""

    def __init__(self, config: pytest.Config, log: Any, lease_dir: Path) -> None:
        super().__init__(config, log)
        self._path = lease_dir / GROUPS
        self._groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:
            try:
                self._groups = json.loads(self._path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                self._groups = {}
        groups: dict[str, str] = self._groups or {}
        return groups.get(nodeid, nodeid)


class XdistController:
    """Controller-side hooks: share the lease directory and port, clean up at the end."""

    def __init__(self, port: int, *, group_configs: bool) -> None:
        self.port = port
        self.group_configs = group_configs
        self.lease_dir = Path(tempfile.mkdtemp(prefix="dflash-lease-"))

    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        if not self.group_configs:
            return None
        return ConfigGroupScheduling(config, log, self.lease_dir)

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[LEASE_DIR] = str(self.lease_dir)
        node.workerinput[PORT] = self.port

    def pytest_sessionfinish(self) -> None:
        stop_local_servers(self.lease_dir)

    def pytest_unconfigure(self) -> None:
        stop_local_servers(self.lease_dir)
        shutil.rmtree(self.lease_dir, ignore_errors=True)


def stop_local_servers(lease_dir: Path) -> None:
    """Stop every local server a worker left running (recorded in the lease files)."""
    for path in (lease_dir / "leases").glob("*.json"):
        try:
            server = json.loads(path.read_text(encoding="utf-8")).get("server") or {}
        except (OSError, ValueError):
            continue
        if server.get("pgid"):
            stop_group_id(int(server["pgid"]))


def worker_lease(
    config: pytest.Config, settings: Settings
) -> tuple[HostLease, Host | None, int] | None:
    """On an xdist worker: its lease, the host it is bound to, and the server port."""
    info: dict[str, Any] | None = getattr(config, "workerinput", None)
    if not info or LEASE_DIR not in info:
        return None
    worker = str(info["workerid"])
    index = int("".join(ch for ch in worker if ch.isdigit()) or 0)
    host = settings.hosts[index % len(settings.hosts)] if settings.hosts else None
    port = int(info[PORT])
    key = f"{host.name if host and settings.control != 'local' else 'localhost'}-{port}"
    return HostLease(Path(info[LEASE_DIR]) / "leases", key, worker), host, port
