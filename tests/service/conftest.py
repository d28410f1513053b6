"""Helpers for the service tests (the ``sshd`` fixture lives in tests/conftest.py)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from pytest_specdecode.config.dialects import get_dialect
from pytest_specdecode.config.spec import SpecConfig
from pytest_specdecode.service.local import group_running

from ..conftest import SSHD, free_port

__all__ = ["SSHD", "dialect_verify", "free_port", "pid_gone", "sim_argv"]


def sim_argv(port: int, *extra: str, budget: int = 8, window: int = 2048) -> tuple[str, ...]:
    """The simulator's command line on 127.0.0.1:``port`` with a DFLASH config."""
    return (
        sys.executable,
        "-m",
        "pytest_specdecode.sim",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--speculative-algorithm",
        "DFLASH",
        "--speculative-draft-model-path",
        "d",
        "--speculative-num-draft-tokens",
        str(budget),
        "--speculative-draft-window-size",
        str(window),
        "--sim-load-seconds",
        "0.5",
        "--sim-warmup-seconds",
        "0.5",
        "--sim-time-scale",
        "0",
        *extra,
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
