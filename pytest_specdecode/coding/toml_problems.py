"""User problems from a TOML file (``--dflash-problems path.toml``).

Format: an array of ``[[problem]]`` tables::

    [[problem]]
    name = "add"                       # required; letters, digits, _ . -
    prompt = "Write a Python function `add(a, b)` that returns a + b."   # required
    entry_point = "add"                # default: name
    reference = '''                    # required: Python source defining entry_point
    def add(a, b):
        return a + b
    '''
    args = ["int", "int(-5, 5)"]       # optional: one type per argument (see typespec)
    cases = [[1, 2], [0, 0]]           # optional: fixed argument lists

At least one of ``args`` and ``cases`` is required. Expected values come from
the reference. Type grammar: :mod:`pytest_specdecode.coding.typespec`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from pytest_specdecode import statefiles
from pytest_specdecode.coding.problem import Problem
from pytest_specdecode.coding.typespec import TypeSpecError, args_strategy
from pytest_specdecode.errors import SpecDecodeError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

_KEYS = {"name", "prompt", "entry_point", "reference", "args", "cases"}
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


class ProblemFileError(SpecDecodeError, ValueError):
    """A problems file cannot be used; the message is one line naming file and problem."""


def _fail(path: str, where: str, what: str) -> ProblemFileError:
    return ProblemFileError(f"{path}: {where}: {what}")


def _problem(path: str, index: int, table: Any) -> Problem:
    where = f"problem #{index + 1}"
    if not isinstance(table, dict):
        raise _fail(path, where, "must be a [[problem]] table")
    name = table.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise _fail(path, where, f"'name' must be letters, digits, '_', '.' or '-', got {name!r}")
    where = f"problem {name!r}"
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise _fail(path, where, f"unknown key(s) {unknown!r}; allowed: {sorted(_KEYS)!r}")
    entry = table.get("entry_point", name)
    if not isinstance(entry, str) or not entry.isidentifier():
        raise _fail(path, where, f"'entry_point' must be a Python identifier, got {entry!r}")
    for key in ("prompt", "reference"):
        if not isinstance(table.get(key), str) or not table[key].strip():
            raise _fail(path, where, f"{key!r} must be a non-empty string")
    args, cases = table.get("args"), table.get("cases", [])
    if args is None and not cases:
        raise _fail(path, where, "needs 'args' (types for generated inputs) or 'cases' or both")
    strategy = None
    if args is not None:
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise _fail(path, where, f"'args' must be a list of type strings, got {args!r}")
        try:
            strategy = args_strategy(*args)
        except TypeSpecError as exc:
            raise _fail(path, where, str(exc)) from None
    if not isinstance(cases, list) or not all(isinstance(c, list) for c in cases):
        raise _fail(path, where, f"'cases' must be a list of argument lists, got {cases!r}")
    if args is not None and any(len(c) != len(args) for c in cases):
        raise _fail(path, where, f"every case needs {len(args)} argument(s) like 'args'")
    problem = Problem(
        name=name,
        prompt=table["prompt"],
        entry_point=entry,
        reference=table["reference"],
        cases=tuple(tuple(c) for c in cases),
        strategy=strategy,
        source=path,
    )
    try:
        problem.reference_function()
    except Exception as exc:
        raise _fail(
            path, where, f"the reference does not load: {type(exc).__name__}: {exc}"
        ) from None
    return problem


def load_problems_toml(path: str | Path) -> list[Problem]:
    """The problems in a TOML file; ProblemFileError (a ValueError) if it is unusable."""
    shown = str(path)
    try:
        data = tomllib.loads(statefiles.load_text(path))
    except statefiles.FileRefused as exc:
        raise ProblemFileError(f"{shown}: {exc.problem}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ProblemFileError(f"{shown}: not valid TOML: {exc}") from None
    tables = data.get("problem")
    if not isinstance(tables, list) or not tables:
        raise ProblemFileError(f"{shown}: no [[problem]] tables found")
    extra = sorted(set(data) - {"problem"})
    if extra:
        raise ProblemFileError(f"{shown}: unknown top-level key(s) {extra!r}; use [[problem]]")
    problems = [_problem(shown, i, t) for i, t in enumerate(tables)]
    seen: set[str] = set()
    for p in problems:
        if p.name in seen:
            raise _fail(shown, f"problem {p.name!r}", "the name is used twice")
        seen.add(p.name)
    return problems
