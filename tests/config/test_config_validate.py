"""validate(): value ranges, algorithm rules, what a dialect can render; JSON round trip."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_specdecode.config.dialects import Dialect, get_dialect
from pytest_specdecode.config.spec import (
    ConfigError,
    SpecConfig,
    apply_overrides,
    config_from_dict,
    config_to_dict,
    parse_config_option,
    validate,
)

SGLANG = get_dialect("sglang")
DRAFT = "/models/drafter"


@pytest.mark.parametrize(
    ("config", "dialect"),
    [
        (SpecConfig(budget=8, window=2048, draft_model=DRAFT), "sglang"),
        (SpecConfig(budget=8, window=8, draft_model=DRAFT), "sglang"),
        (SpecConfig(budget=8, topk=1, draft_model=DRAFT), "sglang"),
        (SpecConfig(draft_model=DRAFT), "sglang-legacy"),
        (SpecConfig("EAGLE", budget=4, topk=8), "sglang"),
        (SpecConfig("NONE"), "sglang"),
        (SpecConfig("DDTREE", budget=32, topk=4, window=16, draft_model=DRAFT), "ddtree"),
        (SpecConfig(budget=16, window=2048, draft_model=DRAFT), "ddtree"),
    ],
)
def test_valid_configs_pass(config: SpecConfig, dialect: str) -> None:
    validate(config, get_dialect(dialect))


@pytest.mark.parametrize(
    ("config", "dialect", "fragment"),
    [
        (SpecConfig(budget=0, draft_model=DRAFT), SGLANG, "budget=0: expected an integer >= 1"),
        (SpecConfig(topk=-2, draft_model=DRAFT), SGLANG, "topk=-2"),
        (SpecConfig(window=0, draft_model=DRAFT), SGLANG, "window=0"),
        (SpecConfig(budget=True, draft_model=DRAFT), SGLANG, "budget=True"),
        (SpecConfig("MEDUSA"), SGLANG, "algorithm='MEDUSA' is not one of"),
        (
            SpecConfig(topk=4, draft_model=DRAFT),
            SGLANG,
            "SGLang runs DFLASH with topk=1 and only warns; use algorithm=DDTREE or drop topk",
        ),
        (
            SpecConfig(budget=16, window=8, draft_model=DRAFT),
            SGLANG,
            "window=8 < budget=16 with DFLASH",
        ),
        (SpecConfig("EAGLE", window=1024), SGLANG, "with EAGLE: SGLang ignores the draft window"),
        (SpecConfig(budget=8), SGLANG, "needs a draft model"),
        (SpecConfig("DDTREE", budget=8), get_dialect("ddtree"), "needs a draft model"),
        (
            SpecConfig("DDTREE", budget=8, draft_model=DRAFT),
            SGLANG,
            "use --dflash-dialect ddtree",
        ),
        (
            SpecConfig("DDTREE", budget=8, draft_model=DRAFT),
            get_dialect("sglang-legacy"),
            "is not in released SGLang (dialect 'sglang-legacy')",
        ),
        (
            SpecConfig(budget=8, topk=1, draft_model=DRAFT),
            get_dialect("template", args_template="--b {budget}"),
            "topk=1 is set but the dflash_args/dflash_env templates have no {topk}",
        ),
        (
            SpecConfig(extra=(("speculative-eagle-topk", "4"),), draft_model=DRAFT),
            SGLANG,
            "use topk=... instead",
        ),
    ],
)
def test_invalid_configs_give_one_line_reason_and_fix(
    config: SpecConfig, dialect: Dialect, fragment: str
) -> None:
    with pytest.raises(ConfigError) as info:
        validate(config, dialect)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_template_dialect_needs_no_draft_model_and_skips_unset_keys() -> None:
    dialect = get_dialect("template", args_template="--b {budget} --w {window}")
    validate(SpecConfig(budget=8), dialect)


def test_template_missing_placeholder_for_window_only_matters_when_set() -> None:
    dialect = get_dialect("template", args_template="--b {budget}")
    validate(SpecConfig(budget=8, window=None), dialect)
    with pytest.raises(ConfigError, match=r"window=2048 is set .* no \{window\}"):
        validate(SpecConfig(budget=8, window=2048), dialect)


# Values as a config may hold them: no control character (those are refused, see test_render).
DATA = st.text(st.characters(exclude_categories=("Cc", "Cs", "Zl", "Zp")))
CONFIGS = st.builds(
    SpecConfig,
    algorithm=st.sampled_from(["DFLASH", "DDTREE", "EAGLE", "NONE"]),
    budget=st.none() | st.integers(1, 4096),
    topk=st.none() | st.integers(1, 64),
    window=st.none() | st.integers(1, 1 << 20),
    # A drafter path is an operand: never empty, never starting with "-".
    draft_model=st.none() | DATA.map(str.strip).filter(lambda p: bool(p) and p[0] != "-"),
    extra=st.lists(
        st.tuples(st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True), DATA),
        unique_by=lambda p: p[0],
    ).map(lambda pairs: tuple(sorted(pairs))),
)


@pytest.mark.slow
@given(CONFIGS)
def test_json_round_trip(config: SpecConfig) -> None:
    assert config_from_dict(json.loads(json.dumps(config_to_dict(config)))) == config


@pytest.mark.slow
@given(CONFIGS.filter(lambda c: c.algorithm != "NONE"))
def test_option_text_round_trip_of_the_typed_keys(config: SpecConfig) -> None:
    parts = [f"algorithm={config.algorithm.lower()}"]
    for key in ("budget", "topk", "window"):
        value = getattr(config, key)
        parts.append(f"{key}={'none' if value is None else value}")
    rebuilt = apply_overrides(
        SpecConfig(budget=3, topk=3, window=3), parse_config_option(",".join(parts))
    )
    assert (rebuilt.algorithm, rebuilt.budget, rebuilt.topk, rebuilt.window) == (
        config.algorithm,
        config.budget,
        config.topk,
        config.window,
    )


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"algorithm": "DFLASH", "bogus": 1}, "unknown keys ['bogus']"),
        ({"algorithm": "DFLASH", "extra": [["a"]]}, "not a list of [name, value] pairs"),
        ({"algorithm": "DFLASH", "extra": "a=b"}, "not a list"),
        ({"algorithm": "dflash?"}, "not one of"),
        ({"budget": 0}, "budget=0"),
    ],
)
def test_config_from_dict_errors(data: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        config_from_dict(data)
    assert fragment in str(info.value)


def test_config_to_dict_is_plain_json() -> None:
    config = SpecConfig(budget=8, window=None, draft_model="/d", extra=(("tp", "2"),))
    assert config_to_dict(config) == {
        "algorithm": "DFLASH",
        "budget": 8,
        "topk": None,
        "window": None,
        "draft_model": "/d",
        "extra": [["tp", "2"]],
    }
