"""``--dflash-search`` with ``-n 2`` and two loopback hosts (real sshd, script mode).

Each worker holds its host alone (two workers, two hosts), so the xdist
scheduler asks the search for one config per host at a time, the throughput
case is measured by the plugin's load client (pytest-benchmark is off under
xdist) and each finished config's objective is told back; the configs never
visited skip with the search's reason.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

# Loaded before pytester's in-process run: numpy (under optuna) cannot be imported twice.
import pytest_specdecode.search.optimizer  # noqa: F401
from pytest_specdecode.processes.children import free_port

from ..conftest import SSHD
from .test_multihost import RECONFIG, stop_simulators, write_script

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


def search_args(sshd: SSHD, script: Path, port: int, *hosts: str) -> list[str]:
    return [
        "-v", "-rs", "-n", "2", "-p", "no:randomly", "-p", "no:cacheprovider",
        *(f"--dflash-host={host}" for host in hosts),
        f"--dflash-ssh-user={sshd.user}", f"--dflash-ssh-key={sshd.client_key}",
        "--dflash-ssh-accept-new-host-key",
        f"--dflash-restart-cmd={script} {{budget}} {{window}}",
        f"--dflash-port={port}", "--dflash-ready-timeout=60", "--dflash-report=report.json",
        "--dflash-start-retry-pause=0.1", "--dflash-rounds=1",
        "--dflash-search=budget=2,4,8;window=1024,2048", "--dflash-search-restarts=4",
        "--dflash-search-seed=0",
    ]  # fmt: skip


@pytest.fixture
def two_hosts(pytester: pytest.Pytester, sshd: SSHD, remote: Path) -> list[str]:
    """The search's arguments over two loopback hosts (one sshd) and its test file."""
    port = free_port()
    script = write_script(remote, port, load=0.2)
    pytester.makepyfile(test_search=TESTS)
    hosts = [f"127.0.0.1:{sshd.port}", f"127.0.0.2:{sshd.port}"]
    return search_args(sshd, script, port, *hosts)


@pytest.mark.slow
def test_a_search_under_n_2_asks_one_config_per_host_at_a_time(
    pytester: pytest.Pytester, remote: Path, two_hosts: list[str]
) -> None:
    result = pytester.runpytest(*two_hosts)
    result.assert_outcomes(passed=4, skipped=2)
    result.stdout.fnmatch_lines(
        ["dflash: --dflash-search over 2 hosts: one config per host at a time*",
         "*SKIPPED*not visited by the search (best so far: DFLASH budget=*, predicted *"]
    )  # fmt: skip
    data = json.loads((pytester.path / "report.json").read_text())
    search = data["search"]
    visited = search["visited"]
    assert len(visited) == 4
    assert search["space_size"] == 6
    assert all(v["feasible"] and v["objective"] > 0 for v in visited), visited
    assert search["best"]["label"] in {v["label"] for v in visited}
    assert search["stopped"].startswith("restart budget spent")
    # At most 4 servers started, each config once, on both hosts; a host's script stops
    # its previous simulator before it starts the next (one config per host at a time).
    applied = (remote / "applied.txt").read_text().splitlines()
    assert len(applied) == 4, applied
    assert {line.split()[0] for line in applied} == {"127.0.0.1", "127.0.0.2"}
    started = sorted(f"DFLASH budget={b} window={w}" for _, b, w in map(str.split, applied))
    assert started == sorted(v["label"] for v in visited)
    # The figures are the plugin's load client's: pytest-benchmark is off under xdist.
    for config in data["configs"]:
        for case in config.get("throughput") or []:
            assert "off under pytest-xdist" in case["metrics"]["pytest_benchmark"]


# The first start on each host waits (up to 30 s) until the other host's has begun: two
# starts at once are then certain when the search runs two configs at once, and cannot
# happen when it runs one at a time.
BARRIER = """echo "$host $1 $2" >> "$dir/applied.txt"
for _ in $(seq 600); do [ "$(wc -l < "$dir/applied.txt")" -ge 2 ] && break; sleep 0.05; done
"""


@pytest.mark.slow
def test_a_search_by_time_under_n_2_starts_two_configs_at_once(
    pytester: pytest.Pytester, sshd: SSHD, remote: Path
) -> None:
    port = free_port()
    script = write_script(remote, port, load=0.2)
    text = script.read_text()
    line = 'echo "$host $1 $2" >> "$dir/applied.txt"\n'
    assert line in RECONFIG
    script.write_text(text.replace(line, BARRIER))
    pytester.makepyfile(test_search=TESTS)
    hosts = [f"127.0.0.1:{sshd.port}", f"127.0.0.2:{sshd.port}"]
    args = [a for a in search_args(sshd, script, port, *hosts) if "restarts" not in a]
    result = pytester.runpytest(*args, "--dflash-search-budget=10m")
    result.assert_outcomes(passed=6)
    data = json.loads((pytester.path / "report.json").read_text())
    search = data["search"]
    assert search["budget_seconds"] == 600.0
    assert search["stopped"] == "every config of the space visited"
    assert all(v["seconds"] > 0 for v in search["visited"]), search["visited"]
    starts = sorted(
        (c["service"]["started_at"], c["service"]["ready_at"], c["service"]["host"], c["label"])
        for c in data["configs"]
    )
    assert len(starts) == 6
    overlapping = [
        (a[3], b[3])
        for n, a in enumerate(starts)
        for b in starts[n + 1 :]
        if b[0] < a[1] and a[2] != b[2]  # b began before a was ready, on the other host
    ]
    assert overlapping, starts


@pytest.mark.slow
def test_a_resumed_search_under_n_2_starts_only_new_configs(
    pytester: pytest.Pytester, remote: Path, two_hosts: list[str]
) -> None:
    args = two_hosts
    first = pytester.runpytest(*args, "--dflash-search-restarts=2")
    first.assert_outcomes(passed=2, skipped=4)
    again = pytester.runpytest(*args, "--dflash-resume=report.json")
    again.assert_outcomes(passed=2, skipped=2)
    search = json.loads((pytester.path / "report.json").read_text())["search"]
    carried = [v["label"] for v in search["visited"] if v.get("carried")]
    new = [v["label"] for v in search["visited"] if not v.get("carried")]
    assert len(carried) == 2
    assert len(new) == 2
    assert not set(carried) & set(new)
    applied = (remote / "applied.txt").read_text().splitlines()
    assert len(applied) == 4, applied  # the carried configs were not started again
