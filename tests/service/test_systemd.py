"""systemd mode: the drop-in text, its acceptance by systemd-analyze, and the
commands the controller sends over a real SSH session to recording stand-ins
of ``systemctl`` / ``journalctl`` (nothing touches this machine's systemd).
"""

from __future__ import annotations

import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_specdecode.config import render
from pytest_specdecode.config.render import control_character
from pytest_specdecode.service import ssh
from pytest_specdecode.service.base import LaunchSpec, ServiceStartError
from pytest_specdecode.service.systemd import (
    SystemdController,
    render_dropin,
    render_unit,
    split_secrets,
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
    assert render.systemd_word(word) == quoted


def test_environment_lines_are_quoted_and_names_checked() -> None:
    assert render.systemd_environment("K", 'a "b" 5%') == 'Environment="K=a \\"b\\" 5%%"'
    with pytest.raises(ValueError, match="invalid environment variable name 'A B'"):
        render.systemd_environment("A B", "x")


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
# Options first, then "--", then the unit (as getopt reads them): the unit is the last word.
for unit; do :; done
if [ "$state" = failed ]; then sub=failed res=exit-code st=1 mp=0
else sub=running res=success st=0 mp=$pid; fi
case "$1" in
  restart)
    if [ -e "$d/fail-restart" ]; then
      echo "Job for $unit failed because the control process exited with error code." >&2
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

    def make(unit: str = UNIT, **kwargs: object) -> SystemdController:
        controller = SystemdController(
            ssh.connection_factory(sshd.target()),
            unit,
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
        f"systemctl show -p MainPID -p ExecMainStartTimestamp -- {UNIT}",
        "systemctl daemon-reload",
        f"systemctl restart -- {UNIT}",
        f"systemctl show -p MainPID -p ExecMainStartTimestamp -- {UNIT}",
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
        f"systemctl is-failed -- {UNIT}",
        "systemctl show -p ActiveState -p SubState -p Result -p MainPID -p ExecMainStatus "
        f"-- {UNIT}",
    ]
    recorder.clear()
    assert controller.logs(5).splitlines()[-1] == "The server is fired up and ready to roll!"
    (journal,) = recorder.calls()
    assert journal.startswith(f"journalctl --unit={UNIT} --since=@")
    assert journal.endswith(" --no-pager -o cat -n 5")
    since = journal.split("--since=@")[1].split()[0]
    assert since.isdigit()
    recorder.clear()
    controller.restore()
    assert not (tmp_path / "etc" / f"{UNIT}.d" / "50-specdecode.conf").exists()
    assert recorder.calls() == ["systemctl daemon-reload", f"systemctl restart -- {UNIT}"]
    controller.restore()  # twice is fine, and does nothing more
    controller.stop()
    controller.stop()
    assert recorder.calls() == ["systemctl daemon-reload", f"systemctl restart -- {UNIT}"]


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
    assert sudo_calls[0] == (
        f"sudo -n systemctl show -p MainPID -p ExecMainStartTimestamp -- {UNIT}"
    )
    assert sudo_calls[1].startswith("sudo -n sh -c -- ")
    assert "sudo -n systemctl daemon-reload" in sudo_calls
    assert f"sudo -n systemctl restart -- {UNIT}" in sudo_calls
    assert (tmp_path / "etc" / f"{UNIT}.d" / "50-specdecode.conf").exists()


def test_restore_without_apply_does_not_connect(sshd: SSHD) -> None:
    def refuse() -> object:
        raise AssertionError("restore() must not connect when nothing was applied")

    controller = SystemdController(refuse, UNIT)
    controller.restore()
    controller.stop()


# -- values are data: nothing a value holds becomes a line of the unit ---------

ANY_TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\0"))
DATA = st.text(st.characters(exclude_categories=["Cc", "Cs", "Zl", "Zp"]))
ENV_NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)
INJECTED = "/models/d\rExecStartPre=/bin/touch /tmp/specdecode-pwned"


def systemd_lines(text: str) -> list[str]:
    """The lines of a unit file as systemd reads them: it ends a line at \\n, \\r and \\r\\n."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


@settings(max_examples=300)
@given(
    st.lists(ANY_TEXT, max_size=6),
    st.dictionaries(ENV_NAMES, ANY_TEXT, max_size=3),
    ANY_TEXT,
)
def test_a_rendered_dropin_has_exactly_the_intended_lines(
    args: list[str], env: dict[str, str], label: str
) -> None:
    try:
        text = render_dropin([sys.executable, *args], env, label=label)
    except ValueError:
        # Refused only for a control character in a value (the collection refuses it first).
        assert any(control_character(v) for v in [*args, *env.values()])
        return
    lines = systemd_lines(text)
    assert lines[-1] == ""  # ends with a newline
    assert len(lines) == 4 + len(env) + 1, lines
    assert lines[0].startswith("# Written by pytest-specdecode")
    assert lines[1:3] == ["[Service]", "ExecStart="]
    assert lines[3].startswith("ExecStart=")
    assert all(line.startswith('Environment="') for line in lines[4:-1])


def test_a_carriage_return_in_the_drafter_path_adds_no_line() -> None:
    argv = [sys.executable, "--speculative-draft-model-path", INJECTED]
    with pytest.raises(ValueError, match="control character"):
        render_dropin(argv, {})
    with pytest.raises(ValueError, match="control character"):
        render_dropin([sys.executable], {"SGLANG_X": INJECTED})


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.lists(DATA, max_size=4),
    st.dictionaries(ENV_NAMES, DATA, max_size=2),
    st.booleans(),
)
def test_systemd_analyze_accepts_any_rendered_dropin(
    unit_dir: Path, args: list[str], env: dict[str, str], with_key: bool
) -> None:
    argv = [*ARGV, *args, *(["--api-key", "sk-abc$1%n"] if with_key else [])]
    split = split_secrets(argv)
    secrets = unit_dir / "50-specdecode.secrets"
    secrets.write_text(split.environment_file())
    dropin = unit_dir / f"{UNIT}.d" / "50-specdecode.conf"
    dropin.parent.mkdir(exist_ok=True)
    dropin.write_text(
        render_dropin(split.argv, env, environment_file=str(secrets) if with_key else None)
    )
    result = _verify(unit_dir)
    assert (result.returncode, result.stderr) == (0, ""), dropin.read_text()


def test_a_value_that_would_inject_is_refused_before_anything_reaches_the_host(
    make_controller: Callable[..., SystemdController], recorder: Recorder, tmp_path: Path
) -> None:
    argv = (*ARGV, "--note", INJECTED)
    with pytest.raises(ServiceStartError, match="control character"):
        make_controller().apply(LaunchSpec(argv=argv, label="DFLASH budget=8"))
    assert recorder.calls() == []
    assert not (tmp_path / "etc" / f"{UNIT}.d").exists()


# -- secrets: a 0600 file written over stdin; never in the drop-in or a command --

KEY = "sk-PLANTED-7c1e09d4b2"
ADMIN_KEY = "adm-PLANTED-5f08e3a61d"
SECRET_ARGV = (*ARGV, "--api-key", KEY, f"--admin-api-key={ADMIN_KEY}")


def pieces(secret: str, size: int = 8) -> set[str]:
    return {secret[i : i + size] for i in range(len(secret) - size + 1)}


def leaked(texts: Iterable[str]) -> list[str]:
    found = pieces(KEY) | pieces(ADMIN_KEY)
    return [t for t in texts if any(p in t for p in found)]


@pytest.fixture
def sent(sshd: SSHD) -> tuple[list[str], Callable[[], Any]]:
    """Every command string sent over SSH (the exec requests), and a factory recording them."""
    commands: list[str] = []
    factory = ssh.connection_factory(sshd.target())

    def connect() -> Any:
        conn = factory()
        run = conn.run

        def recording(command: str, **kwargs: Any) -> Any:
            commands.append(command)
            return run(command, **kwargs)

        conn.run = recording
        return conn

    return commands, connect


@pytest.mark.parametrize("sudo", [False, True], ids=["direct", "sudo"])
def test_api_keys_go_to_a_0600_file_over_stdin_and_nowhere_else(
    make_controller: Callable[..., SystemdController],
    recorder: Recorder,
    tmp_path: Path,
    sent: tuple[list[str], Callable[[], Any]],
    sudo: bool,
) -> None:
    commands, connect = sent
    controller = make_controller(sudo=sudo)
    controller._connect = connect  # the same sshd, with every exec string recorded
    identity = controller.apply(LaunchSpec(argv=SECRET_ARGV, env=ENV, label="DFLASH budget=8"))
    assert identity.pid == 1001

    unit_d = tmp_path / "etc" / f"{UNIT}.d"
    dropin = unit_d / "50-specdecode.conf"
    secrets = unit_d / "50-specdecode.secrets"
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o600
    assert stat.S_IMODE(dropin.stat().st_mode) == 0o644
    assert secrets.read_text() == (
        f'SPECDECODE_API_KEY="{KEY}"\nSPECDECODE_ADMIN_API_KEY="{ADMIN_KEY}"\n'
    )
    text = dropin.read_text()
    assert not leaked([text]), text
    assert f"EnvironmentFile={secrets}" in text.splitlines()
    assert "--api-key ${SPECDECODE_API_KEY} --admin-api-key=${SPECDECODE_ADMIN_API_KEY}" in text
    # Neither the exec requests nor what the remote stand-ins were run with hold a key.
    assert commands
    assert not leaked(commands), leaked(commands)
    assert not leaked(recorder.calls())
    assert not list(unit_d.glob("*.tmp"))

    # A config without keys leaves no stale key file; restore removes both files.
    controller.apply(LaunchSpec(argv=ARGV, env=ENV, label="DFLASH budget=8"))
    assert not secrets.exists()
    assert "EnvironmentFile" not in dropin.read_text()
    controller.apply(LaunchSpec(argv=SECRET_ARGV, env=ENV, label="DFLASH budget=8"))
    controller.restore()
    assert not secrets.exists()
    assert not dropin.exists()
    assert not leaked(commands)


def test_the_client_key_is_taken_out_wherever_it_stands(
    make_controller: Callable[..., SystemdController], tmp_path: Path
) -> None:
    # --dflash-api-key's value, given to a flag the plugin does not know as a key flag.
    controller = make_controller(secrets=[KEY])
    controller.apply(LaunchSpec(argv=(*ARGV, "--auth-token", KEY), label="x"))
    unit_d = tmp_path / "etc" / f"{UNIT}.d"
    assert not leaked([(unit_d / "50-specdecode.conf").read_text()])
    assert (unit_d / "50-specdecode.secrets").read_text() == f'SPECDECODE_SECRET="{KEY}"\n'


# -- a unit of the plugin's own: the weight-cache daemon ---------------------

DAEMON_UNIT = "sglang-test-weight-cache.service"
DAEMON_ARGV = (sys.executable, "-m", "pytest_specdecode.sim.weight_cache", "--model-path", "/m x")
DAEMON_ENV = {"SGLANG_WEIGHT_CACHE_SOCKET_TEMPLATE": "/run/wc 1/{device_uuid}.sock", "P": "5%"}


def test_a_rendered_unit_of_its_own_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed (Debian package systemd)")
    unit = tmp_path / DAEMON_UNIT
    unit.write_text(
        render_unit(
            DAEMON_ARGV,
            DAEMON_ENV,
            label="weight-cache daemon 100%",
            environment_file="/etc/systemd/system/x.secrets",
            runtime_directory="pytest-specdecode-wc",
        )
    )
    result = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(unit)],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert (result.returncode, result.stderr) == (0, "")
    # Guard: a broken line in such a unit is noticed.
    unit.write_text(unit.read_text() + 'ExecStartPre=/bin/true "unbalanced\n')
    broken = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(unit)],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert broken.returncode != 0


def test_a_unit_of_its_own_is_written_whole_started_and_at_restore_stopped_and_removed(
    make_controller: Callable[..., SystemdController], recorder: Recorder, tmp_path: Path
) -> None:
    controller = make_controller(
        unit=DAEMON_UNIT, whole_unit=True, runtime_directory="pytest-specdecode-wc"
    )
    identity = controller.apply(LaunchSpec(argv=DAEMON_ARGV, env=DAEMON_ENV, label="daemon"))
    unit = tmp_path / "etc" / DAEMON_UNIT
    assert unit.read_text() == render_unit(
        DAEMON_ARGV, DAEMON_ENV, label="daemon", runtime_directory="pytest-specdecode-wc"
    )
    assert not (tmp_path / "etc" / f"{DAEMON_UNIT}.d").exists()
    assert recorder.calls() == [
        f"systemctl show -p MainPID -p ExecMainStartTimestamp -- {DAEMON_UNIT}",
        "systemctl daemon-reload",
        f"systemctl restart -- {DAEMON_UNIT}",
        f"systemctl show -p MainPID -p ExecMainStartTimestamp -- {DAEMON_UNIT}",
    ]
    assert identity.pid == 1001
    recorder.clear()
    controller.restore()
    assert not unit.exists()
    assert recorder.calls() == [f"systemctl stop -- {DAEMON_UNIT}", "systemctl daemon-reload"]
    controller.restore()  # twice is fine
    assert len(recorder.calls()) == 2
