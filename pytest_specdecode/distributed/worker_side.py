"""An xdist worker's side: the host it is bound to, its lease there, the scheduler's
placement, and whether it holds its host alone.

:func:`worker_lease` is the worker's one entry (None outside an xdist worker); what
the worker shares with the controller besides is in :mod:`.shared_files`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import pytest

from pytest_specdecode.config.settings import Host, Settings
from pytest_specdecode.distributed.lease import HostLease
from pytest_specdecode.distributed.placement import SharedPlacement, down_hosts, host_key
from pytest_specdecode.distributed.shared_files import LEASES, PORT, worker_lease_dir


def worker_index(worker: str) -> int:
    """``gw3`` -> 3."""
    return int("".join(ch for ch in worker if ch.isdigit()) or 0)


def bound_host(settings: Settings, worker: str) -> Host | None:
    """The host worker ``worker`` is bound to (N modulo the number of hosts)."""
    if not settings.hosts:
        return None
    return settings.hosts[worker_index(worker) % len(settings.hosts)]


def holds_host_alone(config: pytest.Config, settings: Settings, current: Host | None) -> bool:
    """On an xdist worker: whether no other worker can use its server while it measures.

    True when the hosts are remote and distinct per worker (no more workers than
    hosts, worker N on host N) and no host of the run was lost (a lost host's
    workers move to a live host, which they then share with its own)."""
    lease_dir = worker_lease_dir(config)
    if lease_dir is None or not settings.remote or len(settings.hosts) < 2:
        return False
    if down_hosts(lease_dir):
        return False
    info: dict[str, Any] = getattr(config, "workerinput", {})
    workers = int(info.get("workercount") or 0)
    if not 0 < workers <= len(settings.hosts):
        return False
    bound = bound_host(settings, str(info.get("workerid", "")))
    return bound is not None and current == bound


class WorkerBinding(NamedTuple):
    """What an xdist worker serves from: its host, the server port, the lease on that
    host, the scheduler's placement (multi-host runs), and the lease of any other host."""

    lease: HostLease
    host: Host | None
    port: int
    placement: SharedPlacement | None
    lease_for: Callable[[Host], HostLease]


def worker_lease(config: pytest.Config, settings: Settings) -> WorkerBinding | None:
    """On an xdist worker: where it serves from (see :class:`WorkerBinding`)."""
    directory = worker_lease_dir(config)
    if directory is None:
        return None
    info: dict[str, Any] = getattr(config, "workerinput", {})
    worker = str(info["workerid"])
    host = bound_host(settings, worker)
    port = int(info[PORT])

    def lease_for(target: Host | None) -> HostLease:
        return HostLease(directory / LEASES, host_key(settings, target, port), worker)

    lease = lease_for(host)
    lease.register()
    placement = None
    if settings.remote and len(settings.hosts) > 1:
        hosts = {host_key(settings, h, port): h for h in settings.hosts}
        placement = SharedPlacement(directory, hosts, host_key(settings, host, port), worker)
    return WorkerBinding(lease, host, port, placement, lease_for)
