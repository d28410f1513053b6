"""--sim-restart-noise: a speed factor per server start; bounded, seeded, counted across runs."""

from __future__ import annotations

import re
import subprocess
import threading
from pathlib import Path
from typing import Any

import requests
from hypothesis import given
from hypothesis import strategies as st

from pytest_specdecode.sim.restarts import next_start, speed_factor

from ..conftest import SIM
from .conftest import FAST


@given(
    seed=st.integers(min_value=0, max_value=2**31),
    start=st.integers(min_value=1, max_value=10**6),
    noise=st.floats(min_value=0.0, max_value=0.99, allow_nan=False),
)
def test_the_factor_is_within_the_noise_and_the_same_for_the_same_seed_and_start(
    seed: int, start: int, noise: float
) -> None:
    factor = speed_factor(seed, start, noise)
    assert 1.0 - noise <= factor <= 1.0 + noise
    assert factor == speed_factor(seed, start, noise)


def test_factors_differ_across_starts_and_seeds_and_spread_over_the_range() -> None:
    factors = [speed_factor(0, start, 0.06) for start in range(1, 201)]
    assert len(set(factors)) == len(factors)
    assert min(factors) < 0.96  # uses the range, not a corner
    assert max(factors) > 1.04
    assert speed_factor(1, 1, 0.06) != speed_factor(0, 1, 0.06)
    assert speed_factor(5, 3, 0.0) == 1.0


def test_the_start_count_survives_and_parallel_starts_never_share_a_number(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "state" / "starts")
    assert next_start(path) == 1
    assert next_start(path) == 2
    seen: list[int] = []
    threads = [threading.Thread(target=lambda: seen.append(next_start(path))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(seen) == list(range(3, 11))
    Path(path).write_text("garbage\n")
    assert next_start(path) == 1  # an unreadable count starts again rather than crashing


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SIM, *args], capture_output=True, text=True, timeout=60, check=False)


FACTOR = re.compile(r"start (\d+) runs at speed factor ([0-9.]+)")


def test_each_process_start_draws_its_own_factor_from_the_count_file(tmp_path: Path) -> None:
    # crash-on-start ends each process right after loading: the start is counted first.
    count = str(tmp_path / "starts")
    args = (*FAST, "--sim-restart-noise", "0.06", "--sim-start-count-file", count)
    seen = []
    for _ in range(2):
        done = run(*args, "--sim-fault", "crash-on-start")
        assert done.returncode == 1
        found = FACTOR.search(done.stderr)
        assert found, done.stderr
        seen.append((int(found[1]), float(found[2])))
    assert [s for s, _ in seen] == [1, 2]
    assert seen[0][1] != seen[1][1]
    assert seen[0][1] == round(speed_factor(0, 1, 0.06), 4)
    assert all(0.94 <= f <= 1.06 for _, f in seen)


def test_restart_noise_needs_a_count_file_and_a_noise_below_one() -> None:
    missing = run(*FAST, "--sim-restart-noise", "0.06")
    assert missing.returncode == 2
    assert "--sim-restart-noise needs --sim-start-count-file PATH" in missing.stderr
    bad = run(*FAST, "--sim-restart-noise", "1.5", "--sim-start-count-file", "x")
    assert bad.returncode == 2
    assert "must be >= 0 and < 1" in bad.stderr


def test_server_info_shows_the_start_factor(sim_factory: Any, tmp_path: Path) -> None:
    count = tmp_path / "starts"
    count.write_text("6\n")  # the seventh start
    sim = sim_factory("--sim-restart-noise", "0.1", "--sim-start-count-file", str(count))
    info = requests.get(sim.url + "/server_info", timeout=5).json()
    assert info["sim_speed_factor"] == speed_factor(0, 7, 0.1)
    assert count.read_text().strip() == "7"
