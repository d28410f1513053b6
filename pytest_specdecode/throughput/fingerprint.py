"""Where a saved run was measured: machine, dflash host, launch line, simulated.

pytest-benchmark names its storage folder by OS, Python and bitness only, so a
laptop, the simulator and two GPU hosts all save into one folder. Each
benchmark we save carries :func:`of_run` in its ``extra_info`` (key
:data:`KEY`); the compare gate counts a saved run as noise across restarts of
*this* setup only when :func:`left_out` finds nothing that differs, and names
the reason for every run it leaves out.

The launch line is kept as a digest of its masked text: enough to tell two
launches apart, never a secret, and short in a saved file.
"""

from __future__ import annotations

import hashlib
import os
import platform
from collections.abc import Mapping
from typing import Any

from pytest_specdecode import statefiles
from pytest_specdecode.config.settings import Settings
from pytest_specdecode.output import redact

KEY = "fingerprint"
"""The ``extra_info`` key of a saved benchmark's fingerprint."""

FIELDS = ("simulated", "machine", "host", "launch")
"""What must match, in the order a reason is given for the first that does not."""

NO_FINGERPRINT = "no fingerprint"


def cpu() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` knows."""
    text = statefiles.read_text("/proc/cpuinfo") or ""
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("model name", "Hardware", "cpu model") and value.strip():
            return value.strip()
    return platform.processor() or platform.machine() or "?"


def machine() -> str:
    """This machine: its node name, CPU model and CPU count."""
    return f"{platform.node() or '?'} ({cpu()}, {os.cpu_count() or '?'} CPUs)"


def launch_digest(settings: Settings) -> str:
    """A digest of how the server is started here (control, launch or restart command,
    unit), masked first: a secret on the line never reaches a saved file."""
    parts = (settings.control, settings.launch, settings.restart_cmd, settings.unit)
    line = "\0".join(part or "" for part in parts)
    masked = redact.for_settings(settings).text(line)
    return hashlib.sha256(masked.encode("utf-8")).hexdigest()[:16]


def of_run(settings: Settings, *, simulated: bool) -> dict[str, Any]:
    """This run's fingerprint as a saved benchmark holds it."""
    hosts = ", ".join(str(h) for h in settings.hosts) or "localhost"
    return {
        "simulated": simulated,
        "machine": machine(),
        "host": "simulator" if simulated else hosts,
        "launch": launch_digest(settings),
    }


_DIFFER = {
    "machine": "another machine",
    "host": "another dflash host",
    "launch": "another launch line",
}


def left_out(saved: object, current: object) -> str | None:
    """Why a saved run with fingerprint ``saved`` is not noise of a run with ``current``
    (a few words), or None when they match."""
    if not isinstance(current, Mapping):
        return "this run has no fingerprint"
    if not isinstance(saved, Mapping):
        return NO_FINGERPRINT
    for field in FIELDS:
        value = saved.get(field)
        if field == "simulated":
            if not isinstance(value, bool):
                return NO_FINGERPRINT
            if value != current.get(field):
                return "simulated" if value else "not simulated"
        elif not isinstance(value, str):
            return NO_FINGERPRINT
        elif value != current.get(field):
            return _DIFFER[field]
    return None
