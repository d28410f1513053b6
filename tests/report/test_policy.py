"""The speculation policy: a config per band of concurrency, never below 0.95x of NONE."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_specdecode.report import policy
from pytest_specdecode.report.model import Config

from .conftest import typed

LABELS = ("DFLASH budget=4", "DFLASH budget=8", "DFLASH budget=16")
DOMAINS = ("code", "chat")
# A band's config as the policy file holds it: every field of the report's config.
NONE_SPEC = {k: v for k, v in msgspec.to_builtins(Config(algorithm="NONE")).items() if k != "steps"}


def case(load: int, domain: str, ratio: tuple[float, float, float] | None) -> dict[str, Any]:
    found: dict[str, Any] = {
        "case": f"ctx1024-c{load}-t64-{domain}",
        "metrics": {"context": 1024, "load": f"c{load}", "domain": domain, "tok_s": 100.0},
    }
    if ratio is not None:
        value, low, high = ratio
        found["speedup"] = {"tok_s": {"value": value, "low": low, "high": high}}
    return found


def report(
    figures: Mapping[tuple[str, int, str], tuple[float, float, float] | None],
) -> dict[str, Any]:
    loads = sorted({load for _, load, _ in figures})
    configs = [
        {
            "label": "NONE",
            "config": {"algorithm": "NONE"},
            "throughput": [case(load, d, None) for load in loads for d in DOMAINS],
        }
    ]
    for label in LABELS:
        cases = [case(load, d, r) for (lab, load, d), r in figures.items() if lab == label]
        budget = int(label.split("=")[1])
        configs.append(
            {
                "label": label,
                "config": {"algorithm": "DFLASH", "budget": budget},
                "throughput": cases,
            }
        )
    return {"configs": configs, "verdict": {"excluded": []}}


ratios = st.one_of(
    st.none(),
    st.tuples(st.floats(0.3, 3.0), st.floats(0.0, 1.0), st.floats(1.0, 1.5)).map(
        lambda t: (t[0], t[0] * t[1], t[0] * t[2])
    ),
)
sweeps = st.dictionaries(
    st.tuples(
        st.sampled_from(LABELS), st.sampled_from([1, 2, 4, 8, 16, 32, 64]), st.sampled_from(DOMAINS)
    ),
    ratios,
    min_size=1,
)


@pytest.mark.slow
@given(sweeps)
def test_a_band_runs_a_config_only_where_its_low_bound_is_at_least_the_floor(
    figures: Mapping[tuple[str, int, str], tuple[float, float, float] | None],
) -> None:
    found = policy.build(typed(report(figures)))
    assert found is not None
    bands = found["bands"]
    loads = sorted({load for _, load, _ in figures})
    # The bands cover every concurrency from 1 up, contiguously, the last one open-ended.
    assert bands[0]["min_concurrency"] == 1
    assert bands[-1]["max_concurrency"] is None
    for before, after in itertools.pairwise(bands):
        assert before["max_concurrency"] == after["min_concurrency"] - 1
        assert before["label"] != after["label"]
    assert sorted(c for b in bands for c in b["measured"]) == loads
    for band in bands:
        for load in band["measured"]:
            assert policy.band_for(found, load) is band
            if band["label"] == "NONE":
                # NONE chosen (its own figures) or nothing qualified (no config to name).
                assert band["config"] in (NONE_SPEC, policy.NONE_CONFIG)
                continue
            # Measured in every domain at that load, each low bound at least the floor.
            for domain in DOMAINS:
                ratio = figures.get((band["label"], load, domain))
                assert ratio is not None
                assert ratio[1] >= policy.FLOOR


def test_the_fastest_qualifying_config_wins_and_contiguous_loads_merge() -> None:
    figures: dict[tuple[str, int, str], tuple[float, float, float] | None] = {}
    for domain in DOMAINS:
        figures[("DFLASH budget=16", 1, domain)] = (2.5, 2.2, 2.8)
        figures[("DFLASH budget=8", 1, domain)] = (2.0, 1.8, 2.2)
        figures[("DFLASH budget=16", 2, domain)] = (2.1, 1.9, 2.3)
        # Faster on average at c32, but its interval reaches below 0.95x of NONE.
        figures[("DFLASH budget=16", 32, domain)] = (1.2, 0.9, 1.5)
        figures[("DFLASH budget=8", 32, domain)] = (1.05, 0.97, 1.1)
        figures[("DFLASH budget=4", 64, domain)] = (0.8, 0.7, 0.9)
    found = policy.build(typed(report(figures)))
    assert found is not None
    shown = [(b["min_concurrency"], b["max_concurrency"], b["label"]) for b in found["bands"]]
    assert shown == [(1, 31, "DFLASH budget=16"), (32, 63, "DFLASH budget=8"), (64, None, "NONE")]
    assert found["bands"][0]["config"] == {
        "algorithm": "DFLASH",
        "budget": 16,
        "topk": None,
        "window": None,
        "draft_model": None,
        "extra": [],
    }
    assert found["bands"][0]["measured"] == [1, 2]
    assert policy.describe(found) == "c1-31: DFLASH budget=16; c32-63: DFLASH budget=8; c64+: NONE"


def test_client_limited_and_excluded_cases_take_no_part() -> None:
    figures = {("DFLASH budget=16", 1, d): (2.5, 2.2, 2.8) for d in DOMAINS}
    data = report(figures)
    data["configs"][3]["throughput"][0]["client_limited"] = {"why": "at the client's ceiling"}
    assert policy.build(typed(data))["bands"][0]["label"] == "NONE"  # type: ignore[index]
    data = report(figures)
    data["verdict"]["excluded"] = [{"config": "DFLASH budget=16", "reasons": ["lossless"]}]
    assert policy.build(typed(data))["bands"][0]["label"] == "NONE"  # type: ignore[index]


def test_no_closed_loop_case_or_no_baseline_no_policy() -> None:
    assert policy.build(typed({"configs": []})) is None
    lone = {"label": "b8", "config": {"algorithm": "DFLASH"}, "throughput": [case(1, "code", None)]}
    assert policy.build(typed({"configs": [lone]})) is None


def test_a_client_limited_baseline_leaves_its_load_to_none() -> None:
    figures = {("DFLASH budget=16", 1, d): (2.5, 2.2, 2.8) for d in DOMAINS}
    data = report(figures)
    data["configs"][0]["throughput"][0]["client_limited"] = {"why": "machine loaded"}
    assert policy.build(typed(data))["bands"][0]["label"] == "NONE"  # type: ignore[index]
