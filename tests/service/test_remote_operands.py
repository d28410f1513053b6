"""No value becomes an option of a remote program.

Every command the systemd and script controllers send over SSH is recorded
(a fake connection), taken apart the way ``sh`` would, and each word holding
a value from the user (the unit name, the drop-in paths, the script) must
stand after its program's ``--`` or be glued to its option (``--unit=U``).
"""

from __future__ import annotations

import re
import shlex
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_specdecode.config import dialects, parsers
from pytest_specdecode.config.spec import ConfigError, SpecConfig, coerce
from pytest_specdecode.service.base import LaunchSpec
from pytest_specdecode.service.script import ScriptController
from pytest_specdecode.service.systemd import SystemdController

_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_GLUED = re.compile(r"--[a-z][a-z-]*=")
_SEPARATORS = {";", "&&", "||", "|", "&", "{", "}", "(", ")", "\n"}


class _Host:
    """A fake SSH connection that answers like systemctl and date would."""

    def __init__(self) -> None:
        self.commands: list[str] = []
        self.pid = 1000

    def run(self, command: str, **kwargs: Any) -> SimpleNamespace:
        self.commands.append(command)
        out = ""
        if "restart" in command:
            self.pid += 1
        if "date +%s" in command:
            out = "1764450000\n"
        elif "is-failed" in command:
            out = f"active\nActiveState=active\nSubState=running\nMainPID={self.pid}\n"
        elif "systemctl show" in command:
            out = f"MainPID={self.pid}\nExecMainStartTimestamp=t{self.pid}\n"
        return SimpleNamespace(exited=0, stdout=out, stderr="")

    def close(self) -> None:
        pass


def simple_commands(command: str) -> list[list[str]]:
    """``command`` split into its simple commands as ``sh`` reads them, ``sh -c`` opened."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    out: list[list[str]] = []
    words: list[str] = []
    redirect = False
    for token in lexer:
        if redirect:
            redirect = False  # a file name after > or <: never an argument
        elif token in (">", "<", ">>"):
            redirect = True
        elif token in _SEPARATORS:
            out.extend(_opened(words))
            words = []
        else:
            words.append(token)
    out.extend(_opened(words))
    return out


def _opened(words: list[str]) -> list[list[str]]:
    while words and _ASSIGNMENT.match(words[0]) and words[0] != words[-1]:
        words = words[1:]
    if words[:2] == ["sudo", "-n"]:
        words = words[2:]
    if words[:1] == ["timeout"]:
        words = words[4:]  # timeout -k GRACE SECONDS: the plugin's own numbers
    if words[:2] == ["sh", "-c"]:
        assert words[2] == "--", words  # the command string is never an option of sh
        return simple_commands(words[3])
    return [words] if words else []


def misplaced(commands: list[str], values: list[str]) -> list[list[str]]:
    """The simple commands where a word holding one of ``values`` could be an option."""
    bad = []
    for command in commands:
        for words in simple_commands(command):
            for i, word in enumerate(words):
                if not any(v in word for v in values):
                    continue
                if "--" not in words[1:i] and not _GLUED.match(word):
                    bad.append(words)
    return bad


def drive_systemd(unit: str, *, sudo: bool) -> list[str]:
    """Every command a systemd controller sends: apply, failure, logs, journal, restore."""
    host = _Host()
    controller = SystemdController(lambda: host, unit, sudo=sudo)
    launch = LaunchSpec(argv=("/usr/bin/python3", "-m", "sglang", "--api-key", "k"), label="x")
    controller.apply(launch)
    controller.failure()
    controller.logs(5)
    controller.process_log()
    controller.restore()
    return host.commands


@pytest.mark.parametrize("sudo", [False, True], ids=["direct", "sudo"])
def test_every_systemd_command_has_the_unit_and_its_paths_after_the_double_dash(
    sudo: bool,
) -> None:
    unit = "sglang-planted.service"
    commands = drive_systemd(unit, sudo=sudo)
    words = [w for c in commands for cmd in simple_commands(c) for w in cmd]
    assert sum(unit in w for w in words) >= 12  # the unit, the drop-in paths, journalctl's
    programs = {cmd[0] for c in commands for cmd in simple_commands(c)}
    assert {"systemctl", "journalctl", "mkdir", "rm", "mv"} <= programs
    assert misplaced(commands, [unit]) == []


def test_the_checker_sees_a_unit_that_is_not_after_the_double_dash() -> None:
    # Guards the test above: the command of the finding, without "--".
    assert misplaced(["timeout -k 1 9 sh -c -- 'systemctl restart -H127.0.0.2'"], ["-H127"])
    assert not misplaced(["journalctl --unit=-H127.0.0.2 -n 5"], ["-H127"])


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from("-_.:@\\aZ09Hx ="), min_size=1, max_size=24))
def test_no_unit_name_accepted_becomes_an_option_of_a_remote_program(text: str) -> None:
    try:
        unit = parsers.unit_name(text)
    except ValueError:
        return
    assert not unit.startswith("-")
    assert parsers.UNIT_NAME.fullmatch(unit)
    assert misplaced(drive_systemd(unit, sudo=False), [unit]) == []


@pytest.mark.parametrize("text", ["-H127.0.0.2", "-M", "--host=127.0.0.2", "-.slice"])
def test_a_unit_name_starting_with_a_dash_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="starts with '-'"):
        parsers.unit_name(text)
    with pytest.raises(ValueError, match="starts with '-'"):
        SystemdController(lambda: None, text)


def test_a_unit_without_a_type_is_a_service_as_systemctl_reads_it() -> None:
    # systemd reads drop-ins from <full name>.d only: "sglang.d" would never apply.
    assert parsers.unit_name("sglang") == "sglang.service"
    assert SystemdController(lambda: None, "sglang").dropin_dir.endswith("/sglang.service.d")


def test_the_script_runs_as_the_command_of_sh_and_its_values_are_no_options() -> None:
    host = _Host()
    template = "/opt/reconfig.sh {budget} {draft_model} {extra}"
    config = SpecConfig(budget=8, draft_model="/m/-d", extra=(("x", "1"),))
    script = dialects.script_args(template, config)
    controller = ScriptController(lambda: host, logs_command="tail -n {tail} /log")
    controller.apply(LaunchSpec(argv=(), script=script, label="x"))
    controller.logs(3)
    (run, *_) = [simple_commands(c) for c in host.commands]
    assert run == [["/opt/reconfig.sh", "8", "/m/-d", "--x", "1"]]
    # The drafter path is the one free text among the operands: a leading "-" is refused.
    with pytest.raises(ConfigError, match="starts with '-'"):
        coerce("draft_model", "-rf")
    with pytest.raises(ValueError, match="starts with '-'"):
        parsers.draft_path("--help")
