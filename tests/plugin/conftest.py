from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ..conftest import dflash_flags, run_sim, sim_launch

# The bundled simulator, fast: short load and warm-up phases, no modelled delay.
FAST_SIM = sim_launch()

# A test file measuring the run's throughput cases (``--dflash-contexts`` etc. choose them).
THROUGHPUT = """
import pytest

@pytest.mark.throughput
def test_throughput(dflash_case, dflash_throughput, benchmark):
    dflash_throughput.run(dflash_case, benchmark)
"""


def write_sim_ini(pytester: pytest.Pytester, sim_args: str = "") -> None:
    """An ini that launches the fast simulator (plus ``sim_args``) for the plugin."""
    pytester.makeini(
        f"[pytest]\ndflash_launch = {FAST_SIM} {sim_args}\ndflash_ready_timeout = 60\n"
        "dflash_report = report.json\n"
        # These runs test the plugin, not this machine: the client's calibration is its
        # own tests' (tests/plugin/test_policy_e2e.py turns it on).
        "dflash_client_calibration = off\n"
    )


@pytest.fixture
def sim_ini(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester project whose ini launches the fast simulator."""
    write_sim_ini(pytester)
    return pytester


@pytest.fixture
def sim_project() -> Callable[[pytest.Pytester, str], None]:
    """``sim_project(pytester, "--sim-quality 0.6")``: the fast simulator with more flags."""
    return write_sim_ini


@pytest.fixture
def live_sim(tmp_path: Path) -> Iterator[int]:
    """A simulator started outside the plugin (budget 8, window 2048); yields its port."""
    flags = dflash_flags(draft="sim/dflash-drafter")
    with run_sim(tmp_path, *flags, healthy="/health") as sim:
        yield sim.port


@pytest.fixture
def throughput_project(
    pytester: pytest.Pytester, sim_project: Callable[[pytest.Pytester, str], None]
) -> pytest.Pytester:
    """A project of :data:`THROUGHPUT` against the fast simulator at a modelled (not zero)
    step time, 10x faster than real: budgets differ in tok/s, and a reply's steps come
    tens of ms apart, so a loaded machine does not read a whole reply at once (TPOT 0,
    which leaves a config out of the verdict)."""
    sim_project(pytester, "--sim-time-scale 0.1")
    pytester.makepyfile(test_tp=THROUGHPUT)
    return pytester
