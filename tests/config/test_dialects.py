"""Dialects: rendering flags/env per SGLang build and verifying /server_info."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_specdecode.config.dialects import (
    Rendered,
    SGLangDialect,
    dialect_names,
    get_dialect,
)
from pytest_specdecode.config.spec import ConfigError, SpecConfig

DRAFT = "/models/Qwen3-8B-DFlash-b16"
DFLASH = SpecConfig(budget=8, window=2048, draft_model=DRAFT)


def sglang_info(**overrides: Any) -> dict[str, Any]:
    """/server_info of SGLang 0.5.23 running DFLASH budget 8, window 2048."""
    info: dict[str, Any] = {
        "speculative_algorithm": "DFLASH",
        "speculative_num_draft_tokens": 8,
        "speculative_eagle_topk": 1,
        "speculative_num_steps": 1,
        "speculative_draft_window_size": 2048,
        "speculative_draft_model_path": DRAFT,
        "version": "0.5.23",
        "launch_command": "python -m sglang.launch_server --model-path /m",
    }
    info.update(overrides)
    return {k: v for k, v in info.items() if v is not ...}


# -- rendering -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("dialect", "config", "argv", "env"),
    [
        (
            "sglang",
            DFLASH,
            "--speculative-algorithm DFLASH --speculative-draft-model-path "
            f"{DRAFT} --speculative-num-draft-tokens 8 --speculative-draft-window-size 2048",
            {},
        ),
        (
            "sglang",
            SpecConfig(budget=16, topk=1, draft_model=DRAFT),
            "--speculative-algorithm DFLASH --speculative-draft-model-path "
            f"{DRAFT} --speculative-num-draft-tokens 16 --speculative-eagle-topk 1",
            {},
        ),
        (
            "sglang",
            SpecConfig("EAGLE", budget=4, topk=8, draft_model="/e"),
            # SGLang asserts on topk/draft tokens without steps: steps default to budget - 1.
            "--speculative-algorithm EAGLE --speculative-draft-model-path /e "
            "--speculative-num-steps 3 --speculative-eagle-topk 8 --speculative-num-draft-tokens 4",
            {},
        ),
        ("sglang", SpecConfig("NONE"), "", {}),
        ("sglang", SpecConfig("NONE", extra=(("tp", "2"),)), "--tp 2", {}),
        (
            "sglang-legacy",
            DFLASH,
            "--speculative-algorithm DFLASH --speculative-draft-model-path "
            f"{DRAFT} --speculative-num-draft-tokens 8 --speculative-dflash-draft-window-size 2048",
            {},
        ),
        (
            "ddtree",
            SpecConfig("DDTREE", budget=32, topk=4, window=1024, draft_model=DRAFT),
            "--speculative-algorithm DDTREE --speculative-draft-model-path "
            f"{DRAFT} --speculative-ddtree-budget 32 --speculative-draft-window-size 1024",
            {"SGLANG_DDTREE_MAX_TOPK": "4"},
        ),
        (
            "ddtree",
            SpecConfig("DDTREE", draft_model=DRAFT),
            f"--speculative-algorithm DDTREE --speculative-draft-model-path {DRAFT}",
            {},
        ),
        (
            "ddtree",
            DFLASH,
            "--speculative-algorithm DFLASH --speculative-draft-model-path "
            f"{DRAFT} --speculative-num-draft-tokens 8 --speculative-draft-window-size 2048",
            {},
        ),
    ],
)
def test_render(dialect: str, config: SpecConfig, argv: str, env: dict[str, str]) -> None:
    assert get_dialect(dialect).render(config) == Rendered(tuple(argv.split()), env)


def test_render_full_attention_omits_the_window_flag() -> None:
    rendered = get_dialect("sglang").render(SpecConfig(budget=8, draft_model=DRAFT))
    assert not any("window" in token for token in rendered.argv)


def test_render_extra_flags_after_speculative_ones_and_bare_switches() -> None:
    config = SpecConfig(
        budget=8,
        draft_model=DRAFT,
        extra=(("disable-cuda-graph", ""), ("mem-fraction-static", "0.8")),
    )
    argv = get_dialect("sglang").render(config).argv
    assert argv[-3:] == ("--disable-cuda-graph", "--mem-fraction-static", "0.8")


# -- verification against /server_info fields ----------------------------------


def test_verify_matching_server() -> None:
    result = get_dialect("sglang").verify(DFLASH, sglang_info())
    assert result.ok
    assert result.mismatches == []
    assert result.unverified == []
    assert "speculative_draft_window_size=2048" in result.checked


@pytest.mark.parametrize(
    ("config", "overrides", "message"),
    [
        (
            DFLASH,
            {"speculative_draft_window_size": 1024},
            "speculative_draft_window_size is 1024, expected 2048",
        ),
        (
            SpecConfig(budget=8, draft_model=DRAFT),
            {},
            "speculative_draft_window_size is 2048, expected None (full attention)",
        ),
        (
            DFLASH,
            {"speculative_num_draft_tokens": 16},
            "speculative_num_draft_tokens is 16, expected 8",
        ),
        (
            DFLASH,
            {"speculative_algorithm": "EAGLE"},
            "speculative_algorithm is 'EAGLE', expected 'DFLASH'",
        ),
        (
            DFLASH,
            {"speculative_algorithm": None},
            "speculative_algorithm is None, expected 'DFLASH'",
        ),
        (
            DFLASH,
            {"speculative_draft_model_path": "/old"},
            f"speculative_draft_model_path is '/old', expected {DRAFT!r}",
        ),
        (DFLASH, {"speculative_eagle_topk": 4}, "speculative_eagle_topk is 4, expected 1"),
    ],
)
def test_verify_names_the_mismatched_field(
    config: SpecConfig, overrides: dict[str, Any], message: str
) -> None:
    result = get_dialect("sglang").verify(config, sglang_info(**overrides))
    assert not result.ok
    assert message in result.mismatches


def test_verify_dflash_without_topk_accepts_the_forced_1() -> None:
    config = SpecConfig(budget=8, window=2048, draft_model=DRAFT)
    assert config.topk is None
    assert get_dialect("sglang").verify(config, sglang_info(speculative_eagle_topk=1)).ok


def test_verify_accepts_numbers_reported_as_text() -> None:
    info = sglang_info(speculative_num_draft_tokens="8", speculative_draft_window_size="2048")
    assert get_dialect("sglang").verify(DFLASH, info).ok


def test_verify_no_speculative_decoding() -> None:
    dialect = get_dialect("sglang")
    assert dialect.verify(SpecConfig("NONE"), {"speculative_algorithm": None}).ok
    assert dialect.verify(SpecConfig("NONE"), {"speculative_algorithm": "NONE"}).ok
    result = dialect.verify(SpecConfig("NONE"), sglang_info())
    assert result.mismatches == ["speculative_algorithm is 'DFLASH', expected None"]


def test_verify_extra_flags_by_field_when_reported() -> None:
    config = SpecConfig(
        budget=8,
        window=2048,
        draft_model=DRAFT,
        extra=(("disable-cuda-graph", ""), ("mem-fraction-static", "0.8")),
    )
    dialect = get_dialect("sglang")
    good = sglang_info(mem_fraction_static=0.8, disable_cuda_graph=True)
    assert dialect.verify(config, good).ok
    bad = dialect.verify(config, sglang_info(mem_fraction_static=0.7, disable_cuda_graph=False))
    assert bad.mismatches == [
        "disable_cuda_graph is False, expected True",
        # Compared with the value SGLang stores (its type is float).
        "mem_fraction_static is 0.7, expected 0.8",
    ]


# -- verification through launch_command ---------------------------------------

FIELDS = (
    "speculative_algorithm",
    "speculative_num_draft_tokens",
    "speculative_eagle_topk",
    "speculative_draft_window_size",
    "speculative_draft_model_path",
)


def launch_only(command: str) -> dict[str, Any]:
    return sglang_info(launch_command=command, **dict.fromkeys(FIELDS, ...))


def test_verify_falls_back_to_launch_command() -> None:
    dialect = get_dialect("sglang")
    command = "python -m sglang.launch_server --model-path /m " + " ".join(
        dialect.render(DFLASH).argv
    )
    result = dialect.verify(DFLASH, launch_only(command))
    assert result.ok
    assert "launch_command has --speculative-draft-window-size 2048" in result.checked


def test_launch_command_last_occurrence_wins_like_argparse() -> None:
    dialect = get_dialect("sglang")
    rendered = " ".join(dialect.render(DFLASH).argv)
    base_first = f"srv --speculative-draft-window-size 1024 {rendered}"
    assert dialect.verify(DFLASH, launch_only(base_first)).ok
    ours_first = f"srv {rendered} --speculative-draft-window-size=1024"
    assert dialect.verify(DFLASH, launch_only(ours_first)).mismatches == [
        "launch_command has --speculative-draft-window-size '1024', expected '2048'"
    ]


def test_launch_command_missing_flag_and_unexpected_flag() -> None:
    dialect = get_dialect("sglang")
    config = SpecConfig(budget=8, draft_model=DRAFT)  # window None: flag must be absent
    command = (
        f"srv --speculative-algorithm DFLASH --speculative-draft-model-path {DRAFT} "
        "--speculative-draft-window-size 512"
    )
    assert dialect.verify(config, launch_only(command)).mismatches == [
        "launch_command lacks --speculative-num-draft-tokens 8",
        "launch_command has --speculative-draft-window-size 512, expected no "
        "--speculative-draft-window-size since window is None (full attention)",
    ]


def test_launch_command_with_unbalanced_quote_is_still_checked() -> None:
    dialect = get_dialect("sglang")
    command = "srv --served-model-name it's " + " ".join(dialect.render(DFLASH).argv)
    assert dialect.verify(DFLASH, launch_only(command)).ok


def test_nothing_to_check_is_unverified_not_assumed() -> None:
    result = get_dialect("sglang").verify(DFLASH, {"version": "0.5.23"})
    assert result.ok
    assert result.checked == []
    assert any(
        u.startswith(
            "window (--speculative-draft-window-size 2048): /server_info has neither "
            "speculative_draft_window_size nor launch_command"
        )
        for u in result.unverified
    )


# -- legacy and ddtree ---------------------------------------------------------


def test_legacy_reads_its_own_field_name() -> None:
    info = sglang_info(speculative_draft_window_size=...)
    info["speculative_dflash_draft_window_size"] = 1024
    result = get_dialect("sglang-legacy").verify(DFLASH, info)
    assert result.mismatches == ["speculative_dflash_draft_window_size is 1024, expected 2048"]


def test_ddtree_verify_budget_field_and_topk_unverified() -> None:
    config = SpecConfig("DDTREE", budget=32, topk=4, window=1024, draft_model=DRAFT)
    dialect = get_dialect("ddtree")
    info = sglang_info(
        speculative_algorithm="DDTREE",
        speculative_ddtree_budget=32,
        speculative_draft_window_size=1024,
        speculative_num_draft_tokens=16,
    )
    result = dialect.verify(config, info)
    assert result.ok
    assert result.unverified == [
        "topk (passed via SGLANG_DDTREE_MAX_TOPK=4) is not reported by /server_info"
    ]
    stale = dialect.verify(config, {**info, "speculative_ddtree_budget": 16})
    assert stale.mismatches == ["speculative_ddtree_budget is 16, expected 32"]


# -- template dialect ----------------------------------------------------------


def template(args: str, env: str | None = None) -> Any:
    return get_dialect("template", args_template=args, env_template=env)


def test_template_render_fills_placeholders_per_token() -> None:
    dialect = template(
        "--my-budget {budget} --my-window={window} --model '{draft_model}' --algo {algorithm}",
        "MY_TOPK={topk}\n  MY_FLAG=on",
    )
    config = SpecConfig(budget=8, topk=4, window=2048, draft_model="/m/a b")
    rendered = dialect.render(config)
    assert rendered.argv == (
        "--my-budget", "8", "--my-window=2048", "--model", "/m/a b", "--algo", "DFLASH",
    )  # fmt: skip
    assert rendered.env == {"MY_TOPK": "4", "MY_FLAG": "on"}


def test_template_none_drops_the_token_and_its_flag() -> None:
    dialect = template("--my-budget {budget} --my-window {window} --w2={window} --v", "T={topk}")
    rendered = dialect.render(SpecConfig(budget=8, extra=(("tp", "2"),)))
    assert rendered.argv == ("--my-budget", "8", "--v", "--tp", "2")
    assert rendered.env == {}


def test_template_verify_through_launch_command() -> None:
    dialect = template("--my-budget {budget} --my-window {window} {algorithm}", "MY_TOPK={topk}")
    config = SpecConfig("DDTREE", budget=8, topk=4)
    good = dialect.verify(config, {"launch_command": "srv DDTREE --my-budget 8"})
    assert good.ok
    assert good.unverified == ["topk (passed via MY_TOPK=4) is not reported by /server_info"]
    bad = dialect.verify(config, {"launch_command": "srv DFLASH --my-budget 9 --my-window 64"})
    assert bad.mismatches == [
        "launch_command has --my-budget '9', expected '8'",
        "launch_command lacks DDTREE",
        "launch_command has --my-window 64, expected no --my-window since window is None "
        "(full attention)",
    ]


def test_template_ignores_server_info_fields_and_says_algorithm_unchecked() -> None:
    dialect = template("--my-budget {budget}")
    result = dialect.verify(SpecConfig(budget=8), {"speculative_algorithm": "EAGLE"})
    assert result.ok
    assert result.unverified == [
        "my-budget (--my-budget 8): /server_info has neither a field for it nor launch_command",
        "algorithm=DFLASH is not in the dflash_args template; not checked",
    ]


@pytest.mark.parametrize(
    ("args", "env", "fragment"),
    [
        ("--b {budgte}", None, "unknown placeholder {budgte}"),
        ("--b {budget:03d}", None, "unknown placeholder {budget}"),
        ("--b {budget!r}", None, "unknown placeholder {budget}"),
        ("--b {budget", None, "literal brace"),
        ("--b 'unclosed", None, "cannot be split"),
        ("--b {budget}", "MY_TOPK", "is not NAME=VALUE"),
        ("--b {budget}", "1X={topk}", "is not NAME=VALUE"),
        ("--b {budget}", "X={k}", "unknown placeholder {k}"),
    ],
)
def test_template_errors(args: str, env: str | None, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        template(args, env)
    assert fragment in str(info.value)


# -- lookup ----------------------------------------------------------------------


def test_dialect_names_and_lookup() -> None:
    assert dialect_names() == ("sglang", "sglang-legacy", "ddtree", "template")
    for name in dialect_names()[:-1]:
        assert get_dialect(name).name == name
    assert template("--b {budget}").name == "template"


@pytest.mark.parametrize(
    ("name", "kwargs", "fragment"),
    [
        ("vllm", {}, "unknown dialect 'vllm'; choose one of sglang, sglang-legacy"),
        ("template", {}, "needs the ini option dflash_args"),
        ("sglang", {"args_template": "--b {budget}"}, "dialect 'sglang' ignores them"),
        ("ddtree", {"env_template": "A={topk}"}, "dialect 'ddtree' ignores them"),
    ],
)
def test_get_dialect_errors(name: str, kwargs: dict[str, str], fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        get_dialect(
            name, args_template=kwargs.get("args_template"), env_template=kwargs.get("env_template")
        )
    assert fragment in str(info.value)


# -- rendered flags against SGLang's option table ---------------------------------


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (
            ("cuda-graph-max-bs", "32"),
            "SGLang 0.5.23 (dialect 'sglang') refuses flag --cuda-graph-max-bs: it is an "
            "ambiguous abbreviation of --cuda-graph-max-bs-decode and "
            "--cuda-graph-max-bs-prefill; spell one of them out",
        ),
        (
            ("mem-fraction-statc", "0.8"),
            "SGLang 0.5.23 (dialect 'sglang') refuses flag --mem-fraction-statc: SGLang has no "
            "such option; nearest real spellings: --mem-fraction-static",
        ),
        (
            ("page-size", "big"),
            "SGLang 0.5.23 (dialect 'sglang') refuses the rendered flags: argument "
            "--page-size: invalid int value: 'big'",
        ),
        (
            ("kv-cache-dtype", "fp7"),
            "refuses the rendered flags: argument --kv-cache-dtype: invalid choice: 'fp7'",
        ),
    ],
)
def test_flags_sglang_would_refuse_are_config_problems(
    extra: tuple[str, str], expected: str
) -> None:
    config = SpecConfig(budget=8, window=2048, draft_model=DRAFT, extra=(extra,))
    found = get_dialect("sglang").problems(config)
    assert len(found) == 1
    assert expected in found[0]


@pytest.mark.parametrize(
    "extra",
    [("page-size", "16"), ("tp", "8"), ("context-length", "32k"), ("no-dllm-fdfo", "")],
)
def test_real_flags_pass_the_table(extra: tuple[str, str]) -> None:
    config = SpecConfig(budget=8, window=2048, draft_model=DRAFT, extra=(extra,))
    assert get_dialect("sglang").problems(config) == []


def test_legacy_and_ddtree_check_their_known_differences() -> None:
    config = SpecConfig(budget=8, window=2048, draft_model=DRAFT)
    assert get_dialect("sglang-legacy").problems(config) == []
    ddtree = SpecConfig("DDTREE", budget=16, topk=4, window=2048, draft_model=DRAFT)
    assert get_dialect("ddtree").problems(ddtree) == []
    # The release table has no DDTree budget flag.
    release = get_dialect("sglang")
    assert isinstance(release, SGLangDialect)
    assert release.table is not None
    assert release.table.option("--speculative-ddtree-budget") is None


def test_unknown_sglang_version_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"no option table for SGLang '0\.4\.0'; known: 0\.5\.23"):
        get_dialect("sglang", sglang_version="0.4.0")


def test_extra_flags_compare_with_the_value_sglang_stores() -> None:
    # An alias and a human-readable int reach their real fields.
    config = SpecConfig(
        budget=8, window=2048, draft_model=DRAFT, extra=(("tp", "8"), ("context-length", "32k"))
    )
    dialect = get_dialect("sglang")
    assert dialect.verify(config, sglang_info(tp_size=8, context_length=32000)).ok
    bad = dialect.verify(config, sglang_info(tp_size=4, context_length=32000))
    assert bad.mismatches == ["tp_size is 4, expected 8"]


@pytest.mark.parametrize(
    ("config", "argv"),
    [
        (SpecConfig("EAGLE", draft_model="/e"), []),
        (
            SpecConfig("EAGLE", budget=4, draft_model="/e"),
            ["--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
             "--speculative-num-draft-tokens", "4"],
        ),
        (
            SpecConfig("EAGLE", steps=5, draft_model="/e"),
            ["--speculative-num-steps", "5", "--speculative-eagle-topk", "1"],
        ),
    ],
)  # fmt: skip
def test_eagle_renders_the_steps_sglang_needs(config: SpecConfig, argv: list[str]) -> None:
    rendered = get_dialect("sglang").render(config).argv
    assert list(rendered[4:]) == argv


@pytest.mark.parametrize(
    ("config", "reason"),
    [
        (SpecConfig("EAGLE", topk=4, draft_model="/e"), "needs a budget"),
        (SpecConfig("EAGLE", budget=8, steps=3, draft_model="/e"), "steps + 1 = 4"),
        (SpecConfig("EAGLE", budget=1, draft_model="/e"), "raise budget"),
        (SpecConfig(budget=8, steps=3, draft_model=DRAFT), "steps is an EAGLE knob"),
    ],
)
def test_eagle_step_rules_are_config_problems(config: SpecConfig, reason: str) -> None:
    from pytest_specdecode.config.spec import problems

    assert reason in " | ".join(problems(config))


def test_sim_flags_pass_only_when_the_simulator_is_the_target() -> None:
    config = SpecConfig(budget=8, window=2048, draft_model=DRAFT, extra=(("sim-fault", "lossy"),))
    assert get_dialect("sglang", simulator=True).problems(config) == []
    assert (
        "flag --sim-fault: SGLang has no such option" in get_dialect("sglang").problems(config)[0]
    )
