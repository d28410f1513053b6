"""How figures are written for people: ``30,572 tok/s``, never ``3.057e+04``.

One place for the terminal summary, gate lines, comparison tables, the
Markdown summary and plot labels, so the same figure reads the same
everywhere. Missing values (``None``, NaN, non-numbers) read ``-``.
"""

from __future__ import annotations

import math

MISSING = "-"


def _usable(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def number(value: object, digits: int = 0) -> str:
    """``value`` with thousands separators and ``digits`` decimals: ``30,572.4``."""
    found = _usable(value)
    return MISSING if found is None else f"{found:,.{digits}f}"


def plain(value: object) -> str:
    """A threshold or limit as given, without exponent: ``2.5``, ``1,000,000``."""
    found = _usable(value)
    if found is None:
        return MISSING
    if found == int(found):
        return f"{int(found):,}"
    return f"{found:,.4f}".rstrip("0").rstrip(".")


def rate(value: object) -> str:
    """A token rate without its unit: whole tokens from 100 up, else one decimal."""
    found = _usable(value)
    if found is None:
        return MISSING
    return number(found, 0 if abs(found) >= 100 else 1)


def tok_s(value: object) -> str:
    """A token rate with its unit: ``30,572 tok/s``."""
    shown = rate(value)
    return shown if shown == MISSING else f"{shown} tok/s"


def metric(name: str, value: object) -> str:
    """A named metric as it reads in a sentence: tok/s with its unit, accept length
    with two decimals, milliseconds with one."""
    if name.startswith("tok_s") or name.startswith("req_tok_s"):
        return tok_s(value)
    if name.endswith("_ms") or "_ms_" in name:
        shown = number(value, 1)
        return shown if shown == MISSING else f"{shown} ms"
    if name.startswith("accept_length"):
        return number(value, 2)
    return plain(value)
