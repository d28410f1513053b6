"""Files the xdist controller and its workers share in the lease directory, besides leases.

Workers write which config each collected test runs under (``groups.json``, read
by the scheduler and the sweep progress) and which tests a resumed run carried
(``carried.json``); the controller leaves a copy of the report a resumed run
continues from (``resume.json``), made before any test rewrites the original.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

LEASE_DIR = "dflash_lease_dir"
GROUPS = "groups.json"
RESUME = "resume.json"
CARRIED = "carried.json"


def share_resume(lease_dir: Path, report: Path) -> None:
    """On the controller: the report a resumed run continues from, for every worker."""
    shutil.copyfile(report, lease_dir / RESUME)


def shared_resume(lease_dir: Path) -> Path | None:
    path = lease_dir / RESUME
    return path if path.exists() else None


def write_carried(config: pytest.Config, nodeids: list[str]) -> None:
    """On a worker: the tests it deselected as carried (every worker finds the same)."""
    info: dict[str, Any] | None = getattr(config, "workerinput", None)
    if not info or LEASE_DIR not in info:
        return
    path = Path(info[LEASE_DIR]) / CARRIED
    tmp = path.with_name(f"{CARRIED}.{info['workerid']}")
    tmp.write_text(json.dumps(nodeids), encoding="utf-8")
    tmp.replace(path)


def read_carried(config: pytest.Config) -> list[str] | None:
    """On the controller: what the workers carried (None until one has collected)."""
    controller = config.pluginmanager.get_plugin("specdecode-xdist")
    lease_dir = getattr(controller, "lease_dir", None)
    if lease_dir is None:
        return None
    try:
        data = json.loads((Path(lease_dir) / CARRIED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return [str(n) for n in data] if isinstance(data, list) else None


def planned_tests(config: pytest.Config) -> dict[str, int] | None:
    """On the controller: per config key, the tests the workers collected (None serially)."""
    controller = config.pluginmanager.get_plugin("specdecode-xdist")
    lease_dir = getattr(controller, "lease_dir", None)
    if lease_dir is None:
        return None
    try:
        groups = json.loads((Path(lease_dir) / GROUPS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    counts: dict[str, int] = {}
    for key in groups.values() if isinstance(groups, dict) else ():
        counts[str(key)] = counts.get(str(key), 0) + 1
    return counts


def write_groups(config: pytest.Config, groups: dict[str, str]) -> None:
    """On a worker: which config each collected test id runs under."""
    info: dict[str, Any] | None = getattr(config, "workerinput", None)
    if not info or LEASE_DIR not in info:
        return
    path = Path(info[LEASE_DIR]) / GROUPS
    tmp = path.with_name(f"{GROUPS}.{info['workerid']}")
    tmp.write_text(json.dumps(groups), encoding="utf-8")
    tmp.replace(path)  # every worker writes the same content; atomically
