"""SGLang 0.5.23's start-up rules for speculative decoding, as the simulator applies them.

The order, the warnings and the error messages are SGLang's
(``handle_speculative_decoding``, ``_handle_dflash``, ``_handle_eagle_family``):
a command line SGLang refuses at start-up is refused here with the same
exception type and message, and what SGLang overrides with a warning is
overridden with the same warning. Algorithms SGLang has but the simulator does
not model (UNO, DSPARK, NGRAM, FROZEN_KV_MTP) are refused, saying so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_specdecode.sim.model import SpecSettings

# SpeculativeAlgorithm members in 0.5.23, and the aliases from_string accepts.
KNOWN = ("DFLASH", "UNO", "DSPARK", "EAGLE", "EAGLE3", "FROZEN_KV_MTP", "STANDALONE", "NGRAM")
ALIASES = {"NEXTN": "EAGLE"}
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "STANDALONE")
WINDOW_HONOURED = ("EAGLE", "EAGLE3", "DFLASH")
PAGE_TREE_BACKENDS = ("flashinfer", "fa3", "triton")
DEFAULT_DFLASH_BLOCK = 16
DEFAULT_DDTREE_BUDGET = 16
DEFAULT_DDTREE_TOPK = 2
AUTO_EAGLE = (3, 1, 4)  # _auto_choose_speculative_params for the simulator's model
MAX_RUNNING_SPEC = 48
MAX_RUNNING_WARNING = (
    "Max running requests is reset to 48 for speculative decoding. You can override this "
    "by explicitly setting --max-running-requests."
)


class InvalidArgs(ValueError):
    """SGLang would stop at start-up: ``kind`` is its exception type, the message its text."""

    def __init__(self, message: str, kind: str = "ValueError") -> None:
        super().__init__(message)
        self.kind = kind
        self.warnings: list[str] = []  # what SGLang logged before it stopped


@dataclass
class Resolution:
    """What the rules decided: field values, warnings, and the model's settings."""

    values: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    spec: SpecSettings = field(default_factory=SpecSettings)

    def get(self, name: str) -> Any:
        return self.values.get(name)

    def set(self, **values: Any) -> None:
        self.values.update(values)


def resolve(values: Mapping[str, Any], env: Mapping[str, str], *, ddtree: bool) -> Resolution:
    """Apply the rules to the given field ``values``; raise :class:`InvalidArgs`."""
    r = Resolution(dict(values))
    try:
        _resolve(r, env, ddtree=ddtree)
    except InvalidArgs as exc:
        exc.warnings = list(r.warnings)
        raise
    return r


def _resolve(r: Resolution, env: Mapping[str, str], *, ddtree: bool) -> None:
    algo = r.get("speculative_algorithm")
    if (
        r.get("speculative_draft_model_path") is not None
        and r.get("speculative_draft_model_revision") is None
    ):
        r.set(speculative_draft_model_revision="main")
    if algo is not None:
        algo = str(algo).upper()
        algo = ALIASES.get(algo, algo)
        r.set(speculative_algorithm=algo)
    _window_and_sink(r, algo)
    if algo is None or algo == "NONE":
        return
    if algo not in KNOWN and not (ddtree and algo == "DDTREE"):
        raise InvalidArgs(f"Unknown speculative algorithm name: {algo}")
    if algo == "DFLASH":
        _dflash(r)
    elif algo == "DDTREE":
        _ddtree(r, env)
    elif algo in EAGLE_FAMILY:
        _eagle_family(r, algo)
    else:
        raise InvalidArgs(
            f"speculative_algorithm={algo} is a real SGLang algorithm that the simulator does "
            "not model; use DFLASH, EAGLE, EAGLE3, STANDALONE (or DDTREE with --sim-build ddtree)",
            kind="NotImplementedError",
        )


def _window_and_sink(r: Resolution, algo: str | None) -> None:
    window = r.get("speculative_draft_window_size")
    if window is not None:
        if int(window) <= 0:
            raise InvalidArgs(f"--speculative-draft-window-size must be positive, got {window}.")
        if algo not in WINDOW_HONOURED:
            r.warnings.append(
                "--speculative-draft-window-size has no effect with "
                f"speculative_algorithm={algo} (honored by DFLASH, Llama EAGLE-3, and the "
                "EAGLE/MTP/NEXTN draft-decode path on the Triton/FlashInfer draft backends)."
            )
    sink = r.get("speculative_draft_sink_size")
    if sink is not None:
        if int(sink) < 0:
            raise InvalidArgs(f"--speculative-draft-sink-size must be non-negative, got {sink}.")
        if window is None:
            raise InvalidArgs(
                "--speculative-draft-sink-size requires --speculative-draft-window-size."
            )


def _max_running(r: Resolution) -> None:
    if r.get("max_running_requests") is None:
        r.set(max_running_requests=MAX_RUNNING_SPEC)
        r.warnings.append(MAX_RUNNING_WARNING)


def _force_one(r: Resolution, name: str, algo: str) -> None:
    value = r.get(name)
    if value is not None and int(value) != 1:
        r.warnings.append(f"{algo} only supports {name} == 1; overriding {name}={value} to 1.")
    r.set(**{name: 1})


def _fitting_window(r: Resolution, tokens: int) -> int | None:
    """The drafter window of a block drafter (DFLASH, DDTREE): never below the block."""
    window = r.get("speculative_draft_window_size")
    if window is not None and int(window) < tokens:
        raise InvalidArgs(
            "--speculative-draft-window-size must be >= --speculative-num-draft-tokens "
            f"(block_size). window_size={window}, block_size={tokens}."
        )
    return None if window is None else int(window)


def _dflash(r: Resolution) -> None:
    # SGLang's first DFLASH rule: only CUDA, NPU and XPU run it (seen with
    # SGLANG_USE_CPU_ENGINE=1 --device cpu, whose platform is CpuSRTPlatform).
    if r.get("device") == "cpu":
        raise InvalidArgs(
            "DFLASH speculative decoding is not supported by CpuSRTPlatform on device 'cpu'."
        )
    if int(r.get("pp_size") or 1) != 1:
        raise InvalidArgs("Currently DFLASH speculative decoding only supports pp_size == 1.")
    if r.get("speculative_draft_model_path") is None:
        raise InvalidArgs(
            "DFLASH speculative decoding requires setting --speculative-draft-model-path."
        )
    _force_one(r, "speculative_num_steps", "DFLASH")
    _force_one(r, "speculative_eagle_topk", "DFLASH")
    block = r.get("speculative_dflash_block_size")
    tokens = r.get("speculative_num_draft_tokens")
    if block is not None:
        if int(block) <= 0:
            raise InvalidArgs(
                f"DFLASH requires --speculative-dflash-block-size to be positive, got {block}."
            )
        if tokens is not None and int(tokens) != int(block):
            raise InvalidArgs(
                "Both --speculative-num-draft-tokens and --speculative-dflash-block-size are "
                "set but they differ. For DFLASH they must match. "
                f"speculative_num_draft_tokens={tokens}, speculative_dflash_block_size={block}."
            )
        r.set(speculative_num_draft_tokens=int(block))
    if r.get("speculative_num_draft_tokens") is None:
        r.warnings.append(
            "Failed to infer DFLASH block_size from draft model config; defaulting "
            "speculative_num_draft_tokens to 16. Error: the simulator reads no draft model"
        )
        r.warnings.append(
            f"speculative_num_draft_tokens is not set; defaulting to {DEFAULT_DFLASH_BLOCK} "
            "for DFLASH."
        )
        r.set(speculative_num_draft_tokens=DEFAULT_DFLASH_BLOCK)
    tokens = int(r.get("speculative_num_draft_tokens"))
    if tokens < 1:
        raise InvalidArgs(f"speculative_num_draft_tokens must be >= 1, got {tokens}.")
    window = _fitting_window(r, tokens)
    _max_running(r)
    r.spec = SpecSettings("DFLASH", tokens, 1, 1, window)


def _ddtree(r: Resolution, env: Mapping[str, str]) -> None:
    # DDTree PR builds: DFLASH's drafter inside a tree verifier; topk from the environment.
    if r.get("speculative_draft_model_path") is None:
        raise InvalidArgs(
            "DDTREE speculative decoding requires setting --speculative-draft-model-path."
        )
    raw = env.get("SGLANG_DDTREE_MAX_TOPK", str(DEFAULT_DDTREE_TOPK))
    try:
        topk = int(raw)
    except ValueError:
        topk = 0
    if topk < 1:
        raise InvalidArgs(f"SGLANG_DDTREE_MAX_TOPK must be an integer >= 1, got {raw!r}")
    tokens = int(r.get("speculative_num_draft_tokens") or DEFAULT_DFLASH_BLOCK)
    budget = int(r.get("speculative_ddtree_budget") or DEFAULT_DDTREE_BUDGET)
    if min(tokens, budget) < 1:
        raise InvalidArgs(f"DDTREE needs draft tokens and budget >= 1, got {tokens}, {budget}.")
    window = _fitting_window(r, tokens)
    r.set(
        speculative_num_draft_tokens=tokens,
        speculative_ddtree_budget=budget,
        speculative_eagle_topk=topk,
        speculative_num_steps=1,
    )
    _max_running(r)
    r.spec = SpecSettings("DDTREE", tokens, topk, 1, window, budget)


def _eagle_family(r: Resolution, algo: str) -> None:
    _max_running(r)
    steps = r.get("speculative_num_steps")
    if not r.get("speculative_adaptive") and steps is None:
        if r.get("speculative_eagle_topk") is not None or (
            r.get("speculative_num_draft_tokens") is not None
        ):
            # SGLang's bare ``assert``: the traceback ends in "AssertionError".
            raise InvalidArgs("", kind="AssertionError")
        steps, topk, tokens = AUTO_EAGLE
        r.set(
            speculative_num_steps=steps,
            speculative_eagle_topk=topk,
            speculative_num_draft_tokens=tokens,
        )
    steps = int(r.get("speculative_num_steps"))
    topk = r.get("speculative_eagle_topk")
    if topk == 1 and r.get("speculative_num_draft_tokens") != steps + 1:
        r.warnings.append(
            "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when "
            "speculative_eagle_topk == 1"
        )
        r.set(speculative_num_draft_tokens=steps + 1)
    if topk is None:
        raise InvalidArgs(
            "'>' not supported between instances of 'NoneType' and 'int'", kind="TypeError"
        )
    backend = r.get("attention_backend")
    if int(topk) > 1 and int(r.get("page_size") or 1) > 1 and backend not in PAGE_TREE_BACKENDS:
        raise InvalidArgs(
            "speculative_eagle_topk > 1 with page_size > 1 is only supported on "
            f"{PAGE_TREE_BACKENDS}; got attention_backend={backend!r}. Use page_size == 1 or "
            "one of those backends."
        )
    tokens = r.get("speculative_num_draft_tokens")
    if tokens is None:
        raise InvalidArgs(
            f"{algo} with speculative_eagle_topk={topk} needs --speculative-num-draft-tokens "
            "in the simulator",
            kind="NotImplementedError",
        )
    if r.get("speculative_draft_model_path") is None:
        raise InvalidArgs(
            f"{algo} in the simulator needs --speculative-draft-model-path (SGLang takes "
            "the drafter from the checkpoint only for MTP models)",
            kind="NotImplementedError",
        )
    window = r.get("speculative_draft_window_size")
    r.spec = SpecSettings(
        "EAGLE", int(tokens), int(topk), steps, None if window is None else int(window)
    )
