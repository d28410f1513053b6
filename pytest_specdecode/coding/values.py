"""Comparing a candidate's (decoded) result with the reference's, and showing values.

Everything here takes hostile input: values decoded from the sandbox, and text
an answer wrote (exception messages, reprs). Nothing raises on such input, and
:func:`printable` is the one function that makes answer-derived text safe to
show on a terminal or store in a report.
"""

from __future__ import annotations

import math
import reprlib
from typing import Any

from pytest_specdecode.coding import worker

# Ints up to this many bits (77 digits) are shown in full, larger ones by their
# size: Python refuses str() beyond 4300 digits, and a verdict line has no room.
_MAX_INT_BITS = 256


class _Repr(reprlib.Repr):
    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() <= _MAX_INT_BITS:
            return repr(x)
        estimate = int(x.bit_length() * math.log10(2))  # the digits, or one too few
        if x.bit_length() > 1 << 16:  # 10**estimate would cost more than it tells
            return f"<int of about {estimate} digits>"
        return f"<int of {estimate + (abs(x) >= 10**estimate)} digits>"


_repr = _Repr()
_repr.maxstring = 80
_repr.maxother = 80
_repr.maxlist = _repr.maxtuple = _repr.maxset = _repr.maxdict = 12
_repr.maxlevel = 4


def printable(text: str) -> str:
    r"""``text`` with every control or format character written as an escape.

    Cursor movement, OSC 52 clipboard writes, bidi overrides and line breaks
    from an answer become visible text (``\x1b[2J``) instead of acting on the
    terminal; surrogates that cannot be encoded are escaped too.
    """
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def one_line(text: str, limit: int = 300) -> str:
    """Answer-derived text as one printable line of at most about ``limit`` characters."""
    return printable(" ".join(str(text).split())[:limit])


def reply_start(reply: str, limit: int = 300) -> str:
    """The start of a model's reply for a failure line: quoted and escaped like a Python
    string (line breaks as ``\\n``, control and bidi characters as escapes), cut to
    ``limit`` characters with the full length said."""
    shown = printable(repr(str(reply)[:limit]))
    return shown if len(reply) <= limit else f"{shown}... ({len(reply):,} characters)"


def show(value: Any) -> str:
    """A short, printable one-line repr; never raises."""
    try:
        text = _repr.repr(value)
    except Exception:
        text = f"<unshowable {type(value).__name__}>"
    # A str's repr is one line already; its inner spaces are part of the value.
    return printable(text) if isinstance(value, str) else one_line(text, 400)


def show_call(entry_point: str, args: tuple[Any, ...]) -> str:
    """``gcd(0, 0)``."""
    return f"{entry_point}({', '.join(show(a) for a in args)})"


def normalize(value: Any) -> Any:
    """The value as the wire format would carry it (tuples stay tuples, others opaque)."""
    return worker.decode(worker.encode(value))


def same(expected: Any, actual: Any) -> bool:
    """Equality with float tolerance; bool, list and tuple are not interchangeable.

    Anything that cannot be compared (too deep, an int too large for a float)
    is not the same.
    """
    try:
        return _same(expected, actual)
    except Exception:
        return False


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _same(expected: Any, actual: Any) -> bool:
    if _number(expected) and _number(actual):
        if isinstance(expected, float) or isinstance(actual, float):
            e, a = float(expected), float(actual)  # OverflowError: not the same
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
