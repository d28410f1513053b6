"""Several hosts under pytest-xdist: each config restarts once, on one host.

Four loopback addresses (127.0.0.1-4) stand for four GPU hosts: one real sshd
listens on all of them, and the user's reconfigure script (run over SSH)
starts the simulator on the address it was reached at ($SSH_CONNECTION).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_specdecode.processes.children import free_port

from ..conftest import SSHD

HOSTS = [f"127.0.0.{n}" for n in range(1, 5)]

# $1 budget, $2 window. Stops this host's previous simulator, starts the next.
RECONFIG = """#!/bin/bash
set -e
dir={dir}
host=$(echo "$SSH_CONNECTION" | cut -d' ' -f3)
pidfile="$dir/sim-$host.pid"
if [ -f "$pidfile" ]; then
    old=$(cat "$pidfile")
    kill -TERM -- "-$old" 2>/dev/null || true
    for _ in $(seq 200); do
        [ -e "/proc/$old" ] && ! grep -q ') Z' "/proc/$old/stat" || break
        sleep 0.05
    done
fi
echo "$host $1 $2" >> "$dir/applied.txt"
setsid {python} -m pytest_specdecode.sim --host "$host" --port {port} \\
    --speculative-algorithm DFLASH --speculative-draft-model-path d \\
    --speculative-num-draft-tokens "$1" --speculative-draft-window-size "$2" \\
    --sim-load-seconds {load} --sim-warmup-seconds 0.3 --sim-time-scale 0.05 \\
    > "$dir/sim-$host.log" 2>&1 < /dev/null &
echo $! > "$pidfile"
"""

TESTS = """
import pytest

@pytest.mark.parametrize("n", range(2))
def test_server(dflash_service, dflash_config, n):
    info = dflash_service.server_info
    assert info["speculative_num_draft_tokens"] == dflash_config.budget
    assert info["speculative_draft_window_size"] == dflash_config.window
"""


def write_script(directory: Path, port: int, load: float) -> Path:
    script = directory / "reconfig.sh"
    script.write_text(
        RECONFIG.format(
            dir=shlex.quote(str(directory)),
            python=shlex.quote(sys.executable),
            port=port,
            load=load,
        )
    )
    script.chmod(0o755)
    return script


def stop_simulators(directory: Path) -> None:
    for pid_file in directory.glob("sim-*.pid"):
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)


def plugin_args(sshd: SSHD, script: Path, port: int) -> list[str]:
    args = [f"--dflash-host={host}" for host in HOSTS]
    return [
        *args,
        f"--dflash-ssh-port={sshd.port}",
        f"--dflash-ssh-user={sshd.user}",
        f"--dflash-ssh-key={sshd.client_key}",
        "--dflash-ssh-accept-new-host-key",
        f"--dflash-restart-cmd={script} {{budget}} {{window}}",
        f"--dflash-port={port}",
        "--dflash-ready-timeout=60",
        "--dflash-report=report.json",
    ]


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    stop_simulators(tmp_path)


@pytest.mark.slow
def test_each_config_restarts_once_on_one_host(
    pytester: pytest.Pytester, sshd: SSHD, remote: Path
) -> None:
    port = free_port()
    script = write_script(remote, port, load=0.5)
    pytester.makepyfile(test_hosts=TESTS)
    sweep = "--dflash-sweep=budget=4,8;window=1024,2048"
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "4", sweep,
        *plugin_args(sshd, script, port),
    )  # fmt: skip
    result.assert_outcomes(passed=8)
    applied = (remote / "applied.txt").read_text().split("\n")[:-1]
    configs = sorted(line.split(" ", 1)[1] for line in applied)
    assert configs == [
        "4 1024",
        "4 2048",
        "8 1024",
        "8 2048",
    ], applied
    assert len({line.split()[0] for line in applied}) > 1, "configs spread over hosts"
    report = json.loads((pytester.path / "report.json").read_text())
    served = {c["label"]: c["service"]["base_url"] for c in report["configs"]}
    for line in applied:
        host, budget, window = line.split()
        label = f"DFLASH budget={budget} window={window}"
        assert served[label] == f"http://{host}:{port}"
