"""``/server_info`` as SGLang 0.5.23 builds it.

Every ``ServerArgs`` field flat (``resolved_dict()``: declared defaults, the
values given, what resolution decided), then ``launch_command``, the
scheduler's start-up facts, ``kv_events``, ``startup_time``,
``internal_states`` (one per DP rank: the fields again plus topology, memory
usage and, once a verify step ran, ``avg_spec_accept_length``), ``version``
and ``frontend``. The simulator adds ``simulator: true``, ``sim_*`` keys and
``sim_unmodelled`` (options it accepted but does not model).
"""

from __future__ import annotations

from typing import Any

from pytest_specdecode.sim.cli import REDACTED, VERSION, ServerArgs
from pytest_specdecode.sim.model import SpecSettings

GRAPH_PHASES = (
    "prefill",
    "decode",
    "target_verify",
    "draft_prefill",
    "draft_decode",
    "draft_extend",
)
MAX_TOTAL_TOKENS = 425_000  # what a 80 GB GPU leaves for the KV cache, roughly


def flat_fields(args: ServerArgs, spec: SpecSettings) -> dict[str, Any]:
    """The resolved fields; under ``stale-config`` the window the server really runs."""
    fields = dict(args.fields)
    for key in ("api_key", "admin_api_key"):
        if fields.get(key):
            fields[key] = REDACTED
    if args.faults.stale_config:
        key = (
            "speculative_dflash_draft_window_size"
            if "speculative_dflash_draft_window_size" in fields
            else "speculative_draft_window_size"
        )
        fields[key] = spec.window
    return fields


def memory_usage(spec: SpecSettings) -> dict[str, Any]:
    """``internal_states[i].memory_usage`` in SGLang's shape (GB, tokens)."""
    graph = dict.fromkeys(GRAPH_PHASES, 0.0)
    graph["decode"] = 1.2
    if spec.speculative:
        graph.update(target_verify=0.6, draft_decode=0.3, draft_extend=0.2)
    return {
        "weight": 16.4,
        "kvcache": 40.0,
        "startup_available": 78.52,
        "token_capacity": MAX_TOTAL_TOKENS,
        "token_capacity_swa": None,
        "graph": graph,
    }


def server_info(
    args: ServerArgs,
    spec: SpecSettings,
    *,
    launch_command: str,
    startup_time: float,
    avg_accept_length: float | None,
) -> dict[str, Any]:
    """The whole ``/server_info`` body (the server runs ``spec``)."""
    fields = flat_fields(args, spec)
    state: dict[str, Any] = dict(fields)
    dp = int(fields.get("dp_size") or 1)
    state.update(
        world_size=dp * int(fields.get("tp_size") or 1) * int(fields.get("pp_size") or 1),
        startup_time=startup_time,
        effective_max_running_requests_per_dp=fields.get("max_running_requests") or 4096,
        last_gen_throughput=0.0,
        memory_usage=memory_usage(spec),
    )
    if spec.speculative and avg_accept_length is not None:
        state["avg_spec_accept_length"] = avg_accept_length
    # SGLang: max_req_len = min(context - 1, pool - 1), and 5 of it are kept back.
    max_req_input_len = min(args.context_len - 1, MAX_TOTAL_TOKENS - 1) - 5
    return {
        **fields,
        "launch_command": launch_command,
        "status": "ready",
        "max_total_num_tokens": MAX_TOTAL_TOKENS,
        "max_req_input_len": max_req_input_len,
        "hicache_object_layout": {
            "enabled": False,
            "backend": None,
            "page_size": fields.get("page_size") or 1,
            "hicache_object_layout": {"pools": []},
            "reason": "Hierarchical cache is disabled",
        },
        "kv_events": None,
        "startup_time": startup_time,
        "internal_states": [dict(state) for _ in range(dp)],
        "version": VERSION,
        "frontend": "python",
        "simulator": True,
        "sim_build": args.build,
        "sim_time_scale": args.time_scale,
        "sim_speed_factor": args.speed_factor,
        "sim_faults": sorted(k for k, v in vars(args.faults).items() if v),
        "sim_unmodelled": list(args.unmodelled),
    }
