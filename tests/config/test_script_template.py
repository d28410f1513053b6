"""Reconfigure-script templates: where a placeholder may sit so no value runs as code."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_specdecode.config.dialects import check_script_template, script_args
from pytest_specdecode.config.script_template import slots
from pytest_specdecode.config.settings import SettingsError, resolve
from pytest_specdecode.config.spec import ConfigError, SpecConfig


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("/opt/r.sh {budget} {topk}", [("budget", False), ("topk", False)]),
        ("run m={draft_model} --w={window}", [("draft_model", True), ("window", True)]),
        ("run {budget}{topk} {extra}", [("budget", True), ("topk", True), ("extra", False)]),
        ('cd "$HOME" && ./r.sh {budget}; echo done # {{not a placeholder}}', [("budget", False)]),
        ("X=${{HOME}}/m ./r.sh {budget}", [("budget", False)]),
        ("echo '#' \"a b\" a#b {budget}", [("budget", False)]),
        ("sudo -n /opt/r.sh {budget} > /tmp/log 2>&1", [("budget", False)]),
    ],
)  # fmt: skip
def test_plain_word_positions_are_accepted(template: str, expected: list[tuple[str, bool]]) -> None:
    assert [(s.name, s.glued) for s in slots(template)] == expected


@pytest.mark.parametrize(
    ("template", "why"),
    [
        ('run "m={draft_model}"', 'sits inside "..." quotes, where the shell still runs $(...)'),
        ("run 'm={draft_model}'", "sits inside '...' quotes"),
        ('run "$(cat f)" m={draft_model}', "comes after a $(...) command substitution"),
        ("run \\{draft_model}", "follows a backslash"),
        ("run ${draft_model}", "follows $"),
        ("run $'{draft_model}'", "sits inside '...' quotes"),
        ("run $(echo {draft_model})", "comes after a $(...) command substitution"),
        ("run `echo {draft_model}`", "comes after a `...` command substitution"),
        ("run ${{X:-{draft_model}}}", "sits inside ${...}"),
        ("run ${{X:-y}} {draft_model}", "comes after ${...} with an operator"),
        ("run # {draft_model}", "sits in a # comment"),
        ("cat <<EOF\n{draft_model}\nEOF", "comes after a << here-document"),
        ("eval run {draft_model}", "comes after eval"),
        ("'ev'al run {draft_model}", "comes after eval"),
        ("let x={budget}", "comes after let"),
        ("[[ {budget} -gt 1 ]] && run", "comes after [[ ... ]]"),
        ("(( {budget} > 1 )) && run", "comes after (( ... )) arithmetic"),
        ("run x{extra}", "is glued to other text, but it expands to several words"),
        ('run {budget} "unclosed', 'unterminated "'),
    ],
)  # fmt: skip
def test_unsafe_positions_are_refused_with_one_line_saying_why(template: str, why: str) -> None:
    with pytest.raises(ConfigError) as info:
        check_script_template(template)
    message = str(info.value)
    assert message.startswith(f"--dflash-restart-cmd {template!r}: ")
    assert why in message
    assert "\n" not in message


def test_unknown_placeholders_are_refused_too() -> None:
    with pytest.raises(ConfigError, match=r"unknown placeholder \{HOME\}"):
        check_script_template("run ${HOME} {budget}")


def test_glued_values_are_always_quoted() -> None:
    config = SpecConfig(budget=8, draft_model="~root")
    assert script_args("run m={draft_model} {budget} b{budget}", config) == "run m='~root' 8 b'8'"


def test_the_settings_refuse_an_unsafe_template_before_anything_runs(
    pytester: pytest.Pytester,
) -> None:
    args = ["--dflash-host=127.0.0.1", '--dflash-restart-cmd=/opt/r.sh "m={draft_model}"']
    with pytest.raises(SettingsError, match=r'\{draft_model\} sits inside "\.\.\." quotes'):
        resolve(pytester.parseconfig(*args), environ={})
    pytester.makepyfile("def test_nothing(): pass")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(['ERROR: --dflash-restart-cmd * sits inside "..." quotes*'])
    assert "Traceback" not in result.stderr.str()


HOSTILE = [
    "$(touch {canary})",
    "`touch {canary}`",
    "'; touch {canary}; '",
    '"; touch {canary}; "',
    "x\ntouch {canary}\n",
    "\\'$(touch {canary})",
    "~root,{{a,b}}*",
]


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX sh")
@pytest.mark.parametrize("value", HOSTILE)
def test_accepted_positions_pass_values_through_a_real_sh_as_data(
    value: str, tmp_path: Path
) -> None:
    canary = tmp_path / "ran"
    value = value.format(canary=canary)
    config = SpecConfig(budget=8, draft_model=value, extra=(("note", value),))
    template = "printf '%s\\0' {draft_model} m={draft_model} {extra} X{draft_model}Y {budget}"
    out = subprocess.run(
        ["sh", "-c", script_args(template, config)], capture_output=True, text=True, timeout=10
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\0")[:-1] == [value, f"m={value}", "--note", value, f"X{value}Y", "8"]
    assert not canary.exists()
