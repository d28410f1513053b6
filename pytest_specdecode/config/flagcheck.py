"""Would SGLang accept these flags? Checked against its option table before any restart.

A dialect renders a config into flags; :func:`flag_problems` parses them with
a parser built from the table of the SGLang version the dialect targets
(:mod:`pytest_specdecode.facts.argparser`: the same spellings, prefix
matching, types and choices as SGLang's own) and turns a refusal into one line
naming the flag and the nearest real spellings, so a config that SGLang
would stop on fails at collection instead of after a ten-minute model load.
:func:`field_value` gives the value SGLang stores for a flag, so that
``/server_info``'s flat field can be compared with it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from typing import Any

from pytest_specdecode.facts import OptionTable
from pytest_specdecode.facts.argparser import Refused, check

_AMBIGUOUS = re.compile(r"ambiguous option: (\S+?)(?:=\S*)? could match (.+)$")
_UNRECOGNIZED = re.compile(r"unrecognized arguments: (.+)$")


def flag_problems(table: OptionTable, argv: Sequence[str], *, dialect: str) -> list[str]:
    """One line per refusal of ``argv`` by the table's parser (empty: accepted)."""
    try:
        check(table, argv)
    except Refused as exc:
        return [_describe(table, str(exc), dialect)]
    return []


def _describe(table: OptionTable, message: str, dialect: str) -> str:
    where = f"{table.name} (dialect {dialect!r}) refuses"
    ambiguous = _AMBIGUOUS.search(message)
    if ambiguous:
        flag, matches = ambiguous.groups()
        spelled = [m.strip() for m in matches.split(",")]
        return (
            f"{where} flag {flag}: it is an ambiguous abbreviation of "
            f"{' and '.join(spelled)}; spell one of them out"
        )
    unknown = _UNRECOGNIZED.search(message)
    if unknown:
        flags = [t for t in unknown.group(1).split() if t.startswith("-")]
        flag = flags[0] if flags else unknown.group(1)
        close = difflib.get_close_matches(flag.split("=", 1)[0], table.flags(), n=3, cutoff=0.6)
        hint = f"; nearest real spellings: {', '.join(close)}" if close else ""
        return f"{where} flag {flag}: SGLang has no such option{hint}"
    return f"{where} the rendered flags: {message}"


def field_value(table: OptionTable, words: Sequence[str]) -> tuple[str, Any] | None:
    """(dest, value) SGLang stores for one ``--flag [value...]``; None if it refuses it."""
    if not words:
        return None
    try:
        ns = check(table, words)
    except Refused:
        return None
    option = table.resolve(words[0].split("=", 1)[0])
    if option is None:
        return None
    return option.dest, getattr(ns, option.dest, None)
