"""Command lines to show to both parsers: every option, its forms, and ways to get it wrong."""

from __future__ import annotations

from pytest_specdecode import facts
from pytest_specdecode.facts import Option

GOOD_VALUES = {
    "int": "2",
    "float": "0.5",
    "str": "x",
    "nullable_str": "x",
    "loads": "{}",
    "json_list_type": "[]",
    "human_readable_int": "1k",
    "parse_cuda_graph_config_arg": '{"decode": {"max_bs": 8}}',
}
BAD_VALUES = {
    "int": "x",
    "float": "x",
    "loads": "{",
    "json_list_type": "[",
    "human_readable_int": "1.5Ki",
    "parse_cuda_graph_config_arg": '{"nope": {}}',
}


def good_argv(option: Option, flag: str) -> list[str]:
    """``flag`` with a value SGLang accepts."""
    if option.switch:
        return [flag]
    if option.choices:
        return [flag, str(option.choices[0])]
    if option.nargs == "?":
        return [flag]
    return [flag, GOOD_VALUES.get(option.type or "str", "x")]


def cases(table: facts.OptionTable) -> list[list[str]]:
    """Valid forms of every spelling, abbreviations, bad types and choices, unknown flags."""
    out: list[list[str]] = [[]]
    for option in table.options:
        for flag in option.flags:
            out.append(good_argv(option, flag))
            if option.takes_value and not option.switch:
                value = good_argv(option, flag)[1:]
                if value:
                    out.append([f"{flag}={value[0]}"])
            for cut in {len(flag) - 1, len(flag) - 4, max(3, len(flag) // 2)}:
                if 3 <= cut < len(flag):
                    out.append([flag[:cut], *good_argv(option, flag)[1:]])
        first = option.flags[0]
        if option.choices and option.takes_value:
            out.append([first, "zz-not-a-choice"])
        if option.type in BAD_VALUES and not option.choices:
            out.append([first, BAD_VALUES[option.type]])
        if option.takes_value and option.nargs is None:
            out.append([first])  # missing value
    out += [
        ["--speculative-ddtree-budget", "12"],
        ["--speculative-dflash-draft-window-size", "1024"],
        ["--cuda-graph-max-bs", "32"],
        ["--no-such-option"],
        ["--page-size", "16", "--page-size", "x"],
        ["positional"],
        ["--sim"],
    ]
    return out
