"""Switching a shared server under the xdist lease: one worker restarts, the others join.

The lease (:mod:`pytest_specdecode.distributed.lease`) decides who switches and
when; this module does the switch: stop the local server another worker
started (its process group, recorded in the lease), bring the config up, and
record the facts the other workers need to use the new server.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_specdecode.service.handle import ServiceHandle
from pytest_specdecode.service.local import stop_group_id


def server_facts(handle: ServiceHandle, *, local: bool, log: str | None) -> dict[str, Any]:
    """What the other workers read from the lease: URL, and for a local server its group."""
    pid = handle.identity.pid if local and handle.identity is not None else None
    return {"base_url": handle.base_url, "pgid": pid, "log": log if local else None}


def old_group(server: Mapping[str, Any] | None) -> int | None:
    """The process group of the local server another worker started (lease facts), if any."""
    return int(server["pgid"]) if server and server.get("pgid") else None


def stop_old_group(pgid: int | None) -> None:
    """Stop the local server another worker started, if any (before a restart)."""
    if pgid:
        stop_group_id(pgid)
