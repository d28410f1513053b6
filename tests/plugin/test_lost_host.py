"""A host that refuses SSH, or runs out of CUDA memory at every start, hands the sweep
to the next host, over real SSH (no xdist).

The first host is a loopback port nobody listens on; the second is the test
sshd, where the user's reconfigure script starts the simulator. The config is
tried twice on the first (connection refused is transient), then runs on the
second; the report says where it ran and why it moved.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_specdecode.processes.children import free_port

from ..conftest import SSHD
from ..distributed.test_multihost import stop_simulators, write_script


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    stop_simulators(tmp_path)


def script_run(sshd: SSHD, hosts: list[str], script: Path, port: int) -> list[str]:
    """The options of a script-mode run over ``hosts`` through the test's sshd."""
    return [
        "-p", "no:cacheprovider", *(f"--dflash-host={h}" for h in hosts),
        f"--dflash-ssh-user={sshd.user}", f"--dflash-ssh-key={sshd.client_key}",
        "--dflash-ssh-accept-new-host-key",
        f"--dflash-restart-cmd={script} {{budget}} {{window}}",
        f"--dflash-port={port}", "--dflash-ready-timeout=60", "--dflash-report=report.json",
        "--dflash-start-retry-pause=0.1",
    ]  # fmt: skip


def test_a_host_refusing_ssh_hands_its_config_to_the_next(
    pytester: pytest.Pytester, sshd: SSHD, remote: Path
) -> None:
    port = free_port()
    script = write_script(remote, port, load=0.2)
    pytester.makepyfile(
        test_moved="""
        import pytest

        @pytest.mark.dflash(budget=4, window=1024)
        def test_server(dflash_service):
            assert dflash_service.server_info["speculative_num_draft_tokens"] == 4
        """
    )
    dead = f"127.0.0.1:{free_port()}"
    live = f"127.0.0.2:{sshd.port}"
    result = pytester.runpytest("-v", *script_run(sshd, [dead, live], script, port))
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"*host {dead} lost: host {dead} cannot start config*refused*"])
    assert (remote / "applied.txt").read_text() == "127.0.0.2 4 1024\n"
    (config,) = json.loads((pytester.path / "report.json").read_text())["configs"]
    service = config["service"]
    assert service["host"] == live
    assert service["base_url"] == f"http://127.0.0.2:{port}"
    (move,) = service["moves"]
    assert (move["from"], move["to"]) == (dead, live)
    assert "refused" in move["reason"]
    tried = [(a["host"], a["kind"]) for a in service["start_attempts"]]
    assert tried == [(dead, "ssh-unreachable"), (dead, "ssh-unreachable")]


# $1 budget, $2 window. Starts the simulator on the address it was reached at and waits
# until it is ready (exit 0) or has exited (exit 1, its log on stdout), as a reconfigure
# script may. On 127.0.0.1 every start is a first start (a new state file each time), so
# it runs out of CUDA memory at start-up each time; 127.0.0.2 starts cleanly.
WAITING = """#!/bin/bash
dir={dir}
host=$(echo "$SSH_CONNECTION" | cut -d' ' -f3)
pidfile="$dir/sim-$host.pid"
fault=()
if [ "$host" = 127.0.0.1 ]; then
    fault=(--sim-fault oom-on-first-start --sim-state-file "$dir/state-$(date +%s%N)")
fi
echo "$host $1 $2" >> "$dir/applied.txt"
setsid {python} -m pytest_specdecode.sim --host "$host" --port {port} \\
    --speculative-algorithm DFLASH --speculative-draft-model-path d \\
    --speculative-num-draft-tokens "$1" --speculative-draft-window-size "$2" \\
    --sim-load-seconds 0.1 --sim-warmup-seconds 0.1 --sim-time-scale 0.05 "${{fault[@]}}" \\
    > "$dir/sim-$host.log" 2>&1 < /dev/null &
pid=$!
echo $pid > "$pidfile"
until grep -q "fired up" "$dir/sim-$host.log"; do
    if ! kill -0 $pid 2>/dev/null; then cat "$dir/sim-$host.log"; exit 1; fi
    sleep 0.05
done
"""


def test_a_host_out_of_cuda_memory_twice_hands_its_config_to_the_next(
    pytester: pytest.Pytester, sshd: SSHD, remote: Path
) -> None:
    port = free_port()
    script = remote / "reconfig.sh"
    script.write_text(WAITING.format(dir=shlex.quote(str(remote)),
                                     python=shlex.quote(sys.executable), port=port))  # fmt: skip
    script.chmod(0o755)
    pytester.makepyfile(
        test_moved="""
        def test_server(dflash_service):
            assert dflash_service.server_info["speculative_num_draft_tokens"] == 4
        """
    )
    down, live = f"127.0.0.1:{sshd.port}", f"127.0.0.2:{sshd.port}"
    config = "--dflash-config=budget=4,window=1024"
    result = pytester.runpytest(config, *script_run(sshd, [down, live], script, port))
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [f"dflash moved: DFLASH budget=4 window=1024: {down} -> {live} (host {down} cannot "
         "start config * (CUDA out of memory at start-up, 2 attempts): *"]
    )  # fmt: skip
    result.stdout.fnmatch_lines(  # the starts failed there, not where the config ran
        [f"dflash retried: DFLASH budget=4 window=1024: 2 failed start(s) (CUDA out of memory "
         f"at start-up) on {down}"]
    )  # fmt: skip
    applied = (remote / "applied.txt").read_text().splitlines()
    assert applied == ["127.0.0.1 4 1024", "127.0.0.1 4 1024", "127.0.0.2 4 1024"]
    (config,) = json.loads((pytester.path / "report.json").read_text())["configs"]
    service = config["service"]
    assert service["host"] == live
    (move,) = service["moves"]
    assert (move["from"], move["to"]) == (down, live)
    assert "CUDA out of memory" in move["reason"]
    tried = [(a["host"], a["kind"]) for a in service["start_attempts"]]
    assert tried == [(down, "cuda-oom"), (down, "cuda-oom")]
