"""The configs a search chooses among: grouped from the collected tests, or from the
entries an xdist worker wrote (the controller collects nothing)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_specdecode.config.settings import Settings
from pytest_specdecode.config.spec import SpecConfig, config_to_dict
from pytest_specdecode.report.results import RunResults

ConfigOf = Callable[[pytest.Item], SpecConfig | None]

# What a start loads: configs that agree on these (the drafter, and extra flags that
# choose or shape the weights) share warm state (weights in the page cache or a weight
# cache); the rest (budget, window, runtime flags) only changes how the server runs.
WEIGHT_FLAGS = frozenset({
    "model-path", "revision", "load-format", "dtype", "quantization", "tp-size",
    "weight-version", "speculative-draft-model-path", "speculative-draft-load-format",
    "speculative-draft-model-quantization", "speculative-draft-model-revision",
})  # fmt: skip


@dataclass
class Space:
    """The configs a search chooses among, in collection order, and their tests."""

    keys: list[str] = field(default_factory=list)  # canonical config keys
    labels: list[str] = field(default_factory=list)
    data: list[dict[str, Any]] = field(default_factory=list)  # config_to_dict of each
    items: list[list[pytest.Item]] = field(default_factory=list)
    head: list[pytest.Item] = field(default_factory=list)  # run first, outside the search
    carried: set[int] = field(default_factory=set)  # visited in the resumed report
    baseline: bool = False  # a non-speculative config runs first (speedup's divisor)

    def add(self, key: str, label: str, data: dict[str, Any]) -> int:
        if key not in self.keys:
            self.keys.append(key)
            self.labels.append(label)
            self.data.append(data)
            self.items.append([])
        return self.keys.index(key)

    def points(self) -> list[dict[str, Hashable]]:
        """Each config as the values of the keys that vary over the space."""
        flat = [{k: _hashable(v) for k, v in d.items()} for d in self.data]
        varying = [k for k in dict.fromkeys(k for d in flat for k in d) if _varies(flat, k)]
        return [{k: d.get(k) for k in varying} for d in flat]

    def warm_states(self) -> list[Hashable]:
        """Each config's warm state: what it loads (:data:`WEIGHT_FLAGS`)."""
        return [warm_state(d) for d in self.data]


def warm_state(data: dict[str, Any]) -> Hashable:
    """The weights a config (as :func:`config_to_dict` gives it) loads."""
    extra = data.get("extra") or []
    weights = sorted(
        (str(pair[0]), str(pair[1]))
        for pair in extra
        if isinstance(pair, (list, tuple)) and len(pair) == 2 and pair[0] in WEIGHT_FLAGS
    )
    return (str(data.get("draft_model")), tuple(weights))


def build_space(items: list[pytest.Item], config_of: ConfigOf, results: RunResults) -> Space:
    """Group the collected items by config; configs a resumed report carries whole are in the
    space too (visited), though none of their tests was collected to run."""
    space = Space()
    for item in items:
        config = config_of(item)
        if config is None or config.algorithm == "NONE":
            space.head.append(item)
            space.baseline = space.baseline or config is not None
            continue
        index = space.add(config.key(), config.label(), config_to_dict(config))
        space.items[index].append(item)
    return carry_whole(space, results)


def carry_whole(space: Space, results: RunResults) -> Space:
    """Add the configs a resumed report carries whole (visited; none of their tests was
    collected to run)."""
    for key, found in results.configs.items():
        whole = found.carried and found.carried.get("whole")
        if whole and found.config.algorithm != "NONE" and key not in space.keys:
            space.carried.add(space.add(key, found.label, found.config.to_dict()))
    return space


def metric_of(settings: Settings, space: Space) -> str:
    """speedup when the run has a non-speculative baseline (or a saved one), else tok/s."""
    if settings.search_metric:
        return settings.search_metric
    return "speedup" if settings.baseline or space.baseline else "tok_s"


def _hashable(value: Any) -> Hashable:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value  # type: ignore[no-any-return]


def _varies(points: list[dict[str, Hashable]], key: str) -> bool:
    return len({p.get(key) for p in points}) > 1
