"""The config a live server runs, read back from /server_info (external mode's default)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_specdecode.config.dialects import get_dialect
from pytest_specdecode.config.spec import SpecConfig

DIALECTS = ("sglang", "sglang-legacy", "ddtree")
FIELDS = (
    "speculative_algorithm",
    "speculative_draft_model_path",
    "speculative_num_draft_tokens",
    "speculative_ddtree_budget",
    "speculative_eagle_topk",
    "speculative_num_steps",
    "speculative_draft_window_size",
    "speculative_dflash_draft_window_size",
)
# What a server, honest or not, may put in those fields.
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 70000),
    st.floats(allow_nan=True),
    st.sampled_from(["DFLASH", "dflash", "EAGLE", "DDTREE", "NONE", "MEDUSA", "", "8", "d"]),
    st.text(max_size=12),
    st.lists(st.integers(), max_size=2),
)
INFOS = st.dictionaries(st.sampled_from(FIELDS), VALUES, max_size=len(FIELDS))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(info=INFOS, dialect=st.sampled_from(DIALECTS))
def test_a_config_read_back_is_one_the_same_answer_passes(
    info: dict[str, Any], dialect: str
) -> None:
    # Whatever the answer: no exception, and never a config the server would fail.
    rules = get_dialect(dialect)
    config = rules.live_config(info)
    if config is not None:
        assert rules.verify(config, info).ok, (config, rules.verify(config, info).mismatches)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    budget=st.integers(1, 64),
    window=st.one_of(st.none(), st.integers(1, 65536)),
    draft=st.from_regex(r"/?[A-Za-z0-9][A-Za-z0-9._/-]{0,30}", fullmatch=True),
)
def test_a_dflash_server_reads_back_as_its_own_config(
    budget: int, window: int | None, draft: str
) -> None:
    info = {
        "speculative_algorithm": "DFLASH",
        "speculative_draft_model_path": draft,
        "speculative_num_draft_tokens": budget,
        "speculative_eagle_topk": 1,  # what SGLang forces for DFLASH
        "speculative_draft_window_size": window,
    }
    found = get_dialect("sglang").live_config(info)
    assert found == SpecConfig(budget=budget, window=window, draft_model=draft)


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        ({"speculative_algorithm": None}, SpecConfig(algorithm="NONE")),
        ({}, SpecConfig(algorithm="NONE")),  # an old server that names no algorithm
        (
            {
                "speculative_algorithm": "EAGLE",
                "speculative_num_draft_tokens": 4,
                "speculative_eagle_topk": 1,
                "speculative_num_steps": 3,
            },
            SpecConfig(algorithm="EAGLE", budget=4, topk=1, steps=3),
        ),
    ],
)
def test_other_algorithms_read_back(info: dict[str, Any], expected: SpecConfig) -> None:
    assert get_dialect("sglang").live_config(info) == expected


@pytest.mark.parametrize(
    "info",
    [
        # No window field: full attention and "not reported" cannot be told apart.
        {"speculative_algorithm": "DFLASH", "speculative_num_draft_tokens": 8},
        {"speculative_algorithm": "DFLASH", "speculative_num_draft_tokens": True,
         "speculative_draft_window_size": 2048},
        {"speculative_algorithm": "DFLASH", "speculative_num_draft_tokens": "8",
         "speculative_draft_window_size": 2048},
        {"speculative_algorithm": ["DFLASH"]},
        {"speculative_algorithm": "MEDUSA"},
        # DDTree is not in released SGLang: only its own dialect reads it.
        {"speculative_algorithm": "DDTREE", "speculative_ddtree_budget": 8,
         "speculative_draft_window_size": 2048},
    ],
)  # fmt: skip
def test_what_is_not_said_plainly_is_not_guessed(info: dict[str, Any]) -> None:
    assert get_dialect("sglang").live_config(info) is None


def test_a_template_dialect_cannot_read_a_config_back() -> None:
    template = get_dialect("template", args_template="--b {budget}")
    assert template.live_config({"speculative_algorithm": "DFLASH"}) is None
