"""Script mode over a real sshd: the user's reconfigure script restarts the
simulator on the "remote" side (this machine), then the same gate passes."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_specdecode.processes.children import free_port
from pytest_specdecode.service import ssh
from pytest_specdecode.service.base import LaunchSpec, ScriptFailed, SSHError
from pytest_specdecode.service.readiness import VERIFIED, wait_until_ready
from pytest_specdecode.service.script import ScriptController

from .conftest import SSHD, dialect_verify, pid_gone, sim_argv

# $1 budget, $2 window. Stops the previous simulator (its whole session) and
# starts the new one detached, as a typical reconfigure script on a GPU box does.
RECONFIG = """#!/bin/bash
set -e
dir={dir}
if [ -f "$dir/sim.pid" ]; then
    old=$(cat "$dir/sim.pid")
    kill -TERM -- "-$old" 2>/dev/null || true
    # wait until it stopped running (an unreaped zombie does not count)
    for _ in $(seq 200); do
        [ -e "/proc/$old" ] && ! grep -q ') Z' "/proc/$old/stat" || break
        sleep 0.05
    done
fi
setsid {argv} --speculative-num-draft-tokens "$1" --speculative-draft-window-size "$2" \\
    > "$dir/sim.log" 2>&1 < /dev/null &
echo $! > "$dir/sim.pid"
echo "restarted with budget=$1 window=$2"
"""


@pytest.fixture
def reconfig(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    port = free_port()
    # sim_argv ends with the config flags; the script supplies its own.
    base = sim_argv(port)
    cut = base.index("--speculative-num-draft-tokens")
    argv = " ".join(shlex.quote(w) for w in base[:cut] + base[cut + 4 :])
    script = tmp_path / "reconfig.sh"
    script.write_text(RECONFIG.format(dir=shlex.quote(str(tmp_path)), argv=argv))
    script.chmod(0o755)
    yield script, port
    pid_file = tmp_path / "sim.pid"
    if pid_file.exists():
        pid = int(pid_file.read_text())
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
        if not pid_gone(pid, timeout=5.0):
            os.killpg(pid, signal.SIGKILL)


def _controller(sshd: SSHD, tmp_path: Path, **kwargs: object) -> ScriptController:
    return ScriptController(
        ssh.connection_factory(sshd.target()),
        where=ssh.describe(sshd.target()),
        **kwargs,  # type: ignore[arg-type]
    )


def test_script_restarts_the_simulator_and_the_gate_passes_for_each_config(
    sshd: SSHD, reconfig: tuple[Path, int], tmp_path: Path
) -> None:
    script, port = reconfig
    controller = _controller(sshd, tmp_path, logs_command=f"tail -n {{tail}} {tmp_path}/sim.log")
    try:
        for budget in (8, 16):
            label = f"DFLASH budget={budget} window=2048"
            command = f"{shlex.quote(str(script))} {budget} 2048"
            identity = controller.apply(LaunchSpec(script=command, label=label))
            assert identity.kind == "script"
            assert controller.output == f"restarted with budget={budget} window=2048\n"
            ready = wait_until_ready(
                f"http://127.0.0.1:{port}",
                controller=controller,
                verify=dialect_verify(budget=budget),
                label=label,
                timeout=30.0,
                poll_interval=0.05,
            )
            assert ready.phases[-1].phase == VERIFIED
            assert ready.server_info["speculative_num_draft_tokens"] == budget
        assert "fired up and ready to roll" in controller.logs(5)
    finally:
        controller.stop()
        controller.stop()


def test_failing_script_is_a_one_line_error_with_its_output(sshd: SSHD, tmp_path: Path) -> None:
    script = tmp_path / "broken.sh"
    script.write_text(
        "#!/bin/sh\necho 'stopping sglang'\necho \"budget $1 is not supported here\" >&2\nexit 3\n"
    )
    script.chmod(0o755)
    controller = _controller(sshd, tmp_path)
    try:
        with pytest.raises(ScriptFailed) as info:
            controller.apply(
                LaunchSpec(script=f"{shlex.quote(str(script))} 99", label="DFLASH budget=99")
            )
    finally:
        controller.stop()
    err = info.value
    summary = err.summary
    assert err.exit_status == 3
    assert "exited with status 3" in summary
    assert "budget 99 is not supported here" in summary
    assert "stopping sglang" in summary
    assert f"{sshd.user}@127.0.0.1:{sshd.port}" in summary
    assert "'DFLASH budget=99'" in summary
    assert "budget 99 is not supported here" in err.output
    assert controller.identity() is None


# Freezes the sshd process relaying this session: from then on nothing, not
# even the remote timeout's exit status, reaches the client (a network stall).
STALL = """#!/bin/sh
p=$$
while [ "$p" -gt 1 ]; do
    case "$(cat /proc/$p/comm)" in
        sshd*) echo "$p" > {pid_file}; kill -STOP "$p"; break ;;
    esac
    p=$(cut -d' ' -f4 /proc/$p/stat)
done
sleep 60
"""


def test_a_stalled_network_during_the_script_is_an_error_within_its_deadline(
    sshd: SSHD, tmp_path: Path
) -> None:
    pid_file = tmp_path / "sshd.pid"
    script = tmp_path / "stall.sh"
    script.write_text(STALL.format(pid_file=shlex.quote(str(pid_file))))
    script.chmod(0o755)
    controller = _controller(sshd, tmp_path, timeout=0.5, answer_margin=0.5)
    started = time.monotonic()
    try:
        with pytest.raises(SSHError) as info:
            controller.apply(LaunchSpec(script=shlex.quote(str(script)), label="DFLASH budget=8"))
        elapsed = time.monotonic() - started
    finally:
        controller.stop()
        if pid_file.exists():  # the frozen sshd session: let it go
            stalled = int(pid_file.read_text())
            with contextlib.suppress(ProcessLookupError):
                os.kill(stalled, signal.SIGCONT)
                os.kill(stalled, signal.SIGKILL)
    assert pid_file.exists(), "the script did not find its sshd"
    # 0.5 s limit + 1 s remote kill + 0.5 s margin; a stalled session never ends, so a
    # bound no load reaches still tells the two apart.
    assert elapsed < 30
    message = str(info.value)
    assert "\n" not in message
    assert info.value.reason == "stalled"
    assert f"no answer from {sshd.user}@127.0.0.1:{sshd.port} within 2 s" in message
    assert "the network or the host stalled" in message


def test_the_script_deadline_is_the_ready_timeout() -> None:
    from pytest_specdecode.config.settings import Host, Settings
    from pytest_specdecode.service.controllers import build_controller

    settings = Settings(
        control="script", hosts=(Host("gpu"),), restart_cmd="/opt/re {budget}", ready_timeout=20
    )
    controller = build_controller(settings, Path("."), None, None)
    assert isinstance(controller, ScriptController)
    assert controller.timeout == 20
