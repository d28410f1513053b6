"""Facts read from SGLang's own wheels: its launch options and ``ServerArgs`` fields.

A neutral data package (layer 0): the plugin's dialects check rendered flags
against it, and the simulator builds its parser and ``/server_info`` from it,
without either importing the other. ``sglang-<version>.json`` is written by
:mod:`pytest_specdecode.facts.regenerate` from the release's wheel; it is data,
never edited by hand.

Builds: ``release`` is the table as the wheel has it. ``legacy`` and
``ddtree`` stand for builds whose wheels are not published (older DFlash
builds, DDTree PR builds): the release table plus their known differences
(:data:`DIFFERENCES`), the best knowledge there is, and said so in messages.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache, cached_property
from importlib import resources
from types import MappingProxyType
from typing import Any

from pytest_specdecode.facts.secrets import is_secret_name

VERSIONS = ("0.5.23",)
NEWEST = VERSIONS[-1]
BUILDS = ("release", "legacy", "ddtree")

# Actions that take no value on the command line.
_SWITCHES = (
    "_StoreTrueAction",
    "_StoreFalseAction",
    "_StoreConstAction",
    "BooleanOptionalAction",
    "DeprecatedStoreTrueAction",
)


@dataclass(frozen=True)
class Option:
    """One launch option as SGLang's argparse parser holds it."""

    flags: tuple[str, ...]
    dest: str
    action: str
    nargs: int | str | None = None
    type: str | None = None
    choices: tuple[Any, ...] | None = None
    default: Any = None
    metavar: Any = None
    const: Any = None
    help: str = ""

    @property
    def takes_value(self) -> bool:
        """Whether the option is followed by a value (``--page-size 16``)."""
        return self.nargs != 0 and self.action not in _SWITCHES

    @property
    def switch(self) -> bool:
        """A bare flag that stores a boolean (``--enable-metrics``, ``--no-x``)."""
        return not self.takes_value

    @property
    def secret(self) -> bool:
        """Whether the option's value is a secret (an API key, a password): see
        :mod:`pytest_specdecode.facts.secrets`."""
        return self.takes_value and any(map(is_secret_name, (self.dest, *self.flags)))


@dataclass(frozen=True)
class Difference:
    """How an unpublished build's table differs from the release it is based on."""

    description: str
    removed: tuple[str, ...] = ()  # flags
    added: tuple[Option, ...] = ()
    after: str = ""  # the added options follow this flag (argparse's prefix order)
    renamed_fields: Mapping[str, str] = field(default_factory=dict)


DIFFERENCES: Mapping[str, Difference] = MappingProxyType(
    {
        "legacy": Difference(
            "older DFlash builds spell the drafter window --speculative-dflash-draft-window-size",
            removed=("--speculative-draft-window-size",),
            added=(
                Option(
                    ("--speculative-dflash-draft-window-size",),
                    "speculative_dflash_draft_window_size",
                    "_StoreAction",
                    type="int",
                    help="The drafter's sliding attention window (older DFlash builds).",
                ),
            ),
            after="--speculative-dflash-block-size",
            renamed_fields={
                "speculative_draft_window_size": "speculative_dflash_draft_window_size"
            },
        ),
        "ddtree": Difference(
            "DDTree PR builds add --speculative-ddtree-budget and the DDTREE algorithm",
            added=(
                Option(
                    ("--speculative-ddtree-budget",),
                    "speculative_ddtree_budget",
                    "_StoreAction",
                    type="int",
                    help="The DDTree tree budget (DDTree PR builds).",
                ),
            ),
            after="--speculative-draft-window-size",
        ),
    }
)


@dataclass(frozen=True, eq=False)
class OptionTable:
    """Every launch option and ``ServerArgs`` field of one SGLang build."""

    version: str
    build: str
    prog: str
    options: tuple[Option, ...]
    fields: Mapping[str, Any]
    cuda_graph_config_keys: Mapping[str, tuple[str, ...]]

    @property
    def name(self) -> str:
        """``SGLang 0.5.23``, or ``SGLang 0.5.23 + ddtree's known differences``."""
        base = f"SGLang {self.version}"
        return base if self.build == "release" else f"{base} + {self.build}'s known differences"

    def flags(self) -> tuple[str, ...]:
        """Every spelling, in the parser's order (the order of prefix matches)."""
        return tuple(f for o in self.options for f in o.flags)

    @cached_property
    def _by_flag(self) -> dict[str, Option]:
        return {f: o for o in self.options for f in o.flags}

    def option(self, flag: str) -> Option | None:
        """The option spelled exactly ``flag``."""
        return self._by_flag.get(flag)

    def resolve(self, flag: str) -> Option | None:
        """The option ``flag`` names: spelled exactly, or (``--``) an abbreviation the
        parser's prefix matching takes for it alone."""
        option = self.option(flag)
        if option is None and flag.startswith("--"):
            matches = self.prefix_matches(flag)
            option = self.option(matches[0]) if len(matches) == 1 else None
        return option

    def by_dest(self, dest: str) -> Option | None:
        """The option storing ``dest`` (the first one, as argparse reports it)."""
        return next((o for o in self.options if o.dest == dest), None)

    def secret_options(self) -> tuple[Option, ...]:
        """The options whose value is a secret, in the parser's order."""
        return tuple(o for o in self.options if o.secret)

    def prefix_matches(self, text: str) -> list[str]:
        """Spellings ``text`` abbreviates, as argparse's prefix matching finds them."""
        return [f for f in self.flags() if f.startswith(text)]

    def gives(self, argv: Sequence[str], dest: str) -> bool:
        """Whether ``argv`` sets the option storing ``dest``, however it is spelled: any
        of its flags, as ``--flag value`` or ``--flag=value``, or an abbreviation the
        parser's prefix matching takes for it alone."""
        named = (self.resolve(w.split("=", 1)[0]) for w in argv if w.startswith("-"))
        return any(option is not None and option.dest == dest for option in named)


def _option(raw: Mapping[str, Any]) -> Option:
    choices = raw.get("choices")
    return Option(
        flags=tuple(raw["flags"]),
        dest=raw["dest"],
        action=raw["action"],
        nargs=raw.get("nargs"),
        type=raw.get("type"),
        choices=None if choices is None else tuple(choices),
        default=raw.get("default"),
        metavar=raw.get("metavar"),
        const=raw.get("const", raw.get("const_value")),
        help=raw.get("help", ""),
    )


@cache
def _release(version: str) -> OptionTable:
    if version not in VERSIONS:
        raise KeyError(f"no SGLang {version!r} table; known: {', '.join(VERSIONS)}")
    text = resources.files(__package__).joinpath(f"sglang-{version}.json").read_text("utf-8")
    raw = json.loads(text)
    return OptionTable(
        version=version,
        build="release",
        prog=raw["prog"],
        options=tuple(_option(o) for o in raw["options"]),
        fields=MappingProxyType(dict(raw["fields"])),
        cuda_graph_config_keys=MappingProxyType(
            {k: tuple(v) for k, v in raw["cuda_graph_config_keys"].items()}
        ),
    )


@cache
def load(version: str = NEWEST, build: str = "release") -> OptionTable:
    """The table of ``version`` (``build``: release, legacy or ddtree); KeyError if unknown."""
    table = _release(version)
    if build == "release":
        return table
    if build not in DIFFERENCES:
        raise KeyError(f"no build {build!r}; known: {', '.join(BUILDS)}")
    diff = DIFFERENCES[build]
    options: list[Option] = []
    for option in table.options:
        kept = tuple(f for f in option.flags if f not in diff.removed)
        if kept:
            options.append(option if kept == option.flags else replace(option, flags=kept))
        if diff.after in option.flags:
            options.extend(diff.added)
    fields = {diff.renamed_fields.get(k, k): v for k, v in table.fields.items()}
    fields.update({o.dest: o.default for o in diff.added})
    return replace(table, build=build, options=tuple(options), fields=MappingProxyType(fields))
