"""The simulator's command line: SGLang's real option table, plus ``--sim-*``.

Two parsers, so that the simulator's own options never change what SGLang's
accept: ``--sim-*`` options are taken out first by exact spelling (no
abbreviations), then everything else goes to a parser built from the facts
table of the chosen build (:mod:`pytest_specdecode.facts.argparser`): same
spellings, prefix matching, ``--no-`` forms, types, choices and ``nargs`` as
``sglang serve``, and the same exit status 2 and error line when it refuses.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_specdecode import facts
from pytest_specdecode.facts.argparser import add_options
from pytest_specdecode.sim.faults import FAULT_HELP, parse_fault

# --sim-build: which SGLang the simulator plays.
SIM_BUILDS = {
    "release": "SGLang's release table (default)",
    "legacy": "an older DFlash build: --speculative-dflash-draft-window-size",
    "ddtree": "a DDTree PR build: DDTREE, --speculative-ddtree-budget, SGLANG_DDTREE_MAX_TOPK",
}


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text!r}")
    return value


def _unit(text: str) -> float:
    value = _non_negative(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text!r}")
    return value


def _restart_noise(text: str) -> float:
    value = _non_negative(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"must be >= 0 and < 1, got {text!r}")
    return value


def sim_parser() -> argparse.ArgumentParser:
    """The ``--sim-*`` options alone (exact spellings only)."""
    p = argparse.ArgumentParser(
        prog="python -m pytest_specdecode.sim",
        add_help=False,
        allow_abbrev=False,
        description="Simulator options (not SGLang's; the simulator's figures are simulated).",
    )
    sim = p.add_argument_group("simulator (--sim-*)")
    sim.add_argument("--sim-seed", type=int, default=0, help="Default: %(default)r")
    sim.add_argument(
        "--sim-load-seconds",
        type=_non_negative,
        default=1.0,
        help="seconds the port stays closed while 'loading weights'. Default: %(default)r",
    )
    sim.add_argument(
        "--sim-warmup-seconds",
        type=_non_negative,
        default=0.5,
        help="seconds from the engine's last step (CUDA graphs) until /health answers 200; "
        "503 while the HTTP server listens before that. Default: %(default)r",
    )
    sim.add_argument(
        "--sim-kv-seconds",
        type=_non_negative,
        default=0.0,
        help="seconds allocating the KV cache, after the weights (port still closed). "
        "Default: %(default)r",
    )
    sim.add_argument(
        "--sim-graph-seconds",
        type=_non_negative,
        default=0.0,
        help="seconds capturing CUDA graphs, after the KV cache (port still closed). "
        "Default: %(default)r",
    )
    sim.add_argument(
        "--sim-cached-load-fraction",
        type=_unit,
        default=0.05,
        help="with --weight-cache-mode client and a weight-cache daemon answering, loading "
        "takes this fraction of --sim-load-seconds. Default: %(default)r",
    )
    sim.add_argument(
        "--sim-time-scale",
        type=_non_negative,
        default=1.0,
        help="multiplies modelled GPU time; 0 = no delay. Default: %(default)r",
    )
    sim.add_argument(
        "--sim-quality",
        type=_unit,
        default=1.0,
        help="probability that a coding answer is correct. Default: %(default)r",
    )
    sim.add_argument(
        "--sim-answers",
        default=None,
        help='JSON list of {"match": str, "response": str}; first match wins. Default: none',
    )
    sim.add_argument("--sim-fault", type=parse_fault, action="append", default=[], help=FAULT_HELP)
    sim.add_argument(
        "--sim-state-file",
        default=None,
        help="file recording that a server started (the *-on-first-start faults). Default: none",
    )
    sim.add_argument(
        "--sim-restart-noise",
        type=_restart_noise,
        default=0.0,
        help="each server start runs at its own speed, a factor drawn within 1 +- F from "
        "--sim-seed and the start's number (needs --sim-start-count-file). Default: %(default)r",
    )
    sim.add_argument(
        "--sim-start-count-file",
        default=None,
        help="file counting server starts across processes (--sim-restart-noise). Default: none",
    )
    sim.add_argument(
        "--sim-build",
        choices=tuple(SIM_BUILDS),
        default=None,
        help="which SGLang to play: "
        + "; ".join(f"{k}: {v}" for k, v in SIM_BUILDS.items())
        + ". Default: 'release'",
    )
    sim.add_argument(
        "--sim-legacy-flags",
        action="store_true",
        help="same as --sim-build legacy (kept for old launch lines)",
    )
    return p


class SGLangParser(argparse.ArgumentParser):
    """SGLang's parser; its help ends with the simulator's options."""

    def __init__(self, *args: Any, extra_help: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.extra_help = extra_help

    def format_help(self) -> str:
        return super().format_help() + "\n" + self.extra_help

    def note_deprecated(self, message: str) -> None:
        # SGLang logs this before logging is set up: Python prints the bare message.
        print(f"\033[1;33m{message}\033[0m", file=sys.stderr)


@dataclass(frozen=True)
class Parsed:
    """A parsed command line: SGLang's values, the simulator's, and what was given."""

    ns: argparse.Namespace
    sim: argparse.Namespace
    table: facts.OptionTable
    given: tuple[str, ...]  # dests whose value differs from the default, in table order

    def value(self, dest: str) -> Any:
        return getattr(self.ns, dest, None)


def build(sim: argparse.Namespace) -> str:
    """The build ``--sim-build`` / ``--sim-legacy-flags`` select."""
    return str(sim.sim_build or ("legacy" if sim.sim_legacy_flags else "release"))


_PARSERS: dict[tuple[str, str], SGLangParser] = {}


def sglang_parser(table: facts.OptionTable) -> SGLangParser:
    """The parser of ``table`` (built once per build: argparse parsers are reusable)."""
    key = (table.version, table.build)
    if key not in _PARSERS:
        parser = SGLangParser(
            prog=table.prog,
            description=f"SGLang-compatible server simulator playing {table.name} "
            "(not a GPU: its figures are simulated).",
            extra_help=sim_parser().format_help(),
        )
        add_options(parser, table)
        _PARSERS[key] = parser
    return _PARSERS[key]


def parse(argv: Sequence[str], version: str = facts.NEWEST) -> Parsed:
    """Parse ``argv``; exits 2 with argparse's message on anything SGLang would refuse."""
    parser = sim_parser()
    sim, rest = parser.parse_known_args(list(argv))
    needing = [f.name for f in sim.sim_fault if f.name.endswith("-on-first-start")]
    if needing and not sim.sim_state_file:
        parser.error(f"--sim-fault {needing[0]} needs --sim-state-file PATH")
    if sim.sim_restart_noise > 0 and not sim.sim_start_count_file:
        # Without a count kept outside the process every start would draw the same factor.
        parser.error("--sim-restart-noise needs --sim-start-count-file PATH")
    table = facts.load(version, build(sim))
    ns = sglang_parser(table).parse_args(rest)
    given = tuple(o.dest for o in table.options if getattr(ns, o.dest, o.default) != o.default)
    return Parsed(ns, sim, table, tuple(dict.fromkeys(given)))
