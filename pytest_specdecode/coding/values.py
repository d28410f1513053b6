"""Comparing a candidate's (decoded) result with the reference's, and showing calls."""

from __future__ import annotations

import math
import reprlib
from typing import Any

from pytest_specdecode.coding import worker

_repr = reprlib.Repr()
_repr.maxstring = 80
_repr.maxother = 80
_repr.maxlist = _repr.maxtuple = _repr.maxset = _repr.maxdict = 12
_repr.maxlevel = 4


def show(value: Any) -> str:
    """A short one-line repr."""
    return " ".join(_repr.repr(value).split()) if not isinstance(value, str) else _repr.repr(value)


def show_call(entry_point: str, args: tuple[Any, ...]) -> str:
    """``gcd(0, 0)``."""
    return f"{entry_point}({', '.join(show(a) for a in args)})"


def normalize(value: Any) -> Any:
    """The value as the wire format would carry it (tuples stay tuples, others opaque)."""
    return worker.decode(worker.encode(value))


def same(expected: Any, actual: Any) -> bool:
    """Equality with float tolerance; bool, list and tuple are not interchangeable."""
    try:
        return _same(expected, actual)
    except RecursionError:
        return False


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _same(expected: Any, actual: Any) -> bool:
    if _number(expected) and _number(actual):
        if isinstance(expected, float) or isinstance(actual, float):
            e, a = float(expected), float(actual)
            if math.isnan(e) or math.isnan(a):
                return math.isnan(e) and math.isnan(a)
            return math.isclose(e, a, rel_tol=1e-9, abs_tol=1e-9)
        return bool(expected == actual)
    if type(expected) is not type(actual):
        return False
    if isinstance(expected, (list, tuple)):
        return len(expected) == len(actual) and all(map(_same, expected, actual))
    if isinstance(expected, dict):
        return expected.keys() == actual.keys() and all(
            _same(v, actual[k]) for k, v in expected.items()
        )
    return bool(expected == actual)


def difference(expected: Any, actual: Any) -> str:
    """Where two sequences first differ, when their short reprs would hide it."""
    if not isinstance(expected, (list, tuple)) or type(expected) is not type(actual):
        return ""
    shown = (show(expected), show(actual))
    if shown[0] != shown[1] and "..." not in shown[0] + shown[1]:
        return ""
    for i, (e, a) in enumerate(zip(expected, actual, strict=False)):
        if not same(e, a):
            return f" (first difference at index {i}: {show(a)} vs {show(e)})"
    return f" (lengths differ: {len(actual)} vs {len(expected)})"
