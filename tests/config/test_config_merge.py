"""Markers, precedence (marker / --dflash-config / --dflash-sweep / ini) and ids."""

from __future__ import annotations

import pytest

from pytest_specdecode.config.spec import (
    ConfigError,
    ResolvedConfig,
    SpecConfig,
    apply_overrides,
    base_config,
    merge,
    parse_config_option,
    parse_sweep_option,
)

BASE = SpecConfig(budget=8, window=4096, draft_model="/m/drafter")


def configs_from_marker(kwargs: dict[str, object], *, base: SpecConfig) -> list[SpecConfig]:
    """The configs a test with only this marker runs under."""
    return [resolved.config for resolved in merge(base, marker=kwargs)]


def test_marker_without_lists_gives_one_config_over_base() -> None:
    assert configs_from_marker({"budget": 16}, base=BASE) == [
        SpecConfig(budget=16, window=4096, draft_model="/m/drafter")
    ]


def test_marker_lists_are_cartesian_in_given_order() -> None:
    configs = configs_from_marker({"window": [1024, 2048], "budget": (4, 8)}, base=BASE)
    assert [(c.window, c.budget) for c in configs] == [
        (1024, 4),
        (1024, 8),
        (2048, 4),
        (2048, 8),
    ]


def test_marker_window_none_is_full_attention_not_absent() -> None:
    (explicit,) = configs_from_marker({"window": None}, base=BASE)
    (absent,) = configs_from_marker({}, base=BASE)
    assert explicit.window is None
    assert absent.window == 4096


def test_marker_extra_flags_become_sorted_flag_pairs() -> None:
    (config,) = configs_from_marker(
        {"mem_fraction_static": 0.8, "disable_cuda_graph": True, "tp": 2}, base=BASE
    )
    assert config.extra == (
        ("disable-cuda-graph", ""),
        ("mem-fraction-static", "0.8"),
        ("tp", "2"),
    )


def test_marker_none_removes_an_extra_flag_from_the_base() -> None:
    base = apply_overrides(BASE, {"tp": 2, "dtype": "bfloat16"})
    (config,) = configs_from_marker({"tp": None}, base=base)
    assert config.extra == (("dtype", "bfloat16"),)


def test_marker_list_of_extra_values_expands() -> None:
    configs = configs_from_marker({"mem_fraction_static": [0.8, 0.85]}, base=BASE)
    assert [c.extra for c in configs] == [
        (("mem-fraction-static", "0.8"),),
        (("mem-fraction-static", "0.85"),),
    ]


def test_marker_duplicate_values_collapse() -> None:
    configs = configs_from_marker({"algorithm": ["dflash", "DFLASH"]}, base=BASE)
    assert len(configs) == 1


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"budget": []}, "empty list"),
        ({"budget": 0}, "budget=0"),
        ({"budget": [4, "x"]}, "budget='x'"),
        ({"budgte": 8}, "did you mean 'budget'"),
        ({"window": 2048, "window_size": 1024}, "did you mean 'window'"),
        ({"draft_model": "/a", "draft-model": "/b"}, "given twice"),
        ({"algorithm": None}, "algorithm=None"),
    ],
)
def test_marker_errors(kwargs: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        configs_from_marker(kwargs, base=BASE)
    assert fragment in str(info.value)


def test_precedence_marker_beats_sweep_and_ini() -> None:
    sweep = parse_sweep_option("budget=4,32;window=1024")
    resolved = merge(BASE, marker={"budget": 16}, sweep=sweep)
    # Both sweep points collapse: the marker pins budget, the sweep sets window.
    assert resolved == [
        ResolvedConfig(SpecConfig(budget=16, window=1024, draft_model="/m/drafter"), True)
    ]


def test_precedence_cli_overrides_the_marker_keys_it_names_only() -> None:
    resolved = merge(
        BASE,
        marker={"budget": 16, "window": 2048},
        cli=parse_config_option("budget=4"),
    )
    assert [r.config for r in resolved] == [
        SpecConfig(budget=4, window=2048, draft_model="/m/drafter")
    ]


def test_precedence_cli_beats_ini_without_marker() -> None:
    resolved = merge(BASE, cli={"window": "none", "topk": 1})
    assert resolved == [
        ResolvedConfig(SpecConfig(budget=8, topk=1, draft_model="/m/drafter"), False)
    ]


def test_no_sources_gives_the_base() -> None:
    assert merge(BASE) == [ResolvedConfig(BASE, False)]


@pytest.mark.parametrize(
    ("marker", "sweep", "in_id"),
    [
        (None, "", False),
        ({"budget": 16}, "", False),
        ({"budget": [16]}, "", True),
        ({"budget": [4, 16]}, "", True),
        (None, "budget=4", True),
        ({"budget": 16}, "window=1024,2048", True),
    ],
)
def test_config_is_in_the_id_only_for_sweeps_and_marker_lists(
    marker: dict[str, object] | None, sweep: str, in_id: bool
) -> None:
    points = parse_sweep_option(sweep) if sweep else []
    resolved = merge(BASE, marker=marker, sweep=points)
    assert resolved
    assert {r.in_id for r in resolved} == {in_id}


def test_sweep_with_marker_list_order_is_sweep_outer_marker_inner() -> None:
    resolved = merge(
        BASE,
        marker={"window": [1024, 2048]},
        sweep=parse_sweep_option("budget=4,8"),
    )
    assert [(r.config.budget, r.config.window) for r in resolved] == [
        (4, 1024),
        (4, 2048),
        (8, 1024),
        (8, 2048),
    ]


def test_merge_is_deterministic() -> None:
    args = {"marker": {"budget": [8, 4], "topk": 1}, "sweep": parse_sweep_option("window=64,32")}
    assert merge(BASE, **args) == merge(BASE, **args)  # type: ignore[arg-type]


def test_cli_and_sweep_naming_the_same_key_is_refused() -> None:
    with pytest.raises(ConfigError, match="both set budget; drop it from one"):
        merge(BASE, cli={"budget": 8}, sweep=parse_sweep_option("budget=4,8"))


def test_cli_raw_keys_are_normalized() -> None:
    (resolved,) = merge(BASE, cli={"--draft-model": "/other", "mem_fraction_static": 0.7})
    assert resolved.config.draft_model == "/other"
    assert resolved.config.extra == (("mem-fraction-static", "0.7"),)


def test_algorithm_none_drops_speculative_knobs_so_baselines_compare_equal() -> None:
    (a,) = merge(BASE, marker={"algorithm": "none"})
    (b,) = merge(SpecConfig(), marker={"algorithm": "NONE", "budget": 4})
    assert a.config == b.config == SpecConfig(algorithm="NONE")


def test_base_config_from_ini_text_and_draft_model() -> None:
    assert base_config("budget=8,window=2048", draft_model="/d") == SpecConfig(
        budget=8, window=2048, draft_model="/d"
    )
    assert base_config(None) == SpecConfig()
    assert base_config("draft_model=/ini", draft_model="/opt").draft_model == "/ini"


def test_base_config_errors_name_the_ini_option() -> None:
    with pytest.raises(ConfigError, match=r"^ini dflash_config: bad part 'budget=-1'"):
        base_config("budget=-1")
