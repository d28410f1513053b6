"""Script mode over a real sshd: a hostile config value never runs on the host.

Every placeholder position a template can put a value in is tried with one
value carrying ``$(...)``, backticks, both kinds of quotes, a newline and a
``;``. A position the plugin accepts must hand the script the value as one
literal argument; any other position must be refused before anything runs.
Either way no canary file may appear.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from types import SimpleNamespace

from pytest_specdecode.config.dialects import script_args
from pytest_specdecode.config.spec import ConfigError, SpecConfig
from pytest_specdecode.service import ssh
from pytest_specdecode.service.base import LaunchSpec, ScriptFailed
from pytest_specdecode.service.script import ScriptController

from .conftest import SSHD

PRINT = "printf '%s\\0'"

# template -> what the script receives (None: the template must be refused)
CASES: dict[str, list[str] | None] = {
    f"{PRINT} {{draft_model}}": ["V"],
    f"{PRINT} m={{draft_model}} --model={{draft_model}} X{{draft_model}}Y": [
        "m=V",
        "--model=V",
        "XVY",
    ],
    f"{PRINT} {{extra}} {{window}} {{budget}}": ["--note", "V", "", "8"],
    'M={draft_model} sh -c \'printf "%s\\0" "$M"\'': ["V"],
    f"cd / && {PRINT} {{draft_model}}; true": ["V"],
    f'{PRINT} "m={{draft_model}}"': None,
    f"{PRINT} 'm={{draft_model}}'": None,
    f"{PRINT} \\{{draft_model}}": None,
    f"{PRINT} $(printf %s {{draft_model}})": None,
    f"{PRINT} `printf %s {{draft_model}}`": None,
    f"{PRINT} x # {{draft_model}}": None,
    f"eval {PRINT} {{draft_model}}": None,
    "cat <<EOF\n{draft_model}\nEOF": None,
    f"{PRINT} ${{{{X:-{{draft_model}}}}}}": None,
}


def hostile(canaries: Path) -> str:
    touch = f"touch {shlex.quote(str(canaries))}/"
    return (
        f"$({touch}1)`{touch}2`'$({touch}3)'\"$({touch}4)\"\\'$({touch}5)'\n{touch}6\n;{touch}7;#"
    )


def test_a_hostile_value_never_runs_in_any_placeholder_position(sshd: SSHD, tmp_path: Path) -> None:
    canaries = tmp_path / "ran"
    canaries.mkdir()
    value = hostile(canaries)
    config = SpecConfig(budget=8, draft_model=value, extra=(("note", value),))
    out = tmp_path / "args"
    controller = ScriptController(
        ssh.connection_factory(sshd.target()), where=ssh.describe(sshd.target())
    )
    got: dict[str, list[str] | None] = {}
    try:
        for template in CASES:
            try:
                command = script_args(f"exec > {shlex.quote(str(out))}; {template}", config)
            except ConfigError:
                got[template] = None
                continue
            try:
                controller.apply(LaunchSpec(script=command, label="DFLASH budget=8"))
            except ScriptFailed as exc:  # a value broke the command's syntax
                got[template] = [f"exit status {exc.exit_status}"]
                continue
            args = out.read_bytes().decode().split("\0")[:-1]
            got[template] = [a.replace(value, "V") for a in args]
    finally:
        controller.stop()
    assert sorted(p.name for p in canaries.iterdir()) == []
    assert got == CASES


class _RecordingConnection:
    def __init__(self) -> None:
        self.commands: list[str] = []

    def run(self, command: str, **kwargs: object) -> SimpleNamespace:
        self.commands.append(command)
        return SimpleNamespace(stdout="a log line\n", stderr="", exited=0)

    def close(self) -> None:
        pass


def test_the_logs_command_fills_only_tail_and_keeps_other_braces() -> None:
    conn = _RecordingConnection()
    logs = "journalctl -u sglang -n {tail} | awk '{print $0}'"
    controller = ScriptController(lambda: conn, logs_command=logs)
    assert controller.logs(5) == "a log line"
    assert shlex.split(conn.commands[0])[-1] == "journalctl -u sglang -n 5 | awk '{print $0}'"
    assert controller.log_location() == (
        "`journalctl -u sglang -n 200 | awk '{print $0}'` on remote host"
    )
