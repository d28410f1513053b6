"""Value parsers of the options table: text in, a typed value out.

One parser per kind of value, with its bounds, used alike for a command-line
flag, an ini key and an environment variable (see
:mod:`pytest_specdecode.config.options`). Each raises ``ValueError`` saying
what it expected; :mod:`pytest_specdecode.config.settings` adds where the
text came from. Floats are finite unless a parser says otherwise.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Callable
from typing import TypeVar

from pytest_specdecode.config import render, spec

S = TypeVar("S", bound=str)


def text(value: str) -> str:
    return value.strip()


def integer(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An integer in ``[minimum, maximum]``."""
    bounds = f">= {minimum}" if maximum is None else f"from {minimum} to {maximum}"

    def parse(value: str) -> int:
        try:
            number = int(value.strip())
        except ValueError:
            raise ValueError(f"expected an integer {bounds}") from None
        if number < minimum or (maximum is not None and number > maximum):
            raise ValueError(f"expected an integer {bounds}")
        return number

    return parse


def number(minimum: float, *, inclusive: bool = True) -> Callable[[str], float]:
    """A finite float above ``minimum`` (or equal, when ``inclusive``)."""
    bound = f"{'>=' if inclusive else '>'} {minimum:g}"

    def parse(value: str) -> float:
        try:
            result = float(value.strip())
        except ValueError:
            raise ValueError(f"expected a number {bound}") from None
        # nan compares false with everything: test for the numbers we take, not against.
        if not ((minimum <= result if inclusive else minimum < result) and result < math.inf):
            raise ValueError(f"expected a finite number {bound}")
        return result

    return parse


def below_one(value: str) -> float:
    """A number >= 0 and < 1 (the simulator's restart noise)."""
    result = number(0)(value)
    if result >= 1:
        raise ValueError("expected a number >= 0 and < 1")
    return result


_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?")
_DURATION_HINT = "expected a duration like 2h, 90m, 30s or 1h30m (a whole number of h or m, s)"


def duration(value: str) -> float:
    """``2h``, ``90m``, ``30s``, ``1h30m``: seconds > 0. A unit is required (a bare number
    could mean seconds, minutes or restarts) and each appears once, hours first."""
    body = value.strip()
    found = _DURATION.fullmatch(body)
    if not body or found is None:
        raise ValueError(_DURATION_HINT)
    hours, minutes, seconds = (float(part) if part else 0.0 for part in found.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if not 0 < total < math.inf:
        raise ValueError(f"{_DURATION_HINT}; it must be longer than 0 s")
    return total


def fraction(value: str) -> float:
    """``0.8`` or ``80%``: a number from 0 to 1."""
    body = value.strip()
    try:
        result = float(body.rstrip("%")) / (100 if body.endswith("%") else 1)
    except ValueError:
        raise ValueError("expected a fraction like 0.8 or 80%") from None
    if not 0 <= result <= 1:
        raise ValueError("expected a fraction between 0 and 1, like 0.8 or 80%")
    return result


def choice(choices: tuple[S, ...]) -> Callable[[str], S]:
    def parse(value: str) -> S:
        if value.strip() not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return choices[choices.index(value.strip())]  # the member itself, typed as the Literal

    return parse


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def boolean(value: str) -> bool:
    word = value.strip().lower()
    if word not in _TRUE + _FALSE:
        raise ValueError("expected true or false")
    return word in _TRUE


def is_true(value: str) -> bool:
    return value.strip().lower() in _TRUE


def int_list(value: str) -> tuple[int, ...]:
    """``60,1024,4096``: integers >= 1."""
    numbers: list[int] = []
    for item in value.replace(" ", "").split(","):
        try:
            numbers.append(int(item))
        except ValueError:
            raise ValueError(f"expected comma-separated integers, got {item!r}") from None
        if numbers[-1] < 1:
            raise ValueError(f"expected integers >= 1, got {numbers[-1]}")
    return tuple(numbers)


def command(name: str, *, argv: bool = False) -> Callable[[str], str]:
    """A command line: split like a shell would, so an open quote fails here, not later.

    With ``argv`` (a command the plugin runs or writes into a unit, word by word),
    a word holding a control character is refused (see config/render.py).
    """

    def parse(value: str) -> str:
        try:
            words = shlex.split(value.strip())
        except ValueError as exc:
            raise ValueError(f"{exc} in the {name}; close the quote or escape it") from None
        for word in words if argv else ():
            what = render.control_character(word)
            if what is not None:
                raise ValueError(f"the word {word!r} of the {name} contains {what}; remove it")
        return value.strip()

    return parse


def draft_path(value: str) -> str:
    """A drafter path or model id (see :func:`spec.draft_path`)."""
    return spec.draft_path("", data_text(value))


def data_text(value: str) -> str:
    """Text that becomes part of a command line or unit: no control character."""
    what = render.control_character(value.strip())
    if what is not None:
        raise ValueError(f"contains {what}; remove it")
    return value.strip()


# systemd.unit(5): a prefix of ASCII letters, digits, ":", "-", "_", "." and "\\", an
# optional "@instance" (empty for a template), a type suffix; 255 characters in all.
UNIT_TYPES = (
    "service", "socket", "device", "mount", "automount", "swap", "target", "path", "timer",
    "slice", "scope",
)  # fmt: skip
_UNIT_CHARS = r"[A-Za-z0-9:_.\\-]"
UNIT_NAME = re.compile(rf"{_UNIT_CHARS}+(?:@{_UNIT_CHARS}*)?\.(?:{'|'.join(UNIT_TYPES)})")
UNIT_NAME_MAX = 255


def unit_name(value: str) -> str:
    """A systemd unit name by systemd.unit(5)'s grammar, which is never an option.

    Without a type suffix it is a service, as systemctl reads it (``sglang`` ->
    ``sglang.service``): the drop-in directory must carry the full name for
    systemd to read it. The grammar allows a leading ``-`` (``-.slice``), but
    no server runs as such a unit, and every remote program would read it as
    its options (``systemctl restart -H127.0.0.2``): refused.
    """
    name = value.strip()
    if name.startswith("-"):
        raise ValueError(
            "starts with '-': a unit name cannot be an option of systemctl or journalctl; "
            "give the unit itself, e.g. sglang.service"
        )
    if not UNIT_NAME.fullmatch(name) and UNIT_NAME.fullmatch(name + ".service"):
        name += ".service"
    if not UNIT_NAME.fullmatch(name) or len(name) > UNIT_NAME_MAX:
        raise ValueError(
            "expected a systemd unit name like sglang.service: ASCII letters, digits and "
            f"':-_.\\' (an '@instance' allowed), a type suffix ({', '.join(UNIT_TYPES)}), "
            f"{UNIT_NAME_MAX} characters at most"
        )
    return name


def html_path(value: str) -> str | None:
    """A path ending in .html, or ``none`` for no HTML report."""
    if value.strip().lower() == "none":
        return None
    if not value.strip().lower().endswith((".html", ".htm")):
        raise ValueError("expected a file path ending in .html, or 'none' for no HTML report")
    return value.strip()


def policy_path(value: str) -> str | None:
    """A path for the policy file, or ``none`` for no policy."""
    if value.strip().lower() == "none":
        return None
    if not value.strip():
        raise ValueError("expected a file path, or 'none' for no policy file")
    return value.strip()


def prompt_template(value: str) -> str:
    if "{prompt}" not in value:
        raise ValueError("has no {prompt} placeholder for the problem's text; add it")
    return value.strip()


_ENV_NAME = re.compile(r"env:([A-Za-z_][A-Za-z0-9_]*)")


def env_reference(value: str) -> str:
    """``env:NAME``: the name of an environment variable (a secret's place, not the secret)."""
    match = _ENV_NAME.fullmatch(value.strip())
    if match is None:
        # Never echo it: it may be the secret itself.
        raise ValueError(
            "an ini file is committed with the project, so it names the variable that holds "
            "the key instead: write env:VARIABLE (e.g. env:SGLANG_API_KEY)"
        )
    return match[1]
