from __future__ import annotations

import sys

import pytest

# The bundled simulator, fast: short load and warm-up phases, no modelled delay.
FAST_SIM = (
    f"{sys.executable} -m pytest_specdecode.sim --sim-load-seconds 0.3 "
    "--sim-warmup-seconds 0.3 --sim-time-scale 0"
)


@pytest.fixture
def sim_ini(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester project whose ini launches the fast simulator."""
    pytester.makeini(
        f"[pytest]\ndflash_launch = {FAST_SIM}\ndflash_ready_timeout = 60\n"
        "dflash_report = report.json\n"
    )
    return pytester
