"""A value with a control character never reaches a unit file or a shell: it is refused
in one line naming the test (a marker) or the option (every other source) and the key.

The attack each case tries: a drafter path ``/models/d<CR>ExecStartPre=/bin/touch X``.
systemd ends a unit-file line at a carriage return, so written into the drop-in
it would run ``ExecStartPre=`` as the unit's user on the GPU host. The runs use
systemd mode against 127.0.0.1 with --collect-only: the refusal comes before any
connection, so there is nothing to connect to.
"""

from __future__ import annotations

import pytest

INJECTED = "/models/d\rExecStartPre=/bin/touch /tmp/specdecode-pwned"
SYSTEMD = ("--dflash-host", "127.0.0.1", "--dflash-unit", "sglang-test.service")
# A template env line whose quoted value holds a carriage return.
ENV_LINE = "'MY_X=a\rExecStartPre=/bin/touch /tmp/x'"
TESTS = """
import pytest

def test_before(dflash_config): pass

@pytest.mark.dflash(budget=8{marker})
def test_bad(dflash_config): pass

def test_after(dflash_config): pass
"""


def toml_string(text: str) -> str:
    """A TOML basic string holding ``text`` (control characters as escapes)."""
    return (
        '"'
        + "".join(c if c.isprintable() and c not in '"\\' else f"\\u{ord(c):04x}" for c in text)
        + '"'
    )


def one_line(result: pytest.RunResult, *patterns: str) -> None:
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text, text
    assert "Traceback" not in text, text
    # Shown by repr only: never a raw carriage return, never a line of its own.
    assert "\r" not in text
    assert not [line for line in text.splitlines() if line.lstrip().startswith("ExecStartPre")]
    (result.stderr if result.ret == pytest.ExitCode.USAGE_ERROR else result.stdout).fnmatch_lines(
        list(patterns)
    )


@pytest.mark.parametrize(
    ("key", "marker"),
    [
        ("draft_model", f", draft_model={INJECTED!r}"),
        ("note", f", note={INJECTED!r}"),  # an extra flag's value
        ("draft_model", ", draft_model=['/models/a', " + repr("/models/b\x1b[2J") + "]"),
    ],
    ids=["drafter", "extra-flag", "escape-in-a-list"],
)
def test_a_marker_value_is_refused_naming_the_test_and_the_key(
    pytester: pytest.Pytester, key: str, marker: str
) -> None:
    pytester.makepyfile(test_m=TESTS.format(marker=marker))
    result = pytester.runpytest("--collect-only", "-q", *SYSTEMD)
    one_line(
        result,
        f"*test_m.py::test_bad: bad dflash config: {key}='/models/*' contains a control character*",
    )
    assert "test_m.py::test_before" in result.stdout.str()
    assert "test_m.py::test_after" in result.stdout.str()


@pytest.mark.parametrize(
    ("args", "ini", "expected"),
    [
        (
            ("--dflash-config", f"draft_model={INJECTED}"),
            "",
            "*--dflash-config: bad part *draft_model=* contains a control character (carriage*",
        ),
        (
            ("--dflash-sweep", f"draft_model=/models/a,{INJECTED}"),
            "",
            "*--dflash-sweep: bad part *draft_model=* contains a control character (carriage*",
        ),
        (
            ("--dflash-draft-model", INJECTED),
            "",
            "*Invalid value * from --dflash-draft-model: contains a control character (carriage*",
        ),
        (
            (),
            f"dflash_config = {toml_string('budget=8,draft_model=' + INJECTED)}",
            "*ini dflash_config: bad part *draft_model=* contains a control character (carriage*",
        ),
        (
            (),
            f"dflash_draft_model = {toml_string(INJECTED)}",
            "*Invalid value * from *dflash_draft_model*: contains a control character (carriage*",
        ),
        (
            ("--dflash-dialect", "template"),
            "dflash_args = '--my-budget {budget} --my-draft {draft_model}'\n"
            f"dflash_env = {toml_string(ENV_LINE)}",
            "*dflash_args/dflash_env word='MY_X=a\\rExecStartPre=* contains a control character*",
        ),
        (
            (
                "--dflash-launch",
                f"/usr/bin/python3 -m sglang.launch_server --model-path '{INJECTED}'",
            ),
            "",
            "*the word * of the launch command contains a control character (carriage return*",
        ),
    ],
    ids=[
        "dflash-config",
        "dflash-sweep",
        "draft-model-option",
        "toml-config",
        "toml-draft-model",
        "template-env",
        "launch",
    ],
)
def test_an_option_or_ini_value_is_refused_in_one_line_naming_it(
    pytester: pytest.Pytester, args: tuple[str, ...], ini: str, expected: str
) -> None:
    # pyproject.toml: TOML strings carry a real carriage return (an ini file cannot).
    pytester.makefile(".toml", pyproject=f"[tool.pytest.ini_options]\n{ini}\n")
    pytester.makepyfile(test_m=TESTS.format(marker=""))
    result = pytester.runpytest("--collect-only", "-q", *SYSTEMD, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    one_line(result, expected)
    errors = [line for line in result.stderr.lines if line.strip()]
    assert len(errors) == 1, errors
