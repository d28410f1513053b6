"""The config a live server runs, read back from its ``/server_info``.

External mode (``--dflash-restart=never``) cannot bring the server to a
config, so a test that asks for nothing in particular should run under the
config the server already runs rather than under the built-in defaults
(which name no budget and no window, and so could never match a server
started with a window). The fields read are the ones the dialect verifies,
so the config read back always passes the dialect's check of the same
answer; anything unreadable (a hostile or partial answer) gives ``None``,
never a guess.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_specdecode.config.spec import ALGORITHMS, ConfigError, SpecConfig, apply_overrides

__all__ = ["read_live_config"]

# Longer than any real path; a longer value is not a drafter path a marker could name.
_MAX_PATH = 4096


def read_live_config(
    server_info: Mapping[str, Any], *, window_fields: Sequence[str], ddtree: bool
) -> SpecConfig | None:
    """The config ``server_info`` reports, or None when it does not say it plainly.

    ``window_fields`` are the dialect's /server_info names of the drafter window
    (first present wins); ``ddtree`` whether DDTree's budget field is known.
    """
    algorithm = server_info.get("speculative_algorithm")
    if algorithm is None:
        return SpecConfig(algorithm="NONE")
    if not isinstance(algorithm, str) or algorithm.upper() not in ALGORITHMS:
        return None
    algorithm = algorithm.upper()
    if algorithm == "NONE":
        return SpecConfig(algorithm="NONE")
    if algorithm == "DDTREE" and not ddtree:
        return None
    values: dict[str, object] = {"algorithm": algorithm}
    draft = server_info.get("speculative_draft_model_path")
    if draft is not None:
        if not isinstance(draft, str) or not 0 < len(draft) <= _MAX_PATH:
            return None
        values["draft_model"] = draft
    topk = server_info.get("speculative_eagle_topk")
    if algorithm == "EAGLE":
        values.update(
            budget=server_info.get("speculative_num_draft_tokens"),
            topk=topk,
            steps=server_info.get("speculative_num_steps"),
        )
    elif algorithm == "DDTREE":
        # Its topk travels in the environment, which /server_info does not show.
        values["budget"] = server_info.get("speculative_ddtree_budget")
    else:
        values["budget"] = server_info.get("speculative_num_draft_tokens")
        # DFLASH forces topk 1 whatever was asked: a config without topk expects just that.
        values["topk"] = None if topk == 1 and type(topk) is int else topk
    if algorithm in ("DFLASH", "DDTREE"):
        name = next((f for f in window_fields if f in server_info), None)
        if name is None:
            return None  # no window reported: full attention and "not said" look alike
        values["window"] = server_info[name]
    if any(
        not _count_or_none(values[k]) for k in ("budget", "topk", "steps", "window") if k in values
    ):
        return None
    try:
        return apply_overrides(SpecConfig(), values)
    except ConfigError:
        return None


def _count_or_none(value: object) -> bool:
    """A knob's value as /server_info can report it: a positive int (not a bool) or null."""
    return value is None or (type(value) is int and value >= 1)
