"""Helpers for the service tests (the ``sshd`` fixture lives in tests/conftest.py)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from pytest_specdecode.config.dialects import get_dialect
from pytest_specdecode.config.settings import Settings
from pytest_specdecode.config.spec import SpecConfig
from pytest_specdecode.output import redact
from pytest_specdecode.output.progress import Progress
from pytest_specdecode.processes.children import free_port
from pytest_specdecode.service.checks import ServerChecks
from pytest_specdecode.service.local import group_running

from ..conftest import SIM, SSHD, dflash_flags, sim_timing

__all__ = ["SSHD", "dialect_verify", "free_port", "pid_gone", "server_checks", "sim_argv"]


def sim_argv(port: int, *extra: str, budget: int = 8, window: int = 2048) -> tuple[str, ...]:
    """The simulator's command line on 127.0.0.1:``port`` with a DFLASH config."""
    return (
        *SIM,
        *("--host", "127.0.0.1", "--port", str(port)),
        *dflash_flags(budget, window),
        *sim_timing(load=0.5, warmup=0.5),
        *extra,
    )


def server_checks(settings: Settings, url: str) -> ServerChecks:
    """The plugin's checks of the server at ``url`` (sglang dialect), as the session builds them."""
    return ServerChecks(
        settings,
        get_dialect("sglang"),
        url,
        progress=Progress(None, isatty=False),
        redactor=redact.for_settings(settings),
    )


def dialect_verify(budget: int = 8, window: int = 2048) -> Callable[[Mapping[str, Any]], Any]:
    """The sglang dialect's verification of a DFLASH config, as the plugin does it."""
    config = SpecConfig(algorithm="DFLASH", budget=budget, window=window, draft_model="d")
    dialect = get_dialect("sglang")

    def verify(info: Mapping[str, Any]) -> Any:
        return dialect.verify(config, info)

    return verify


def pid_gone(pid: int, timeout: float = 5.0) -> bool:
    """Whether process group ``pid`` has no running member within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while group_running(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True
