"""The options table: one declaration per setting, read alike from a flag, an ini key
and the environment, and the options reference in docs/ written from it."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_specdecode.config import reference
from pytest_specdecode.config.options import OPTIONS, Option, add_options
from pytest_specdecode.config.settings import Settings, SettingsError, resolve

DOCS = Path(__file__).resolve().parents[2] / "docs" / "options.md"


class _Declared:
    """Stands in for pytest's parser: the options go into a real argparse parser (so a
    flag's value is what pytest's would be), the ini keys into a dict of their types."""

    def __init__(self) -> None:
        self.argparse = argparse.ArgumentParser(add_help=False)
        self.ini: dict[str, str] = {}
        self.helps: dict[str, str] = {}

    def getgroup(self, name: str, description: str = "") -> _Declared:
        return self

    def addoption(self, *names: str, **kwargs: Any) -> None:
        self.argparse.add_argument(*names, **kwargs)
        self.helps[names[0]] = kwargs["help"]

    def addini(self, name: str, help: str, type: str = "string", default: object = None) -> None:
        self.ini[name] = type


DECLARED = _Declared()
add_options(DECLARED)  # type: ignore[arg-type]


class _Config:
    """A parsed command line and ini file, as ``resolve`` reads them."""

    inipath: Path | None = None

    def __init__(self, args: list[str], ini: dict[str, str] | None = None) -> None:
        self._options = DECLARED.argparse.parse_args(args)
        self._ini = ini or {}

    def getoption(self, name: str) -> Any:
        if not hasattr(self._options, name):
            raise ValueError(f"no option named {name!r}")
        return getattr(self._options, name)

    def getini(self, name: str) -> Any:
        if name not in DECLARED.ini:
            raise ValueError(f"unknown ini key {name!r}")
        text = self._ini.get(name, "")
        if DECLARED.ini[name] == "linelist":  # as pytest reads one: a line each
            return [stripped for line in text.split("\n") if (stripped := line.strip())]
        return text


# What an option needs beside it to resolve at all (as flags; the same from either side).
CONTEXT: dict[str, list[str]] = {
    "hosts": ["--dflash-restart=always", "--dflash-unit=u"],
    "unit": ["--dflash-host=gpu1"],
    "restart_cmd": ["--dflash-host=gpu1"],
    "search_restarts": ["--dflash-search=budget=4,8"],
    "search_metric": ["--dflash-search=algorithm=NONE,DFLASH;budget=4,8"],
    "search_seed": ["--dflash-search=budget=4,8"],
    "samples": ["--dflash-temperature=0.5"],
}
# The two settings whose ini key means something else than the flag, by design.
OWN_INI_MEANING = {"config_override", "api_key"}
COMPARED = [o for o in OPTIONS if o.flag is not None and o.name not in OWN_INI_MEANING]


def _outcome(option: Option, config: _Config, environ: dict[str, str]) -> Settings | str:
    """The Settings, or the error with the option's source written as its flag."""
    try:
        return resolve(config, environ=environ)
    except SettingsError as exc:
        message = str(exc)
        for key in option.ini_names:
            message = message.replace(f"{key} ini option", str(option.flag))
        if option.env:
            message = message.replace(f"{option.env} environment variable", str(option.flag))
        return message


def _flag_args(option: Option, text: str) -> list[str]:
    if option.kind == "switch":
        return [str(option.flag)] if text == "true" else []
    return [f"{option.flag}={text}"]


# Values that sit on the edges of the parsers, and any other line of text.
EDGES = st.sampled_from(
    [
        "0", "1", "-1", "2", "0.5", "1e3", "80%", "150%", "nan", "inf", "-inf", "1e999",
        "65535", "65536", "true", "no", "maybe", "auto", "sglang", "chat", "rounds", "tok_s",
        "60,1024", "4,8,16", "ttft:500ms", "code,math", "all", "gpu1", "gpu1:2222", "a:b:c",
        "r.html", "none", "python -m 'x", "a\x1bb", "{prompt}", "sglang.service", "0.5.23",
    ]
)  # fmt: skip
LINES = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\n\r"), max_size=12)
# argparse reads `--flag=--` as the flag without a value (`--` ends the options):
# the one text a flag cannot carry, so no property to compare it by.
TEXTS = (EDGES | LINES).filter(lambda text: text == text.strip() and text != "--")


@pytest.mark.parametrize("option", COMPARED, ids=lambda option: option.flag)
@settings(max_examples=30, deadline=None)
@given(text=TEXTS)
def test_a_flag_and_its_ini_key_read_a_text_the_same(option: Option, text: str) -> None:
    if option.kind == "switch" and text != "true":
        # A switch's flag takes no text: its ini key reads true/false, or fails.
        outcome = _outcome(option, _Config(CONTEXT.get(option.name, []), {option.ini: text}), {})
        if text.lower() in ("1", "yes", "on"):
            assert outcome == _outcome(option, _Config(_flag_args(option, "true")), {})
        elif isinstance(outcome, str):
            assert f"Invalid value {text!r} from {option.flag}" in outcome
        return
    context = CONTEXT.get(option.name, [])
    from_flag = _outcome(option, _Config([*_flag_args(option, text), *context]), {})
    from_ini = _outcome(option, _Config(context, {option.ini: text}), {})
    assert from_flag == from_ini
    if option.env and option.kind != "list":
        assert _outcome(option, _Config(context), {option.env: text}) == from_flag


@pytest.mark.parametrize("option", OPTIONS, ids=lambda option: option.ini)
def test_no_parser_takes_nan_or_inf_for_a_number(option: Option) -> None:
    try:
        numeric = isinstance(option.parser("0.5"), float) or isinstance(option.parser("1"), float)
    except ValueError:
        numeric = False
    if not numeric:
        return
    for text in ("nan", "inf", "-inf", "1e999"):
        with pytest.raises(ValueError, match=r"finite|between 0 and 1"):
            option.parser(text)


@pytest.mark.parametrize(
    ("args", "ini", "message"),
    [
        # Both refused where argparse once let it through and resolution refused it.
        (["--dflash-answer-timeout=0.05"], {}, "from --dflash-answer-timeout: expected a finite"),
        ([], {"dflash_answer_timeout": "0.05"}, "dflash_answer_timeout ini option: expected a"),
        (["--dflash-temperature=nan"], {}, "from --dflash-temperature: expected a finite number"),
        ([], {"dflash_temperature": "nan"}, "dflash_temperature ini option: expected a finite"),
        (["--dflash-port=70000"], {}, "expected an integer from 1 to 65535"),
        ([], {"dflash_prompt_template": "{x}"}, "has no {prompt} placeholder"),
    ],
)
def test_one_bound_for_flag_and_ini(args: list[str], ini: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=re.escape(message)):
        resolve(_Config(args, ini), environ={})


def test_every_help_ends_with_the_default() -> None:
    for flag, help in DECLARED.helps.items():
        option = next(o for o in OPTIONS if o.flag == flag)
        assert help.endswith(f"Default: {option.default_text}".replace("%", "%%")), flag


def test_the_docs_list_every_option_of_the_table() -> None:
    page = DOCS.read_text(encoding="utf-8")
    rows = [line for line in page.splitlines() if line.startswith("| ") and "`" in line]
    flags = {m for row in rows for m in re.findall(r"`(--dflash-[a-z-]+)", row.split(" | ")[0])}
    keys = {m for row in rows for m in re.findall(r"`(dflash_[a-z_]+)`", row.split(" | ")[1])}
    assert flags == {name for o in OPTIONS if o.flag for name in (o.flag, *o.aliases)}
    assert keys == {key for o in OPTIONS for key in o.ini_names} == set(DECLARED.ini)
    assert page == reference.markdown(), (
        "docs/options.md is not the table's: "
        "python -m pytest_specdecode.config.reference > docs/options.md"
    )


def test_the_docs_example_error_is_what_resolve_says() -> None:
    shown = re.search(r"`(Invalid value .*?)`", reference.INTRO, re.S)
    assert shown is not None
    with pytest.raises(SettingsError) as refused:
        resolve(_Config([], {"dflash_ready_timeout": "soon"}), environ={})
    assert str(refused.value) == " ".join(shown[1].split())


INI_ONLY = {
    "args_template": "--my-budget {budget}",
    "env_template": "MY_TOPK={topk}",
    "system_prompt": "Answer with one function.",
    "prompt_template": "Solve: {prompt}",
}


def test_every_ini_only_setting_reaches_the_settings() -> None:
    assert set(INI_ONLY) == {o.name for o in OPTIONS if o.flag is None}
    for option in (o for o in OPTIONS if o.flag is None):
        settings = resolve(_Config([], {option.ini: INI_ONLY[option.name]}), environ={})
        assert getattr(settings, option.name) == INI_ONLY[option.name], option.ini
