"""Every option of the table reaches the code: a field of the typed ``Settings`` (which
``resolve`` fills from the table by name), or read by name where it is used.

``resolve`` reads every option of the table into a dict and keeps the values whose
name is a ``Settings`` field; the others (the simulator's knobs) are read from that
dict, or looked up with ``found``/``value``, by their name. An option declared in the
table and read nowhere would be accepted on the command line and silently do
nothing: this walks the table and finds where each one is read.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

import pytest_specdecode
from pytest_specdecode.config.options import OPTIONS, Option
from pytest_specdecode.config.settings import Settings

PACKAGE = Path(pytest_specdecode.__file__).parent
# The table declares the names (Option("name", ...)); a declaration is not a use.
TABLE = PACKAGE / "config" / "options.py"
# Lookups in the table's own indexes read an option's declaration, not its value.
TABLE_INDEXES = frozenset({"BY_NAME", "DEFAULTS"})
FIELDS = frozenset(field.name for field in dataclasses.fields(Settings))


def names_read(source: str) -> set[str]:
    """The strings a module uses as a key or an argument: ``v["name"]``,
    ``r.found("name")``, ``config.getoption("dest")``, ``config.getini("ini_key")``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript):
            indexed = node.value
            if isinstance(indexed, ast.Name) and indexed.id in TABLE_INDEXES:
                continue
            keys: list[ast.expr] = [node.slice]
        elif isinstance(node, ast.Call):
            keys = [*node.args, *(keyword.value for keyword in node.keywords)]
        else:
            continue
        found |= {k.value for k in keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return found


def package_reads() -> dict[str, set[str]]:
    """Each name read by key or argument in the plugin (the simulator, a program of its
    own, reads none of the plugin's options), with the modules that read it."""
    reads: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if path == TABLE or rel.parts[0] == "sim":
            continue
        for name in names_read(path.read_text()):
            reads.setdefault(name, set()).add(str(rel))
    return reads


READS = package_reads()


def test_the_scan_sees_keys_and_arguments_not_declarations_or_table_lookups() -> None:
    source = (
        "v['by_key']\nr.found('by_call')\nconfig.getini(name='by_keyword')\n"
        "BY_NAME['declared']\nDEFAULTS['defaulted']\nx = 'a_constant'\n"
    )
    assert names_read(source) == {"by_key", "by_call", "by_keyword"}


@pytest.mark.parametrize("option", OPTIONS, ids=lambda option: option.name)
def test_every_option_is_a_typed_setting_or_read_by_name(option: Option) -> None:
    if option.name in FIELDS:
        return  # resolve fills the field from the table
    names = {option.name, option.dest, *option.ini_names} - {""}
    where = {module for name in names for module in READS.get(name, ())}
    assert where, (
        f"option {option.flag or option.ini!r} ({option.name!r}) is neither a field of "
        "Settings nor read by name anywhere in the package: it would be accepted and do "
        "nothing; add a Settings field or read it where it is used"
    )
