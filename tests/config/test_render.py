"""The renderers of config/render.py over arbitrary text, read back by the target's own
parser: ``sh`` for shell words and environment files, Python's POSIX ``shlex`` for
joined command lines, systemd-analyze for the program of a command line."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_specdecode.config import render

SH = shutil.which("sh") or "/bin/sh"
# Every character a Python str can carry to a child process except NUL.
ANY_TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\0"))
CONTROL = [chr(c) for c in (*range(0x20), 0x7F, 0x85, 0x9B)] + ["\u2028", "\u2029"]
DATA = st.text(st.characters(exclude_categories=["Cc", "Cs", "Zl", "Zp"]))
NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)


def sh(script: str, *args: str) -> bytes:
    done = subprocess.run(
        [SH, "-c", script, "sh", *args], capture_output=True, timeout=10, check=True
    )
    return done.stdout


@pytest.mark.parametrize("ch", CONTROL, ids=lambda c: f"U+{ord(c):04X}")
def test_every_control_character_is_refused_with_the_key(ch: str) -> None:
    message = render.refuse_control("draft_model", f"/models/a{ch}ExecStartPre=/bin/true")
    assert message is not None
    assert message.startswith("draft_model='/models/a")
    assert "control character" in message
    assert "\n" not in message
    assert "\r" not in message
    with pytest.raises(ValueError, match="control character"):
        render.systemd_word(f"a{ch}b")
    with pytest.raises(ValueError, match="control character"):
        render.systemd_environment("K", f"a{ch}b")


@given(DATA)
def test_text_without_control_characters_is_accepted(value: str) -> None:
    assert render.refuse_control("k", value) is None
    assert render.control_character(value) is None


@settings(max_examples=150, deadline=None)
@given(ANY_TEXT)
def test_a_shell_word_reads_back_through_sh(value: str) -> None:
    assert sh("printf %s " + render.shell_word(value)) == value.encode()
    # Glued to other text of its word, a value is always quoted and still itself.
    glued = render.shell_word(value, always_quote=True)
    assert glued.startswith("'")
    assert sh("printf %s x" + glued + "y") == f"x{value}y".encode()


@settings(max_examples=60, deadline=None)
@given(st.lists(ANY_TEXT, min_size=1, max_size=6))
def test_a_shell_command_line_keeps_each_word(words: list[str]) -> None:
    line = render.shell_join(words)
    assert shlex.split(line) == words
    assert sh("printf '%s\\0' " + line).split(b"\0")[:-1] == [w.encode() for w in words]


def test_nul_cannot_be_rendered_for_a_shell_or_exec() -> None:
    with pytest.raises(ValueError, match="NUL"):
        render.shell_word("a\0b")
    with pytest.raises(ValueError, match="NUL"):
        render.argv(["python", "a\0b"])
    assert render.argv(["python", "a\rb", ""]) == ("python", "a\rb", "")


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(NAMES, DATA)
def test_an_environment_file_line_reads_back_through_sh(
    tmp_path: Path, name: str, value: str
) -> None:
    env = tmp_path / "env"
    env.write_text(render.environment_file_line(name, value))
    assert sh(f'. "$1"; printf %s "${name}"', str(env)) == value.encode()


# -- systemd: the line split, and systemd's own reading of the program -------------


def systemd_lines(text: str) -> list[str]:
    """A unit file's lines as systemd splits them: at \\n, \\r and \\r\\n."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


@given(st.lists(ANY_TEXT, min_size=1, max_size=5), st.dictionaries(NAMES, ANY_TEXT, max_size=3))
def test_a_command_line_is_one_systemd_line_or_refused(
    args: list[str], env: dict[str, str]
) -> None:
    words = ["/usr/bin/python3", *args]
    try:
        command = "ExecStart=" + render.systemd_command(words)
        envs = [render.systemd_environment(k, v) for k, v in env.items()]
    except ValueError:
        assert any(render.control_character(t) for t in [*args, *env.values()])
        return
    for line in [command, *envs]:
        assert systemd_lines(line) == [line]
    # The only escapes emitted are \\ and \" (and \; for a lone ;), which systemd and
    # POSIX shlex read alike: shlex gives back each word, with $ and % doubled.
    undoubled = [w.replace("%%", "%").replace("$$", "$") for w in shlex.split(command[10:])]
    assert undoubled == words


SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze is missing")
# A file name systemd can run: not "." / "..", no slash, and what it does not refuse.
PROGRAM_NAMES = st.text(
    st.characters(exclude_categories=("Cc", "Cs", "Zl", "Zp"), exclude_characters="/\\\"'"),
    min_size=1,
    max_size=30,
).filter(lambda n: n not in (".", "..") and n[0] not in "-@:+!" and n.strip() == n)


def analyze(unit: Path) -> subprocess.CompletedProcess[str]:
    assert SYSTEMD_ANALYZE is not None
    return subprocess.run(
        [SYSTEMD_ANALYZE, "verify", "--man=no", str(unit)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


@pytest.mark.slow
@needs_analyze
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(PROGRAM_NAMES)
def test_systemd_finds_the_program_it_was_given(
    tmp_path_factory: pytest.TempPathFactory, name: str
) -> None:
    # systemd-analyze checks that the program exists and is executable: it finds the
    # file only if it read the rendered name back exactly as written.
    where = tmp_path_factory.mktemp("prog")
    program = where / name
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    unit = where / "probe.service"
    unit.write_text("[Service]\nExecStart=" + render.systemd_command([str(program), "--x"]) + "\n")
    result = analyze(unit)
    assert (result.returncode, result.stderr) == (0, ""), unit.read_text()
    os.unlink(program)
    missing = analyze(unit)  # the check above can fail: without the file it does
    assert missing.returncode != 0
    assert "not executable" in missing.stderr


def test_a_program_systemd_would_misread_is_refused() -> None:
    for bad in ("-/usr/bin/x", "@x", "/a\\b", '/a"b', "/a'b", ""):
        with pytest.raises(ValueError, match="systemd cannot run the program"):
            render.systemd_command([bad])
    with pytest.raises(ValueError, match="needs a program"):
        render.systemd_command([render.EnvRef("K")])
    assert render.systemd_command(["/opt/a b/$x%i"]) == '"/opt/a b/$x%%i"'
    assert render.systemd_word("$x") == "$$x"
    assert render.systemd_word(render.EnvRef("KEY", prefix="--api-key=")) == "--api-key=${KEY}"
    with pytest.raises(ValueError, match="cannot stand unquoted"):
        render.EnvRef("KEY", prefix="--a b=")
