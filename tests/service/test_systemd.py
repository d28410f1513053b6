"""systemd mode: the drop-in text, its acceptance by systemd-analyze, and the
commands the controller sends over a real SSH session to recording stand-ins
of ``systemctl`` / ``journalctl`` (nothing touches this machine's systemd).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_specdecode.service import ssh
from pytest_specdecode.service.base import LaunchSpec, ServiceStartError
from pytest_specdecode.service.systemd import (
    SystemdController,
    quote_environment,
    quote_exec_word,
    render_dropin,
)

from .conftest import SSHD

UNIT = "sglang-test.service"
ARGV = (
    sys.executable,
    "-m",
    "pytest_specdecode.sim",
    "--speculative-algorithm",
    "DFLASH",
    "--speculative-draft-model-path",
    '/models/my drafter\'s "v2"',
    "--speculative-num-draft-tokens",
    "8",
    "--note",
    "100% $HOME;\\x",
    ";",
)
ENV = {"SGLANG_DDTREE_MAX_TOPK": "4", "NOTE": 'a "quoted" 50% value'}


@pytest.mark.parametrize(
    ("word", "quoted"),
    [
        ("--speculative-num-draft-tokens", "--speculative-num-draft-tokens"),
        ("/usr/bin/python3", "/usr/bin/python3"),
        ("a b", '"a b"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("50%", "50%%"),
        ("$HOME", "$$HOME"),
        ("back\\slash", '"back\\\\slash"'),
        (";", "\\;"),
        ("", '""'),
    ],
)
def test_exec_words_are_quoted_for_systemd(word: str, quoted: str) -> None:
    assert quote_exec_word(word) == quoted


def test_environment_lines_are_quoted_and_names_checked() -> None:
    assert quote_environment("K", 'a "b" 5%') == 'Environment="K=a \\"b\\" 5%%"'
    with pytest.raises(ValueError, match="invalid environment variable name 'A B'"):
        quote_environment("A B", "x")


def test_dropin_replaces_execstart_and_adds_environment() -> None:
    text = render_dropin(["/usr/bin/python3", "-m", "sglang.launch_server"], {"B": "2", "A": "1"})
    lines = text.splitlines()
    assert lines[1:] == [
        "[Service]",
        "ExecStart=",
        "ExecStart=/usr/bin/python3 -m sglang.launch_server",
        'Environment="A=1"',
        'Environment="B=2"',
    ]
    assert lines[0].startswith("#")


SAMPLE_UNIT = f"""\
[Unit]
Description=SGLang server (test sample)
After=network-online.target

[Service]
Type=simple
ExecStart={sys.executable} -m pytest_specdecode.sim --port 30000
Restart=no

[Install]
WantedBy=multi-user.target
"""


def _verify(unit_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(unit_dir / UNIT)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


@pytest.fixture
def unit_dir(tmp_path: Path) -> Path:
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed (Debian package systemd)")
    (tmp_path / UNIT).write_text(SAMPLE_UNIT)
    baseline = _verify(tmp_path)
    assert (baseline.returncode, baseline.stderr) == (0, "")
    return tmp_path


def test_rendered_dropin_passes_systemd_analyze_verify(unit_dir: Path) -> None:
    dropin = unit_dir / f"{UNIT}.d" / "50-specdecode.conf"
    dropin.parent.mkdir()
    dropin.write_text(render_dropin(ARGV, ENV, label="DFLASH budget=8"))
    result = _verify(unit_dir)
    assert (result.returncode, result.stderr) == (0, "")


def test_systemd_analyze_does_read_the_dropin(unit_dir: Path) -> None:
    # Guards the test above: a broken drop-in beside the unit must be noticed.
    dropin = unit_dir / f"{UNIT}.d" / "50-specdecode.conf"
    dropin.parent.mkdir()
    dropin.write_text('[Service]\nExecStart=\nExecStart=/bin/true "unbalanced\n')
    result = _verify(unit_dir)
    assert result.returncode != 0
    assert "50-specdecode.conf" in result.stderr


# -- the controller over SSH, against recording stand-ins --------------------

STAND_IN_SYSTEMCTL = r"""#!/bin/sh
d=$(dirname "$0")
echo "systemctl $*" >> "$d/calls.log"
pid=$(cat "$d/pid"); state=$(cat "$d/state")
if [ "$state" = failed ]; then sub=failed res=exit-code st=1 mp=0
else sub=running res=success st=0 mp=$pid; fi
case "$1" in
  restart)
    if [ -e "$d/fail-restart" ]; then
      echo "Job for $2 failed because the control process exited with error code." >&2
      exit 1
    fi
    [ -e "$d/frozen" ] || echo $((pid + 1)) > "$d/pid" ;;
  is-failed) echo "$state"; [ "$state" = failed ]; exit $? ;;
  show)
    shift
    while [ "$1" = -p ]; do
      case "$2" in
        MainPID) echo "MainPID=$mp" ;;
        ExecMainStartTimestamp) echo "ExecMainStartTimestamp=Sun 2026-11-29 23:00:00 UTC #$pid" ;;
        ActiveState) echo "ActiveState=$state" ;;
        SubState) echo "SubState=$sub" ;;
        Result) echo "Result=$res" ;;
        ExecMainStatus) echo "ExecMainStatus=$st" ;;
      esac
      shift 2
    done ;;
esac
"""

STAND_IN_JOURNALCTL = r"""#!/bin/sh
d=$(dirname "$0")
echo "journalctl $*" >> "$d/calls.log"
echo "Loading weights..."
echo "The server is fired up and ready to roll!"
"""

STAND_IN_SUDO = r"""#!/bin/sh
d=$(dirname "$0")
echo "sudo $*" >> "$d/calls.log"
[ "$1" = -n ] && shift
exec "$@"
"""


@dataclass
class Recorder:
    bin: Path

    def calls(self) -> list[str]:
        log = self.bin / "calls.log"
        return log.read_text().splitlines() if log.exists() else []

    def clear(self) -> None:
        (self.bin / "calls.log").unlink(missing_ok=True)

    def set(self, name: str, value: str | None) -> None:
        path = self.bin / name
        if value is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(value)


@pytest.fixture
def recorder(tmp_path: Path) -> Recorder:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (
        ("systemctl", STAND_IN_SYSTEMCTL),
        ("journalctl", STAND_IN_JOURNALCTL),
        ("sudo", STAND_IN_SUDO),
    ):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    rec = Recorder(bin_dir)
    rec.set("pid", "1000")
    rec.set("state", "active")
    return rec


@pytest.fixture
def make_controller(
    sshd: SSHD, recorder: Recorder, tmp_path: Path
) -> Iterator[Callable[..., SystemdController]]:
    made: list[SystemdController] = []

    def make(**kwargs: object) -> SystemdController:
        controller = SystemdController(
            ssh.connection_factory(sshd.target()),
            UNIT,
            where="test-host",
            unit_dir=str(tmp_path / "etc"),
            command_prefix=f"PATH={recorder.bin}:$PATH; export PATH; ",
            command_timeout=20.0,
            **kwargs,  # type: ignore[arg-type]
        )
        made.append(controller)
        return controller

    yield make
    for controller in made:
        controller.stop()


LAUNCH = LaunchSpec(argv=ARGV, env=ENV, label="DFLASH budget=8")


def test_apply_writes_dropin_reloads_restarts_and_reads_identity(
    make_controller: Callable[..., SystemdController], recorder: Recorder, tmp_path: Path
) -> None:
    controller = make_controller()
    identity = controller.apply(LAUNCH)
    dropin = tmp_path / "etc" / f"{UNIT}.d" / "50-specdecode.conf"
    assert dropin.read_text() == render_dropin(ARGV, ENV, label="DFLASH budget=8")
    assert recorder.calls() == [
        f"systemctl show -p MainPID -p ExecMainStartTimestamp {UNIT}",
        "systemctl daemon-reload",
        f"systemctl restart {UNIT}",
        f"systemctl show -p MainPID -p ExecMainStartTimestamp {UNIT}",
    ]
    assert (identity.kind, identity.pid) == ("systemd", 1001)
    assert identity.started == "Sun 2026-11-29 23:00:00 UTC #1001"
    assert controller.identity() == identity
    assert controller.apply(LAUNCH).pid == 1002


def test_failure_logs_and_restore(
    make_controller: Callable[..., SystemdController], recorder: Recorder, tmp_path: Path
) -> None:
    controller = make_controller()
    controller.apply(LAUNCH)
    recorder.clear()
    assert controller.failure() is None
    assert controller.alive()
    recorder.set("state", "failed")
    failure = controller.failure()
    assert failure == f"unit {UNIT!r} is failed (Result=exit-code, exit status 1)"
    assert recorder.calls()[:2] == [
        f"systemctl is-failed {UNIT}",
        f"systemctl show -p ActiveState -p SubState -p Result -p MainPID -p ExecMainStatus {UNIT}",
    ]
    recorder.clear()
    assert controller.logs(5).splitlines()[-1] == "The server is fired up and ready to roll!"
    (journal,) = recorder.calls()
    assert journal.startswith(f"journalctl -u {UNIT} --since @")
    assert journal.endswith(" --no-pager -o cat -n 5")
    since = journal.split("--since @")[1].split()[0]
    assert since.isdigit()
    recorder.clear()
    controller.restore()
    assert not (tmp_path / "etc" / f"{UNIT}.d" / "50-specdecode.conf").exists()
    assert recorder.calls() == ["systemctl daemon-reload", f"systemctl restart {UNIT}"]
    controller.restore()  # twice is fine, and does nothing more
    controller.stop()
    controller.stop()
    assert recorder.calls() == ["systemctl daemon-reload", f"systemctl restart {UNIT}"]


def test_a_crash_restarted_by_systemd_counts_as_failure(
    make_controller: Callable[..., SystemdController], recorder: Recorder
) -> None:
    controller = make_controller()
    controller.apply(LAUNCH)
    recorder.set("pid", "2000")
    assert "restarted since the reconfigure (MainPID 1001 -> 2000)" in (controller.failure() or "")


def test_failed_restart_is_one_line_with_the_journal_after(
    make_controller: Callable[..., SystemdController], recorder: Recorder
) -> None:
    recorder.set("fail-restart", "")
    controller = make_controller()
    with pytest.raises(ServiceStartError) as info:
        controller.apply(LAUNCH)
    summary, _, tail = str(info.value).partition("\n")
    assert f"systemctl restart {UNIT!r} on test-host failed" in summary
    assert "exit status 1" in summary
    assert "control process exited with error code" in summary
    assert "fired up" in tail


def test_same_process_after_restart_is_refused(
    make_controller: Callable[..., SystemdController], recorder: Recorder
) -> None:
    recorder.set("frozen", "")
    with pytest.raises(ServiceStartError, match="left the same process running"):
        make_controller().apply(LAUNCH)


def test_sudo_prefixes_privileged_commands(
    make_controller: Callable[..., SystemdController], recorder: Recorder, tmp_path: Path
) -> None:
    controller = make_controller(sudo=True)
    controller.apply(LAUNCH)
    sudo_calls = [c for c in recorder.calls() if c.startswith("sudo ")]
    assert sudo_calls[0] == f"sudo -n systemctl show -p MainPID -p ExecMainStartTimestamp {UNIT}"
    assert sudo_calls[1].startswith("sudo -n sh -c ")
    assert "sudo -n systemctl daemon-reload" in sudo_calls
    assert f"sudo -n systemctl restart {UNIT}" in sudo_calls
    assert (tmp_path / "etc" / f"{UNIT}.d" / "50-specdecode.conf").exists()


def test_restore_without_apply_does_not_connect(sshd: SSHD) -> None:
    def refuse() -> object:
        raise AssertionError("restore() must not connect when nothing was applied")

    controller = SystemdController(refuse, UNIT)
    controller.restore()
    controller.stop()
