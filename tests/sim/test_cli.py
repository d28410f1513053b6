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
    [("die-after:3", 3), ("slow-first-token:0.5", 0.5), ("lossy", True), ("stale-config", True)],
)
def test_faults_parse(value: str, expected: object) -> None:
    faults = resolve("--sim-fault", value, "--sim-fault", "unhealthy").faults
    assert faults.unhealthy
    assert expected in (
        faults.die_after,
        faults.slow_first_token,
        faults.lossy,
        faults.stale_config,
    )


@pytest.mark.parametrize("bad", ["explode", "die-after:x", "slow-first-token:-1", "lossy:2"])
def test_bad_fault_exits_2(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.parse(["--sim-fault", bad])
    assert exc.value.code == 2
    assert "--sim-fault" in capsys.readouterr().err


def test_skip_server_warmup_means_no_warmup() -> None:
    assert resolve("--sim-warmup-seconds", "5", "--skip-server-warmup").warmup_seconds == 0
