"""Rendered flags and reconfigure-script arguments: shell quoting."""

from __future__ import annotations

import shlex
import shutil
import subprocess

import pytest

from pytest_specdecode.config.dialects import (
    get_dialect,
    script_args,
    script_problems,
)
from pytest_specdecode.config.spec import ConfigError, SpecConfig

DDTREE = SpecConfig("DDTREE", budget=32, topk=4, window=None, draft_model="/m/d b")
HOSTILE = ["a b", "it's", 'say "hi"', "x; rm -rf /tmp/nothing", "$(id)", "`id`", "*", ""]


def test_ddtree_renders_its_flags_and_its_topk_variable() -> None:
    rendered = get_dialect("ddtree").render(DDTREE)
    assert rendered.argv == (
        "--speculative-algorithm", "DDTREE", "--speculative-draft-model-path", "/m/d b",
        "--speculative-ddtree-budget", "32",
    )  # fmt: skip
    assert rendered.env == {"SGLANG_DDTREE_MAX_TOPK": "4"}


def test_script_args_quotes_values_and_keeps_positions() -> None:
    line = script_args("/opt/reconfig_ddtree.sh {budget} {topk} {window} {draft_model}", DDTREE)
    assert shlex.split(line) == ["/opt/reconfig_ddtree.sh", "32", "4", "", "/m/d b"]


@pytest.mark.parametrize("value", HOSTILE)
def test_script_args_hostile_values_stay_one_word(value: str) -> None:
    config = SpecConfig(draft_model=value or None, extra=(("note", value),))
    line = script_args("run {draft_model} {extra} end", config)
    expected = ["run", value, "--note", value, "end"] if value else ["run", "", "--note", "end"]
    assert shlex.split(line) == expected


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX sh")
def test_script_args_survive_a_real_shell() -> None:
    config = SpecConfig(budget=8, draft_model=";".join(HOSTILE), extra=(("x", "$HOME a"),))
    line = script_args("printf '%s\\0' {budget} {topk} {draft_model} {extra}", config)
    out = subprocess.run(["sh", "-c", line], capture_output=True, text=True, check=True, timeout=10)
    assert out.stdout.split("\0")[:-1] == ["8", "", ";".join(HOSTILE), "--x", "$HOME a"]


@pytest.mark.parametrize(
    ("template", "fragment"),
    [
        ("run {bugdet}", "unknown placeholder {bugdet}"),
        ("run {budget:>4}", "unknown placeholder {budget}"),
        ('run "{draft_model}"', '{draft_model} sits inside "..." quotes'),
        ("run '{budget}'", "{budget} sits inside '...' quotes"),
        ("run {budget", "literal brace"),
    ],
)
def test_script_args_errors(template: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        script_args(template, DDTREE)
    assert fragment in str(info.value)
    assert str(info.value).startswith("--dflash-restart-cmd")


def test_script_args_literal_braces() -> None:
    assert script_args("run {{x}} {budget}", SpecConfig(budget=4)) == "run {x} 4"


def test_script_problems_lists_set_keys_without_placeholder() -> None:
    config = SpecConfig(budget=8, window=2048, extra=(("tp", "2"),))
    assert script_problems("run {budget}", config) == [
        "window=2048 is set but --dflash-restart-cmd has no {window}; add it or drop window",
        "extra flags (('tp', '2'),) are set but --dflash-restart-cmd has no {extra}; "
        "add it or drop them",
    ]
    assert script_problems("run {budget} {window} {extra}", config) == []
