"""Command line: SGLang's flag spellings, ``--sim-*`` flags, and SGLang-like validation.

``parse(argv)`` exits 2 with argparse's message on an unknown flag, as
SGLang does. ``resolve(ns, env)`` applies SGLang's rules (DFLASH forces topk 1
and num_steps 1 with a warning; DDTree takes topk from
``SGLANG_DDTREE_MAX_TOPK``) and raises :class:`InvalidArgs` for combinations
SGLang rejects.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pytest_specdecode.sim.faults import FAULT_HELP, Faults, parse_fault
from pytest_specdecode.sim.model import SpecSettings

ALGORITHMS = ("DFLASH", "DDTREE", "EAGLE", "NONE")
LEGACY_WINDOW_FLAG = "--speculative-dflash-draft-window-size"
WINDOW_FLAG = "--speculative-draft-window-size"
DEFAULT_MODEL_PATH = "sim/model"
DEFAULT_DFLASH_BLOCK = 16
DEFAULT_DDTREE_BUDGET = 16
DEFAULT_DDTREE_TOPK = 2
DEFAULT_EAGLE = (3, 1, 4)  # num_steps, topk, num_draft_tokens
VERSION = "0.5.23-sim"


class InvalidArgs(ValueError):
    """A flag combination SGLang would reject; the message is one line."""


@dataclass(frozen=True)
class ServerArgs:
    """Everything the server needs, resolved."""

    model_path: str
    served_model_name: str
    host: str
    port: int
    tp_size: int
    api_key: str | None
    skip_server_warmup: bool
    enable_metrics: bool
    draft_model_path: str | None
    spec: SpecSettings
    seed: int
    load_seconds: float
    warmup_seconds: float
    time_scale: float
    quality: float
    answers: str | None
    faults: Faults
    legacy_flags: bool
    warnings: tuple[str, ...] = field(default=())


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


def build_parser(legacy: bool) -> argparse.ArgumentParser:
    """The parser; ``legacy`` mimics an older build that spells the window flag differently."""
    p = argparse.ArgumentParser(
        prog="python -m pytest_specdecode.sim",
        description="SGLang-compatible server simulator (not a GPU: its figures are simulated).",
    )
    p.add_argument("--model-path", "--model", default=DEFAULT_MODEL_PATH)
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--tokenizer-path", default=None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--tp-size", "--tp", type=int, default=1)
    p.add_argument("--api-key", default=None)
    p.add_argument("--skip-server-warmup", action="store_true")
    p.add_argument("--enable-metrics", action="store_true")
    # Accepted and ignored, so launch commands written for SGLang run unchanged.
    p.add_argument("--trust-remote-code", action="store_true")
    p.add_argument("--disable-radix-cache", action="store_true")
    for ignored in (
        "--mem-fraction-static",
        "--context-length",
        "--dtype",
        "--attention-backend",
        "--max-running-requests",
        "--cuda-graph-max-bs",
        "--chunked-prefill-size",
        "--log-level",
    ):
        p.add_argument(ignored, default=None)
    p.add_argument("--speculative-algorithm", type=str.upper, choices=ALGORITHMS, default=None)
    p.add_argument("--speculative-draft-model-path", default=None)
    p.add_argument(
        "--speculative-num-draft-tokens",
        "--speculative-dflash-block-size",
        dest="speculative_num_draft_tokens",
        type=int,
        default=None,
    )
    p.add_argument("--speculative-eagle-topk", type=int, default=None)
    p.add_argument("--speculative-num-steps", type=int, default=None)
    p.add_argument(
        LEGACY_WINDOW_FLAG if legacy else WINDOW_FLAG,
        dest="speculative_draft_window_size",
        type=int,
        default=None,
    )
    p.add_argument("--speculative-ddtree-budget", type=int, default=None)
    sim = p.add_argument_group("simulator")
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
        help="seconds /health answers 503 after listening. Default: %(default)r",
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
        "--sim-legacy-flags",
        action="store_true",
        help=f"behave like an older build: accept {LEGACY_WINDOW_FLAG} and reject {WINDOW_FLAG}",
    )
    return p


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """Parse ``argv`` (exits 2 on unknown flags, like SGLang's argparse)."""
    legacy = "--sim-legacy-flags" in argv
    return build_parser(legacy).parse_args(list(argv))


def resolve(ns: argparse.Namespace, env: Mapping[str, str]) -> ServerArgs:
    """Apply SGLang's defaults and rules; raise :class:`InvalidArgs` on bad combinations."""
    warnings: list[str] = []
    algo = ns.speculative_algorithm or "NONE"
    k = ns.speculative_num_draft_tokens
    topk = ns.speculative_eagle_topk
    steps = ns.speculative_num_steps
    window = ns.speculative_draft_window_size
    budget = ns.speculative_ddtree_budget
    draft = ns.speculative_draft_model_path
    if ns.tp_size < 1:
        raise InvalidArgs(f"tp_size must be >= 1, got {ns.tp_size!r}")
    if not 0 <= ns.port <= 65535:
        raise InvalidArgs(f"port must be in 0..65535, got {ns.port!r}")
    for name, value in (
        ("speculative_num_draft_tokens", k),
        ("speculative_num_steps", steps),
        ("speculative_eagle_topk", topk),
        ("speculative_ddtree_budget", budget),
        ("speculative_draft_window_size", window),
    ):
        if value is not None and value < 1:
            raise InvalidArgs(f"{name} must be >= 1, got {value!r}")
    if algo == "NONE":
        k = topk = steps = window = budget = None
    else:
        if draft is None:
            raise InvalidArgs(
                f"speculative_draft_model_path is required for speculative_algorithm={algo!r}; "
                "pass --speculative-draft-model-path"
            )
        if algo == "DFLASH":
            k = k or DEFAULT_DFLASH_BLOCK
            if topk not in (None, 1):
                warnings.append(
                    f"DFLASH only supports speculative_eagle_topk=1; got {topk}, using 1."
                )
            if steps not in (None, 1):
                warnings.append(
                    f"DFLASH only supports speculative_num_steps=1; got {steps}, using 1."
                )
            topk, steps, budget = 1, 1, None
        elif algo == "DDTREE":
            k = k or DEFAULT_DFLASH_BLOCK
            raw = env.get("SGLANG_DDTREE_MAX_TOPK", str(DEFAULT_DDTREE_TOPK))
            try:
                topk = int(raw)
            except ValueError:
                topk = 0
            if topk < 1:
                raise InvalidArgs(f"SGLANG_DDTREE_MAX_TOPK must be an integer >= 1, got {raw!r}")
            steps = 1
            budget = budget or DEFAULT_DDTREE_BUDGET
        else:  # EAGLE
            d_steps, d_topk, d_k = DEFAULT_EAGLE
            steps, topk, k = steps or d_steps, topk or d_topk, k or d_k
            budget = None
        if window is not None and window < k:
            raise InvalidArgs(
                f"speculative_draft_window_size ({window}) must be >= "
                f"speculative_num_draft_tokens ({k}); pass a larger window or omit it"
            )
    faults = Faults.of(ns.sim_fault)
    spec = SpecSettings(algo, k, topk, steps, window, budget)
    return ServerArgs(
        model_path=ns.model_path,
        served_model_name=ns.served_model_name or ns.model_path,
        host=ns.host,
        port=ns.port,
        tp_size=ns.tp_size,
        api_key=ns.api_key,
        skip_server_warmup=ns.skip_server_warmup,
        enable_metrics=ns.enable_metrics,
        draft_model_path=draft if algo != "NONE" else None,
        spec=spec,
        seed=ns.sim_seed,
        load_seconds=ns.sim_load_seconds,
        warmup_seconds=0.0 if ns.skip_server_warmup else ns.sim_warmup_seconds,
        time_scale=ns.sim_time_scale,
        quality=ns.sim_quality,
        answers=ns.sim_answers,
        faults=faults,
        legacy_flags=ns.sim_legacy_flags,
        warnings=tuple(warnings),
    )
