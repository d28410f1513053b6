"""Flag parsing and SGLang-like validation."""

from __future__ import annotations

import pytest

from pytest_specdecode.sim import cli

BASE = ["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "d"]


def resolve(*argv: str, env: dict[str, str] | None = None) -> cli.ServerArgs:
    return cli.resolve(cli.parse(list(argv)), env or {})


def test_defaults_are_sglangs() -> None:
    args = resolve()
    assert (args.host, args.port, args.model_path) == ("127.0.0.1", 30000, "sim/model")
    assert args.served_model_name == "sim/model"
    assert args.spec.algorithm == "NONE"
    assert not args.spec.speculative
    assert (args.load_seconds, args.warmup_seconds, args.time_scale) == (1.0, 0.5, 1.0)


def test_unknown_flag_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.parse(["--no-such-flag"])
    assert exc.value.code == 2
    assert "unrecognized arguments: --no-such-flag" in capsys.readouterr().err


@pytest.mark.parametrize(
    "alias", ["--speculative-num-draft-tokens", "--speculative-dflash-block-size"]
)
def test_block_size_alias(alias: str) -> None:
    assert resolve(*BASE, alias, "8").spec.num_draft_tokens == 8


def test_dflash_needs_draft_model() -> None:
    with pytest.raises(cli.InvalidArgs, match="DFLASH speculative decoding requires setting"):
        resolve("--speculative-algorithm", "DFLASH")


def test_window_below_draft_tokens_is_rejected() -> None:
    with pytest.raises(cli.InvalidArgs, match=r"must be >= .* window_size=4, block_size=8\.$"):
        resolve(
            *BASE, "--speculative-num-draft-tokens", "8", "--speculative-draft-window-size", "4"
        )


def test_dflash_forces_topk_1_with_warning() -> None:
    args = resolve(*BASE, "--speculative-eagle-topk", "4", "--speculative-num-steps", "3")
    assert (args.spec.topk, args.spec.num_steps) == (1, 1)
    assert "overriding speculative_eagle_topk=4 to 1." in "\n".join(args.warnings)
    assert "overriding speculative_num_steps=3 to 1." in "\n".join(args.warnings)


def test_ddtree_topk_from_environment() -> None:
    argv = ["--sim-build", "ddtree", "--speculative-algorithm", "DDTREE"]
    argv += ["--speculative-draft-model-path", "d"]
    args = resolve(*argv, "--speculative-ddtree-budget", "12", env={"SGLANG_DDTREE_MAX_TOPK": "3"})
    assert (args.spec.topk, args.spec.budget) == (3, 12)
    with pytest.raises(cli.InvalidArgs, match="SGLANG_DDTREE_MAX_TOPK"):
        resolve(*argv, env={"SGLANG_DDTREE_MAX_TOPK": "x"})


def test_legacy_window_spelling_depends_on_sim_flag(capsys: pytest.CaptureFixture[str]) -> None:
    old = ["--speculative-dflash-draft-window-size", "1024"]
    with pytest.raises(SystemExit) as exc:
        cli.parse([*BASE, *old])
    assert exc.value.code == 2
    capsys.readouterr()
    assert resolve(*BASE, *old, "--sim-legacy-flags").spec.window == 1024
    with pytest.raises(SystemExit):
        cli.parse([*BASE, "--sim-legacy-flags", "--speculative-draft-window-size", "1024"])


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("die-after:3", 3),
        ("slow-first-token:0.5", 0.5),
        ("lossy", True),
        ("stale-config", True),
        ("degenerate-drafter", True),
    ],
)
def test_faults_parse(value: str, expected: object) -> None:
    faults = resolve("--sim-fault", value, "--sim-fault", "unhealthy").faults
    assert faults.unhealthy
    assert expected in (
        faults.die_after,
        faults.slow_first_token,
        faults.lossy,
        faults.stale_config,
        faults.degenerate_drafter,
    )


@pytest.mark.parametrize(
    "bad", ["explode", "die-after:x", "slow-first-token:-1", "lossy:2", "degenerate-drafter:1"]
)
def test_bad_fault_exits_2(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.parse(["--sim-fault", bad])
    assert exc.value.code == 2
    assert "--sim-fault" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("values", "shape"),
    [
        (["degenerate-drafter"], "phrase"),
        (["degenerate-drafter:cjk"], "cjk"),
        (["degenerate-drafter:letter", "degenerate-drafter:newlines"], "newlines"),
    ],
)
def test_a_degenerate_drafter_has_a_shape(values: list[str], shape: str) -> None:
    faults = resolve(*(arg for v in values for arg in ("--sim-fault", v))).faults
    assert faults.degenerate_drafter
    assert faults.degenerate_shape == shape


def test_skip_server_warmup_means_no_warmup() -> None:
    assert resolve("--sim-warmup-seconds", "5", "--skip-server-warmup").warmup_seconds == 0


def test_block_size_is_its_own_field_and_must_match_draft_tokens() -> None:
    args = resolve(*BASE, "--speculative-dflash-block-size", "8")
    assert (args.spec.num_draft_tokens, args.fields["speculative_dflash_block_size"]) == (8, 8)
    with pytest.raises(cli.InvalidArgs, match=r"they differ\. For DFLASH they must match\."):
        resolve(
            *BASE, "--speculative-num-draft-tokens", "8", "--speculative-dflash-block-size", "16"
        )


def test_speculative_decoding_caps_running_requests_at_48() -> None:
    args = resolve(*BASE)
    assert args.fields["max_running_requests"] == 48
    assert any(w.startswith("Max running requests is reset to 48") for w in args.warnings)
    assert resolve(*BASE, "--max-running-requests", "7").fields["max_running_requests"] == 7
    assert resolve().fields["max_running_requests"] is None


def test_eagle_family_steps_rules() -> None:
    eagle = ["--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "e"]
    with pytest.raises(cli.InvalidArgs) as exc:
        resolve(*eagle, "--speculative-num-draft-tokens", "4")
    assert (exc.value.kind, str(exc.value)) == ("AssertionError", "")
    auto = resolve(*eagle)
    assert (auto.spec.num_steps, auto.spec.topk, auto.spec.num_draft_tokens) == (3, 1, 4)
    adjusted = resolve(*eagle, "--speculative-num-steps", "5", "--speculative-eagle-topk", "1")
    assert adjusted.fields["speculative_num_draft_tokens"] == 6
    assert "adjusted to speculative_num_steps + 1" in adjusted.warnings[-1]
    assert resolve("--speculative-algorithm", "nextn", "--speculative-draft-model-path", "e",
                   "--speculative-num-steps", "2", "--speculative-eagle-topk", "1"
                   ).fields["speculative_algorithm"] == "EAGLE"  # fmt: skip
    with pytest.raises(cli.InvalidArgs, match=r"^Unknown speculative algorithm name: DDTREE$"):
        resolve("--speculative-algorithm", "ddtree", "--speculative-draft-model-path", "d")


@pytest.mark.parametrize(("argv", "collapses"), [(BASE, True), ([], False)])
def test_degenerate_drafter_collapses_only_a_speculative_server(
    argv: list[str], collapses: bool
) -> None:
    from pytest_specdecode.sim.server import SimServer

    args = resolve(*argv, "--sim-fault", "degenerate-drafter")
    assert SimServer(args, args.spec, "sim").generator.degenerate is collapses
