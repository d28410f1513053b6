from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ..conftest import sim_launch

FAST_SIM = sim_launch(load=0.5, warmup=0.3, scale=0.05)


@pytest.fixture
def server_logs(pytester: pytest.Pytester) -> Callable[[], list[Path]]:
    """Every server log of the runpytest_subprocess runs so far, workers' included."""

    def find() -> list[Path]:
        found = pytester.path.glob("runpytest-[0-9]*/**/dflash-logs/server-*.log")
        return sorted(p for p in found if "current" not in str(p))

    return find


@pytest.fixture
def sim_ini(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini(
        f"[pytest]\ndflash_launch = {FAST_SIM}\ndflash_ready_timeout = 60\n"
        "dflash_report = report.json\n"
    )
    return pytester
