"""Files the xdist controller and its workers share in the lease directory, besides leases.

Workers write which config each collected test runs under (``groups.json``, read
by the scheduler and the sweep progress) and which tests a resumed run carried
(``carried.json``); the controller leaves a copy of the report a resumed run
continues from (``resume.json``), made before any test rewrites the original.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pytest_specdecode import statefiles
from pytest_specdecode.distributed.run import controller_of

# The workerinput keys the controller hands every worker: the lease directory and port.
LEASE_DIR = "dflash_lease_dir"
PORT = "dflash_port"
# In the lease directory: the leases of the hosts (and the servers' records).
LEASES = "leases"
GROUPS = "groups.json"
RESUME = "resume.json"
CARRIED = "carried.json"


def share_resume(lease_dir: Path, report: Path) -> None:
    """On the controller: the report a resumed run continues from, for every worker."""
    statefiles.copy(report, lease_dir / RESUME)


def shared_resume(lease_dir: Path) -> Path | None:
    path = lease_dir / RESUME
    return path if path.exists() else None


def worker_lease_dir(config: pytest.Config) -> Path | None:
    """On an xdist worker of a run with the controller plugin: the directory it shares
    with the controller (None elsewhere)."""
    info: dict[str, Any] | None = getattr(config, "workerinput", None)
    return Path(info[LEASE_DIR]) if info and LEASE_DIR in info else None


def _write(config: pytest.Config, name: str, data: object) -> None:
    """On a worker: ``data`` as the shared file ``name`` (every worker writes the same
    content; atomically, so a reader never sees half of it)."""
    if (lease_dir := worker_lease_dir(config)) is not None:
        statefiles.write_json(lease_dir / name, data)


def _read(config: pytest.Config, name: str) -> Any:
    """On the controller: the shared file ``name`` as JSON; None when absent or unreadable
    (or in a run without the controller plugin)."""
    controller = controller_of(config)
    return None if controller is None else statefiles.read_json(controller.lease_dir / name)


def write_carried(config: pytest.Config, nodeids: list[str]) -> None:
    """On a worker: the tests it deselected as carried (every worker finds the same)."""
    _write(config, CARRIED, nodeids)


def read_carried(config: pytest.Config) -> list[str] | None:
    """On the controller: what the workers carried (None until one has collected)."""
    data = _read(config, CARRIED)
    return [str(n) for n in data] if isinstance(data, list) else None


def read_groups(lease_dir: Path) -> dict[str, str]:
    """Which config key each collected test id runs under ({} before the workers wrote it)."""
    data = statefiles.read_json(lease_dir / GROUPS)
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def planned_tests(config: pytest.Config) -> dict[str, int] | None:
    """On the controller: per config key, the tests the workers collected (None serially)."""
    data = _read(config, GROUPS)
    if not isinstance(data, dict):
        return None
    return dict(Counter(str(key) for key in data.values()))


def write_groups(config: pytest.Config, groups: dict[str, str]) -> None:
    """On a worker: which config each collected test id runs under."""
    _write(config, GROUPS, groups)
