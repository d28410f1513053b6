"""Command line to resolved server args: SGLang's parser, SGLang's start-up rules.

``parse(argv)`` takes SGLang's real option set (exit 2 with argparse's line on
anything ``sglang serve`` refuses, see :mod:`pytest_specdecode.sim.options`).
``resolve(parsed, env)`` builds every ``ServerArgs`` field (SGLang's declared
defaults, then the values given), applies SGLang's speculative-decoding rules
(:mod:`pytest_specdecode.sim.spec_rules`) and raises :class:`InvalidArgs` with
SGLang's exception type and message where SGLang would stop. Options the
simulator accepts but does not model are listed in ``unmodelled``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_specdecode.sim.faults import Faults
from pytest_specdecode.sim.generation import CONTEXT_LENGTH
from pytest_specdecode.sim.model import SpecSettings
from pytest_specdecode.sim.options import Parsed, parse
from pytest_specdecode.sim.spec_rules import InvalidArgs
from pytest_specdecode.sim.spec_rules import resolve as resolve_spec

__all__ = ["InvalidArgs", "Parsed", "ServerArgs", "parse", "resolve"]

DEFAULT_MODEL_PATH = "sim/model"
VERSION = "0.5.23"
REDACTED = "<redacted>"

# Options whose value changes what the simulator does; every other one is
# accepted, reported in /server_info, and listed as unmodelled.
MODELLED = frozenset(
    {
        "model_path", "served_model_name", "tokenizer_path", "host", "port", "tp_size",
        "api_key", "skip_server_warmup", "enable_metrics", "random_seed", "context_length",
        "max_running_requests", "log_level", "page_size", "attention_backend", "pp_size",
        "weight_cache_mode", "weight_cache_socket",
        "speculative_algorithm", "speculative_draft_model_path",
        "speculative_num_draft_tokens", "speculative_dflash_block_size",
        "speculative_eagle_topk", "speculative_num_steps", "speculative_draft_window_size",
        "speculative_dflash_draft_window_size", "speculative_ddtree_budget",
        "speculative_draft_model_revision",
    }
)  # fmt: skip


@dataclass(frozen=True)
class ServerArgs:
    """Everything the server needs, resolved."""

    model_path: str
    served_model_name: str
    host: str
    port: int
    api_key: str | None
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
    warnings: tuple[str, ...] = ()
    fields: Mapping[str, Any] = field(default_factory=dict)
    unmodelled: tuple[str, ...] = ()
    build: str = "release"
    state_file: str | None = None
    restart_noise: float = 0.0
    start_count_file: str | None = None
    speed_factor: float = 1.0  # this start's, under --sim-restart-noise (sim.restarts)
    # The context the server enforces: --context-length, else the model's own.
    context_len: int = CONTEXT_LENGTH
    kv_seconds: float = 0.0
    graph_seconds: float = 0.0
    cached_load_fraction: float = 0.05
    # SGLang's --weight-cache-mode / --weight-cache-socket (sim.weight_cache).
    weight_cache_mode: str = "off"
    weight_cache_socket: str | None = None

    def __repr__(self) -> str:
        # Logged at start-up like SGLang's server_args line: never with the key.
        shown = {k: (REDACTED if k == "api_key" and v else v) for k, v in self.fields.items()}
        return "ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"


# A config.json is a few kB; a bigger file is not read (the model path is the user's).
MODEL_CONFIG_CAP = 1 << 20


def model_context(model_path: str) -> int | None:
    """The context length of the model at ``model_path``, as SGLang reads it from the
    model's ``config.json`` (``max_position_embeddings``); None when there is none."""
    try:
        with open(os.path.join(model_path, "config.json"), "rb") as fh:
            config = json.loads(fh.read(MODEL_CONFIG_CAP + 1)[:MODEL_CONFIG_CAP])
    except (OSError, ValueError):
        return None
    value = config.get("max_position_embeddings") if isinstance(config, dict) else None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def resolve(parsed: Parsed, env: Mapping[str, str]) -> ServerArgs:
    """SGLang's defaults and start-up rules; raise :class:`InvalidArgs` where SGLang stops."""
    table = parsed.table
    values: dict[str, Any] = dict(table.fields)
    for dest in parsed.given:
        if dest in values:
            values[dest] = parsed.value(dest)
    if values.get("model_path") is None:
        values["model_path"] = DEFAULT_MODEL_PATH
    window_field = "speculative_draft_window_size"
    if table.build == "legacy":
        # The older build's field, read under the release's name by the rules.
        values[window_field] = values.pop("speculative_dflash_draft_window_size", None)
    tp = int(values.get("tp_size") or 1)
    port = int(values["port"])
    if tp < 1:
        raise InvalidArgs(f"tp_size must be >= 1, got {tp}")
    if not 0 <= port <= 65535:
        raise InvalidArgs(f"port must be in 0..65535, got {port}")
    rules = resolve_spec(values, env, ddtree=table.build == "ddtree")
    values = rules.values
    if table.build == "legacy":
        values["speculative_dflash_draft_window_size"] = values.pop(window_field)
    values["served_model_name"] = values.get("served_model_name") or values["model_path"]
    values["tokenizer_path"] = values.get("tokenizer_path") or values["model_path"]
    # SGLang keeps the field as given (null by default) and takes the context from
    # the model's config.json when it is not; a model path that is no directory here
    # (a GPU box's launch line) gets the simulator's own.
    context_len = values.get("context_length") or model_context(values["model_path"])
    sim = parsed.sim
    seed = values.get("random_seed")
    values["random_seed"] = sim.sim_seed if seed is None else seed
    spec = rules.spec
    return ServerArgs(
        model_path=values["model_path"],
        served_model_name=values["served_model_name"],
        host=values["host"],
        port=port,
        api_key=values.get("api_key"),
        enable_metrics=bool(values.get("enable_metrics")),
        draft_model_path=values.get("speculative_draft_model_path") if spec.speculative else None,
        spec=spec,
        seed=int(values["random_seed"]),
        load_seconds=sim.sim_load_seconds,
        warmup_seconds=0.0 if values.get("skip_server_warmup") else sim.sim_warmup_seconds,
        time_scale=sim.sim_time_scale,
        quality=sim.sim_quality,
        answers=sim.sim_answers,
        state_file=sim.sim_state_file,
        restart_noise=sim.sim_restart_noise,
        start_count_file=sim.sim_start_count_file,
        faults=Faults.of(sim.sim_fault),
        warnings=tuple(rules.warnings),
        fields=values,
        unmodelled=tuple(d for d in parsed.given if d not in MODELLED),
        build=table.build,
        context_len=context_len or CONTEXT_LENGTH,
        kv_seconds=sim.sim_kv_seconds,
        graph_seconds=sim.sim_graph_seconds,
        cached_load_fraction=sim.sim_cached_load_fraction,
        weight_cache_mode=str(values.get("weight_cache_mode") or "off"),
        weight_cache_socket=values.get("weight_cache_socket"),
    )
