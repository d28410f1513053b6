"""Parsing of --dflash-config / --dflash-sweep text, keys and values."""

from __future__ import annotations

import pytest

from pytest_specdecode.config.spec import (
    ConfigError,
    coerce,
    normalize_key,
    parse_config_option,
    parse_sweep_option,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("budget=8,topk=4,window=2048", {"budget": 8, "topk": 4, "window": 2048}),
        (" budget = 8 , window = 1024 ,", {"budget": 8, "window": 1024}),
        ("window=none", {"window": None}),
        ("window=FULL", {"window": None}),
        ("budget=none", {"budget": None}),
        ("algorithm=ddtree", {"algorithm": "DDTREE"}),
        ("draft-model=/models/drafter b16", {"draft_model": "/models/drafter b16"}),
        ("draft_model=", {"draft_model": None}),
        ("mem-fraction-static=0.8", {"mem-fraction-static": "0.8"}),
        ("mem_fraction_static=0.8", {"mem-fraction-static": "0.8"}),
        ("--enable-foo=", {"enable-foo": ""}),
        ("", {}),
        (",,", {}),
    ],
)
def test_parse_config_option(text: str, expected: dict[str, object]) -> None:
    assert parse_config_option(text) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("budget=0", "'budget=0'"),
        ("budget=x", "expected an integer >= 1"),
        ("budget=8.5", "'budget=8.5'"),
        ("topk=-1", "'topk=-1'"),
        ("window=abc", "or none (full attention)"),
        ("window=", "'window='"),
        ("algorithm=medusa", "not one of DFLASH, DDTREE, EAGLE, NONE"),
        ("budget", "expected KEY=VALUE"),
        ("=3", "expected KEY=VALUE"),
        ("budgte=8", "did you mean 'budget'?"),
        ("top_k=4", "did you mean 'topk'?"),
        ("budget=8,budget=9", "given twice"),
        ("budget=8,--budget=9", "given twice"),
        ("speculative_eagle_topk=2", "use topk=... instead"),
        ("speculative-draft-window-size=2048", "use window=... instead"),
        ("bad key!=1", "bad key"),
    ],
)
def test_parse_config_option_errors(text: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config_option(text)
    message = str(info.value)
    assert fragment in message
    assert message.startswith("--dflash-config: bad part")
    assert "\n" not in message


def test_parse_config_option_names_its_source() -> None:
    with pytest.raises(ConfigError, match=r"^ini dflash_config: bad part 'budget=0'"):
        parse_config_option("window=2048,budget=0", source="ini dflash_config")


def test_parse_sweep_option_is_cartesian_in_written_order() -> None:
    points = parse_sweep_option("budget=4,8,16;window=1024,2048")
    assert [(p["budget"], p["window"]) for p in points] == [
        (4, 1024),
        (4, 2048),
        (8, 1024),
        (8, 2048),
        (16, 1024),
        (16, 2048),
    ]


def test_parse_sweep_option_key_order_follows_the_text() -> None:
    points = parse_sweep_option("window=none,2048;budget=8,4")
    assert [(p["window"], p["budget"]) for p in points] == [
        (None, 8),
        (None, 4),
        (2048, 8),
        (2048, 4),
    ]


def test_parse_sweep_option_drops_repeated_values_and_parses_types() -> None:
    points = parse_sweep_option(" algorithm=dflash,DFLASH,ddtree ; budget = 8 ")
    assert points == [
        {"algorithm": "DFLASH", "budget": 8},
        {"algorithm": "DDTREE", "budget": 8},
    ]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("budget=", "no values"),
        ("budget=,,", "no values"),
        ("budget=4;budget=8", "given twice"),
        ("budget=0,4", "'budget=0,4'"),
        ("windw=1024", "did you mean 'window'?"),
        ("budget", "expected KEY=VALUE"),
        ("", "names no key"),
        (" ; ", "names no key"),
    ],
)
def test_parse_sweep_option_errors(text: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_sweep_option(text)
    assert fragment in str(info.value)
    assert str(info.value).startswith("--dflash-sweep")


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("budget", "budget"),
        ("--budget", "budget"),
        ("BUDGET", "budget"),
        ("draft-model", "draft_model"),
        ("mem_fraction_static", "mem-fraction-static"),
        ("--mem-fraction-static", "mem-fraction-static"),
        ("dtype", "dtype"),
        ("tp", "tp"),
        ("port", "port"),
        ("speculative_dflash_sink", "speculative-dflash-sink"),
        ("cuda_graph_max_bs", "cuda-graph-max-bs"),
    ],
)
def test_normalize_key(key: str, expected: str) -> None:
    assert normalize_key(key) == expected


@pytest.mark.parametrize(
    ("key", "fragment"),
    [
        ("windows", "did you mean 'window'?"),
        ("block_size", "did you mean 'budget'?"),
        ("draft_model_path", "did you mean 'draft_model'?"),
        ("speculative_num_draft_tokens", "use budget=... instead"),
        ("speculative_ddtree_budget", "use budget=... instead"),
        ("speculative_num_steps", "use steps=... instead"),
        ("speculative_algorithm", "use algorithm=... instead"),
        ("1budget", "bad key"),
        ("", "bad key"),
    ],
)
def test_normalize_key_refuses(key: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment.replace("?", r"\?").replace(".", r"\.")):
        normalize_key(key)


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("budget", 8, 8),
        ("budget", "8", 8),
        ("budget", None, None),
        ("window", None, None),
        ("window", "full", None),
        ("algorithm", " eagle ", "EAGLE"),
        ("draft_model", " /m ", "/m"),
        ("mem-fraction-static", 0.8, "0.8"),
        ("enable-foo", True, ""),
        ("enable-foo", False, None),
        ("enable-foo", None, None),
        ("tp", 2, "2"),
    ],
)
def test_coerce_accepts(key: str, value: object, expected: object) -> None:
    assert coerce(key, value) == expected


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("budget", True),
        ("budget", 8.0),
        ("budget", 0),
        ("topk", "four"),
        ("window", -5),
        ("algorithm", None),
        ("algorithm", 3),
        ("draft_model", 3),
        ("budget", [4, 8]),
        ("mem-fraction-static", object()),
    ],
)
def test_coerce_refuses(key: str, value: object) -> None:
    with pytest.raises(ConfigError, match=key):
        coerce(key, value)
