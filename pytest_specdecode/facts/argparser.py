"""An ``argparse`` parser that accepts and refuses exactly what SGLang's does.

Built from an :class:`~pytest_specdecode.facts.OptionTable`: the same
spellings in the same order (so argparse's prefix matching and its
"ambiguous option" errors come out the same), the same actions, ``nargs``,
choices and defaults, and value converters that behave like SGLang's
(``human_readable_int``, ``json_list_type``, ...), each under SGLang's
function name because argparse names the type in its error
("invalid int value", "invalid loads value"). The simulator parses its command line
with it; the plugin's dialects check rendered flags with it.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from functools import cache
from typing import Any

from pytest_specdecode.facts import Option, OptionTable

Converter = Callable[[str], Any]


def nullable_str(value: str) -> str | None:
    """SGLang's: empty or ``None`` means no value."""
    if not value or value == "None":
        return None
    return value


_SI = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_IEC = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def human_readable_int(value: str) -> int:
    """SGLang's: ``1k``, ``25.6k``, ``1Mi`` or a plain integer."""
    value = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", value)
    if match:
        number, suffix = match.groups()
        if suffix in _IEC:
            if "." in number:
                raise argparse.ArgumentTypeError(
                    f"Decimals are not allowed with IEC suffixes like '{suffix}'. "
                    f"Use an integer IEC value such as '{int(Decimal(number))}{suffix}', "
                    f"or an SI value such as '{number}{suffix[0]}'."
                )
            return int(number) * _IEC[suffix]
        return int(Decimal(number) * _SI[suffix])
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"Invalid integer value: '{value}'. "
            "Use a plain integer, SI suffixes (1k, 1M), or IEC suffixes (1Ki, 1Mi). "
            "Suffixes are case-sensitive."
        ) from None


def _no_constant(name: str) -> Any:
    # SGLang parses these with orjson, which refuses NaN and Infinity.
    raise json.JSONDecodeError(f"unexpected {name}", name, 0)


def json_list_type(value: str) -> Any:
    """SGLang's: any JSON document (despite the name)."""
    try:
        return json.loads(value, parse_constant=_no_constant)
    except json.JSONDecodeError:
        raise argparse.ArgumentTypeError(
            f"Invalid JSON list: {value}. Please provide a valid JSON list."
        ) from None


def loads(value: str) -> Any:
    """``json.loads`` (SGLang passes it as the type; argparse says "invalid loads value")."""
    return json.loads(value)


def parse_cuda_graph_backend_arg(value: str) -> str:
    """SGLang's: the retired backend gets its own message before the choices check."""
    if value == "tc_piecewise":
        raise argparse.ArgumentTypeError(
            "tc_piecewise was removed; select breakable, full, or disabled"
        )
    return value


def _cuda_graph_config(keys: Mapping[str, tuple[str, ...]]) -> Converter:
    phases = tuple(keys)

    def parse_cuda_graph_config_arg(value: str) -> dict[str, dict[str, Any]]:
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as exc:
            raise argparse.ArgumentTypeError(f"--cuda-graph-config must be JSON: {exc}") from None
        if not isinstance(parsed, dict):
            raise argparse.ArgumentTypeError(
                f"--cuda-graph-config must be a JSON object, got {type(parsed).__name__}"
            )
        result: dict[str, dict[str, Any]] = {}
        for phase, settings in parsed.items():
            phase = str(phase)
            if phase not in phases:
                raise argparse.ArgumentTypeError(
                    f"--cuda-graph-config: unknown phase '{phase}', expected one of {phases}"
                )
            if not isinstance(settings, dict):
                raise argparse.ArgumentTypeError(
                    f"--cuda-graph-config['{phase}'] must be a JSON object, got "
                    f"{type(settings).__name__}"
                )
            if "backend" in settings:
                parse_cuda_graph_backend_arg(settings["backend"])
            result[phase] = {}
            for key, item in settings.items():
                if key not in keys[phase]:
                    raise argparse.ArgumentTypeError(
                        f"--cuda-graph-config['{phase}']: unknown key '{key}', "
                        f"expected one of {keys[phase]}"
                    )
                result[phase][key] = item
        return result

    return parse_cuda_graph_config_arg


def converters(table: OptionTable) -> dict[str, Converter]:
    """Type name (as the table records it) -> a converter behaving like SGLang's."""
    return {
        "str": str,
        "int": int,
        "float": float,
        "loads": loads,
        "nullable_str": nullable_str,
        "human_readable_int": human_readable_int,
        "json_list_type": json_list_type,
        "parse_cuda_graph_backend_arg": parse_cuda_graph_backend_arg,
        "parse_cuda_graph_config_arg": _cuda_graph_config(table.cuda_graph_config_keys),
    }


class Deprecated(argparse.Action):
    """A retired flag that still stores its value, with SGLang's warning: True for a
    retired switch, the one accepted value for a valued flag that became a boolean."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        self.new_flag: str | None = kwargs.pop("new_flag", None)
        self.const_value: Any = kwargs.pop("const_value", None)
        super().__init__(option_strings, dest, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        replacement = f" Use '{self.new_flag}' instead." if self.new_flag else ""
        note = getattr(parser, "note_deprecated", None)
        if callable(note):
            note(
                f"'{option_string}' is deprecated and will be removed in a future release."
                + replacement
            )
        setattr(namespace, self.dest, self.const_value)


class LoRAPaths(argparse.Action):
    """SGLang's ``--lora-paths``: names, paths, or ``{"lora_name":..., "lora_path":...}``."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        paths: list[Any] = []
        for raw in values or []:
            item = str(raw).strip()
            if item.startswith("{") and item.endswith("}"):
                # Like SGLang: a bad JSON or missing key is an exception, not an argparse error.
                obj = json.loads(item)
                if not ("lora_path" in obj and "lora_name" in obj):
                    raise AssertionError(
                        f"{item!r} looks like a JSON str, but it does not contain "
                        "'lora_name' and 'lora_path' keys."
                    )
                paths.append(obj)
            else:
                paths.append(item)
        setattr(namespace, self.dest, paths)


def add_options(parser: argparse.ArgumentParser, table: OptionTable) -> None:
    """Register every option of ``table`` on ``parser``, in the table's order."""
    types = converters(table)
    for option in table.options:
        _add(parser, option, types)


def _add(parser: argparse.ArgumentParser, o: Option, types: Mapping[str, Converter]) -> None:
    common: dict[str, Any] = {"dest": o.dest, "default": o.default, "help": o.help or None}
    if o.metavar is not None:
        common["metavar"] = o.metavar
    if o.action in ("_StoreTrueAction", "_StoreFalseAction"):
        action = "store_true" if o.action == "_StoreTrueAction" else "store_false"
        parser.add_argument(*o.flags, action=action, **common)
    elif o.action == "BooleanOptionalAction":
        # argparse derives the --no- spelling itself from the positive one.
        positive = [f for f in o.flags if not f.startswith("--no-")]
        parser.add_argument(*positive, action=argparse.BooleanOptionalAction, **common)
    elif o.action in ("DeprecatedStoreTrueAction", "DeprecatedStoreConstAction"):
        # A retired switch has nargs 0 and const True in the table.
        parser.add_argument(
            *o.flags,
            action=Deprecated,
            nargs=o.nargs,
            choices=o.choices,
            const_value=o.const,
            **common,
        )
    elif o.action == "LoRAPathAction":
        parser.add_argument(
            *o.flags, action=LoRAPaths, nargs=o.nargs, type=types[o.type or "str"], **common
        )
    elif o.action == "_StoreAction":
        # argparse's defaults are None: passing them is not passing anything.
        const = o.const if o.nargs == "?" else None  # argparse refuses it otherwise
        kind = types[o.type or "str"]  # no type is str's identity
        parser.add_argument(
            *o.flags, nargs=o.nargs, const=const, choices=o.choices, type=kind, **common
        )
    else:
        raise KeyError(f"option {o.flags[0]}: no stand-in for SGLang's action {o.action!r}")


class Refused(ValueError):
    """argparse refused a command line; ``str()`` of it is its error text."""


class CheckingParser(argparse.ArgumentParser):
    """Raises :class:`Refused` instead of printing usage and exiting (for checks)."""

    def error(self, message: str) -> Any:  # argparse's documented override point
        raise Refused(message)


def check(table: OptionTable, argv: Sequence[str]) -> argparse.Namespace:
    """Parse ``argv`` as SGLang would; raise :class:`Refused` with argparse's message."""
    try:
        return _checker(table).parse_args(list(argv))
    except Refused:
        raise
    except SystemExit:
        raise Refused("it would print the help and exit (a --help spelling)") from None
    except (AssertionError, ValueError) as exc:
        # SGLang itself would stop with a traceback here (e.g. a bad --lora-paths JSON).
        raise Refused(f"{type(exc).__name__}: {exc}") from None


@cache
def _checker(table: OptionTable) -> CheckingParser:
    # Tables compare by identity, and load() caches them: one parser per table.
    parser = CheckingParser(prog=table.prog, add_help=True)
    add_options(parser, table)
    return parser
