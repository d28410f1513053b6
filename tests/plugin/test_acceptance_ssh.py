"""Acceptance: script control over a real sshd, through the plugin.

The user's reconfigure script (written here, run by bash over SSH on this
machine) restarts the simulator in the background with the config's values;
the readiness gate must then verify each config. A script that fails errors
the tests of its config with one line, and the next config still runs.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_specdecode.processes.children import free_port

from ..conftest import SSHD

# $1 budget, $2 window. Refuses budget 5 the way a real script refuses a
# config its host cannot run; otherwise stops the previous simulator (its whole
# session) and starts the new one detached, writing its pid for the cleanup.
RECONFIG = """#!/bin/bash
set -e
dir={dir}
echo "reconfigure: budget=$1 window=$2"
if [ "$1" = 5 ]; then
    echo "budget $1 is not supported on this host" >&2
    exit 3
fi
if [ -f "$dir/sim.pid" ]; then
    old=$(cat "$dir/sim.pid")
    kill -TERM -- "-$old" 2>/dev/null || true
    # wait until it stopped running (an unreaped zombie does not count)
    for _ in $(seq 200); do
        [ -e "/proc/$old" ] && ! grep -q ') Z' "/proc/$old/stat" || break
        sleep 0.05
    done
fi
echo "$1 $2" >> "$dir/applied.txt"
setsid {python} -m pytest_specdecode.sim --host 127.0.0.1 --port {port} \\
    --speculative-algorithm DFLASH --speculative-draft-model-path d \\
    --speculative-num-draft-tokens "$1" --speculative-draft-window-size "$2" \\
    --sim-load-seconds 0.3 --sim-warmup-seconds 0.3 --sim-time-scale 0 \\
    > "$dir/sim.log" 2>&1 < /dev/null &
echo $! > "$dir/sim.pid"
"""

TESTS = """
import pytest

@pytest.mark.dflash(budget=8, window=2048)
def test_first(dflash_service, dflash_client):
    assert dflash_service.server_info["speculative_num_draft_tokens"] == 8
    assert dflash_client.generate("hi", max_new_tokens=4).completion_tokens == 4

@pytest.mark.dflash(budget=5, window=2048)
def test_refused(dflash_service): pass

@pytest.mark.dflash(budget=5, window=2048)
def test_refused_too(dflash_service): pass

@pytest.mark.dflash(budget=16, window=1024)
def test_second(dflash_service):
    assert dflash_service.server_info["speculative_num_draft_tokens"] == 16
    assert dflash_service.server_info["speculative_draft_window_size"] == 1024
"""


@dataclass(frozen=True)
class Remote:
    """The "remote" side: the script, the simulator's HTTP port, the script's files."""

    script: Path
    port: int
    dir: Path


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[Remote]:
    """The reconfigure script; afterwards kills the simulator it left running."""
    port = free_port()
    script = tmp_path / "reconfig.sh"
    script.write_text(
        RECONFIG.format(
            dir=shlex.quote(str(tmp_path)), python=shlex.quote(sys.executable), port=port
        )
    )
    script.chmod(0o755)
    yield Remote(script, port, tmp_path)
    pid_file = tmp_path / "sim.pid"
    if pid_file.exists():
        pid = int(pid_file.read_text())
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + 5.0
        while _running(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        if _running(pid):
            os.killpg(pid, signal.SIGKILL)


def ssh_args(sshd: SSHD, remote: Remote, *extra: str) -> list[str]:
    return [
        "-p",
        "no:cacheprovider",
        "-v",
        f"--dflash-host={sshd.host}",
        f"--dflash-ssh-port={sshd.port}",
        f"--dflash-ssh-user={sshd.user}",
        f"--dflash-ssh-key={sshd.client_key}",
        f"--dflash-restart-cmd={remote.script} {{budget}} {{window}}",
        f"--dflash-port={remote.port}",
        "--dflash-ready-timeout=30",
        *extra,
    ]


@pytest.mark.slow
def test_script_mode_restarts_per_config_and_a_failing_script_errors_its_tests(
    pytester: pytest.Pytester, sshd: SSHD, remote: Remote
) -> None:
    pytester.makepyfile(test_remote=TESTS)
    # pytester points HOME at its own directory: no ~/.ssh/known_hosts knows this sshd.
    result = pytester.runpytest_subprocess(
        *ssh_args(sshd, remote, "--dflash-ssh-accept-new-host-key", "--dflash-draft-model=d")
    )
    result.assert_outcomes(passed=2, errors=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [f"dflash: target 127.0.0.1 (http://127.0.0.1:{remote.port}), control script*"]
    )
    result.stdout.fnmatch_lines(
        [
            "*test_first PASSED*",
            "*test_refused ERROR*",
            "*test_refused_too ERROR*",
            "*test_second PASSED*",
        ]
    )
    failure = (
        f"reconfigure script '{remote.script} 5 2048' on {sshd.user}@127.0.0.1:{sshd.port} "
        "exited with status 3 after *s for config 'DFLASH budget=5 window=2048': "
        "reconfigure: budget=5 window=2048 | budget 5 is not supported on this host; "
        "run it there by hand to see why"
    )
    result.stdout.fnmatch_lines(["*ERROR at setup of test_refused *", failure])
    result.stdout.fnmatch_lines(["*ERROR at setup of test_refused_too *", failure])
    out = result.stdout.str()
    assert "Traceback" not in out
    assert "INTERNALERROR" not in out
    # Exactly one restart per config that the script accepted, in config order.
    assert (remote.dir / "applied.txt").read_text() == "8 2048\n16 1024\n"
    assert "fired up and ready to roll" in (remote.dir / "sim.log").read_text()


@pytest.mark.slow
def test_unknown_host_key_is_refused_with_one_line(
    pytester: pytest.Pytester, sshd: SSHD, remote: Remote
) -> None:
    pytester.makepyfile(test_remote=TESTS)
    result = pytester.runpytest_subprocess(*ssh_args(sshd, remote), "-k", "first or second")
    result.assert_outcomes(errors=2)
    line = (
        f"SSH host key of {sshd.user}@127.0.0.1:{sshd.port} is unknown (ssh-ed25519 *) and "
        "unknown keys are refused: check the fingerprint and add it to ~/.ssh/known_hosts*"
        "or opt in with --dflash-ssh-accept-new-host-key to trust it for this session"
    )
    result.stdout.fnmatch_lines(
        ["*ERROR at setup of test_first *", line, "*ERROR at setup of test_second *", line]
    )
    out = result.stdout.str()
    assert "Traceback" not in out
    assert "INTERNALERROR" not in out
    assert not (remote.dir / "applied.txt").exists()
    assert not (pytester.path / ".ssh" / "known_hosts").exists()


def test_script_mode_does_not_assume_the_bundled_simulator(
    pytester: pytest.Pytester, sshd: SSHD, remote: Remote
) -> None:
    pytester.makepyfile(test_remote=TESTS)
    args = ssh_args(sshd, remote, "--dflash-ssh-accept-new-host-key")
    result = pytester.runpytest_subprocess(*args, "-k", "first")
    result.assert_outcomes(passed=1)
    assert "using the bundled SGLang simulator" not in result.stdout.str()
