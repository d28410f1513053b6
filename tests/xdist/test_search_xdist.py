"""``--dflash-search`` with ``-n 2`` and two loopback hosts (real sshd, script mode).

A search chooses each config from the figures of the ones before, and throughput
cases skip under xdist (pytest-benchmark is off there), so the search runs in
the controller, one config at a time, and says so in the header; the first
host refuses SSH, so its config moves to the second, as a sweep's does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

# Loaded before pytester's in-process run: numpy (under optuna) cannot be imported twice.
import pytest_specdecode.search.optimizer  # noqa: F401

from ..conftest import SSHD, free_port
from .test_multihost import stop_simulators, write_script

TESTS = """
import pytest

@pytest.mark.throughput(contexts=[60], concurrency=[1], output_tokens=8)
def test_throughput(dflash_case, dflash_throughput, benchmark):
    dflash_throughput.run(dflash_case, benchmark)
"""


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    stop_simulators(tmp_path)


def test_a_search_under_n_2_runs_serially_and_moves_a_lost_hosts_config(
    pytester: pytest.Pytester, sshd: SSHD, remote: Path
) -> None:
    port = free_port()
    script = write_script(remote, port, load=0.2)
    pytester.makepyfile(test_search=TESTS)
    dead = f"127.0.0.1:{free_port()}"
    live = f"127.0.0.2:{sshd.port}"
    result = pytester.runpytest(
        "-v", "-n", "2", "-p", "no:randomly", "-p", "no:cacheprovider",
        f"--dflash-host={dead}", f"--dflash-host={live}",
        f"--dflash-ssh-user={sshd.user}", f"--dflash-ssh-key={sshd.client_key}",
        "--dflash-ssh-accept-new-host-key",
        f"--dflash-restart-cmd={script} {{budget}} {{window}}",
        f"--dflash-port={port}", "--dflash-ready-timeout=60", "--dflash-report=report.json",
        "--dflash-start-retry-pause=0.1", "--dflash-rounds=1",
        "--dflash-search=budget=2,4,8;window=1024", "--dflash-search-restarts=2",
        "--dflash-search-seed=0",
    )  # fmt: skip
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(
        ["dflash: --dflash-search runs in this process, one config at a time (-n 2 starts no "
         "workers)*", f"*host {dead} lost*"]
    )  # fmt: skip
    data = json.loads((pytester.path / "report.json").read_text())
    visited = data["search"]["visited"]
    assert len(visited) == 2
    assert all(v["feasible"] and v["objective"] > 0 for v in visited)
    applied = (remote / "applied.txt").read_text().splitlines()
    assert [line.split()[0] for line in applied] == ["127.0.0.2", "127.0.0.2"]
    budgets = {line.split()[1] for line in applied}
    assert {f"budget={b}" for b in budgets} == {v["label"].split()[1] for v in visited}
