"""Argument strategies declared by type, for TOML problems (and Python ones).

Grammar (whitespace is ignored, names are case-insensitive)::

    type    := base [bounds]
    base    := "int" | "float" | "bool" | "str" | "ascii"
             | "list[" type "]" | "set[" type "]" | "tuple[" type {"," type} "]"
             | "dict[" type "," type "]" | "optional[" type "]"
             | "list of" type | "set of" type
    bounds  := "(" number "," number ")"

- ``int``: any integer; ``int(0, 100)`` inclusive range.
- ``float``: finite floats (no NaN/inf); ``float(-1, 1)`` inclusive range.
- ``bool``; ``str``: Unicode text without surrogates; ``ascii``: printable ASCII.
- bounds on ``str``/``ascii``/``list``/``set``/``dict`` are the size range
  (default 0..20 for collections, 0..20 for text).
- ``dict`` keys must be a hashable type (int, float, bool, str, ascii, tuple).

Examples: ``"list[int(-5, 5)](0, 8)"``, ``"list of int"``, ``"dict[str, int]"``,
``"tuple[int, str]"``.
"""

from __future__ import annotations

import re
import string
from typing import Any

from hypothesis import strategies as st

from pytest_specdecode.errors import SpecDecodeError

DEFAULT_MAX_SIZE = 20
_TOKEN = re.compile(r"\s*(-?\d+(?:\.\d*)?(?:e-?\d+)?|[A-Za-z_]+|[\[\](),])")
_SCALARS = {"int", "float", "bool", "str", "ascii"}
_HASHABLE = {"int", "float", "bool", "str", "ascii", "tuple"}


class TypeSpecError(SpecDecodeError, ValueError):
    """A type declaration does not follow the grammar."""


def _tokens(text: str) -> list[str]:
    text = re.sub(r"\b(list|set)\s+of\s+", r"\1 of ", text.strip().lower())
    out, pos = [], 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            if text[pos:].strip() == "":
                break
            raise TypeSpecError(f"unexpected {text[pos:]!r}")
        out.append(match.group(1))
        pos = match.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.pos = 0

    def peek(self) -> str | None:
        return self.toks[self.pos] if self.pos < len(self.toks) else None

    def take(self, expected: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (expected is not None and tok != expected):
            want = repr(expected) if expected else "a type"
            raise TypeSpecError(f"expected {want} at {' '.join(self.toks[self.pos :]) or 'end'!r}")
        self.pos += 1
        return tok

    def parse(self) -> tuple[str, st.SearchStrategy[Any]]:
        kind, strategy = self.type_()
        if self.peek() is not None:
            raise TypeSpecError(f"unexpected {' '.join(self.toks[self.pos :])!r}")
        return kind, strategy

    def type_(self) -> tuple[str, st.SearchStrategy[Any]]:
        name = self.take()
        inner: list[tuple[str, st.SearchStrategy[Any]]] = []
        if name in ("list", "set") and self.peek() == "of":
            self.take("of")
            inner = [self.type_()]
        elif name in ("list", "set", "tuple", "dict", "optional"):
            self.take("[")
            inner.append(self.type_())
            while self.peek() == ",":
                self.take(",")
                inner.append(self.type_())
            self.take("]")
            arity = {"dict": 2, "tuple": len(inner)}.get(name, 1)
            if len(inner) != arity or not inner:
                raise TypeSpecError(f"{name}[...] takes {arity} type(s), got {len(inner)}")
        elif name not in _SCALARS:
            raise TypeSpecError(
                f"unknown type {name!r}; expected int, float, bool, str, ascii, list[T],"
                " set[T], tuple[T, ...], dict[K, V] or optional[T]"
            )
        lo = hi = None
        if self.peek() == "(":
            self.take("(")
            lo = self.number()
            self.take(",")
            hi = self.number()
            self.take(")")
            if lo > hi:
                raise TypeSpecError(f"bounds ({lo}, {hi}) are reversed")
        return name, _build(name, inner, lo, hi)

    def number(self) -> float:
        tok = self.take()
        try:
            return float(tok)
        except ValueError:
            raise TypeSpecError(f"expected a number, got {tok!r}") from None


def _size(lo: float | None, hi: float | None) -> tuple[int, int]:
    if lo is None or hi is None:
        return 0, DEFAULT_MAX_SIZE
    if lo < 0 or lo != int(lo) or hi != int(hi):
        raise TypeSpecError(f"size bounds must be whole numbers >= 0, got ({lo}, {hi})")
    return int(lo), int(hi)


def _build(
    name: str,
    inner: list[tuple[str, st.SearchStrategy[Any]]],
    lo: float | None,
    hi: float | None,
) -> st.SearchStrategy[Any]:
    if name == "int":
        if lo is not None and (lo != int(lo) or hi != int(hi or 0)):
            raise TypeSpecError(f"int bounds must be whole numbers, got ({lo}, {hi})")
        return st.integers(None if lo is None else int(lo), None if hi is None else int(hi))
    if name == "float":
        return st.floats(lo, hi, allow_nan=False, allow_infinity=False)
    if name in ("bool", "optional", "tuple") and lo is not None:
        raise TypeSpecError(f"{name} takes no bounds")
    if name == "bool":
        return st.booleans()
    low, high = _size(lo, hi)
    if name == "str":
        return st.text(min_size=low, max_size=high)
    if name == "ascii":
        return st.text(alphabet=string.printable[:95], min_size=low, max_size=high)
    if name == "list":
        return st.lists(inner[0][1], min_size=low, max_size=high)
    if name == "set":
        _require_hashable(inner[0][0], name)
        return st.sets(inner[0][1], min_size=low, max_size=high)
    if name == "dict":
        _require_hashable(inner[0][0], name)
        return st.dictionaries(inner[0][1], inner[1][1], min_size=low, max_size=high)
    if name == "optional":
        return st.none() | inner[0][1]
    return st.tuples(*(s for _, s in inner))


def _require_hashable(kind: str, container: str) -> None:
    if kind not in _HASHABLE:
        raise TypeSpecError(f"{container} elements/keys must be hashable, got {kind!r}")


def parse_type(text: str) -> st.SearchStrategy[Any]:
    """The hypothesis strategy for one type declaration; TypeSpecError if malformed."""
    if not isinstance(text, str) or not text.strip():
        raise TypeSpecError(f"a type must be a non-empty string, got {text!r}")
    try:
        return _Parser(text).parse()[1]
    except TypeSpecError as exc:
        raise TypeSpecError(f"bad type {text!r}: {exc}") from None


def args_strategy(*types: str) -> st.SearchStrategy[tuple[Any, ...]]:
    """Argument tuples, one element per declared type: ``args_strategy("list[int]", "int")``."""
    return st.tuples(*(parse_type(t) for t in types))
