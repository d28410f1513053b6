"""Switching a shared server under the xdist lease: one worker restarts, the others join.

The lease (:mod:`pytest_specdecode.service.lease`) decides who switches and
when; this module does the switch: stop the local server another worker
started (its process group, recorded in the lease), bring the config up, and
record the facts the other workers need to use the new server.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytest_specdecode.service.handle import ServiceHandle
from pytest_specdecode.service.lease import HostLease
from pytest_specdecode.service.local import stop_group_id


def server_facts(handle: ServiceHandle, *, local: bool, log: str | None) -> dict[str, Any]:
    """What the other workers read from the lease: URL, and for a local server its group."""
    pid = handle.identity.pid if local and handle.identity is not None else None
    return {"base_url": handle.base_url, "pgid": pid, "log": log if local else None}


def acquire_leased(
    lease: HostLease,
    key: str,
    *,
    bring_up: Callable[[int | None], tuple[ServiceHandle, dict[str, Any]]],
    join: Callable[[dict[str, Any]], ServiceHandle],
    timeout: float,
    still_here: Callable[[], bool] | None = None,
) -> ServiceHandle:
    """The handle on ``key``'s server: switched by this worker, or joined.

    ``bring_up(old_pgid)`` brings the config up (stopping group ``old_pgid``
    first when it restarts) and returns the handle and its lease facts;
    ``join(server)`` verifies the server another worker brought up.
    """
    switched: list[ServiceHandle] = []

    def switch(old: dict[str, Any] | None) -> dict[str, Any]:
        old_pgid = int(old["pgid"]) if old and old.get("pgid") else None
        handle, facts = bring_up(old_pgid)
        switched.append(handle)
        return facts

    server, did_switch = lease.hold(key, switch, timeout=timeout, still_here=still_here)
    if did_switch:
        return switched[0]
    return join(server or {})


def stop_old_group(pgid: int | None) -> None:
    """Stop the local server another worker started, if any (before a restart)."""
    if pgid:
        stop_group_id(pgid)
