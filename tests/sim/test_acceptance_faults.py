"""The acceptance faults: window-ignored collapses acceptance past the reported window,
batch-collapse as the batch grows; neither touches what the clean model does."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_specdecode.sim import cli
from pytest_specdecode.sim.answers import CODE, FILLER, MATH, PROSE, SUMMARY
from pytest_specdecode.sim.model import SpecModel, SpecSettings
from pytest_specdecode.sim.server import SimServer

CONTENT = st.sampled_from([PROSE, CODE, FILLER, MATH, SUMMARY])
DFLASH = SpecSettings("DFLASH", 8, 1, 1, 1024)


@given(CONTENT, st.integers(1, 16384), st.integers(1, 64))
def test_without_the_faults_the_model_ignores_the_batch(content: int, ctx: int, b: int) -> None:
    clean = SpecModel(DFLASH)
    assert clean.accept_prob(content, ctx, b) == clean.accept_prob(content, ctx, 1)


@given(CONTENT, st.integers(1, 1024), st.integers(1025, 16384))
def test_window_ignored_keeps_acceptance_within_and_collapses_it_past(
    content: int, within: int, past: int
) -> None:
    clean, faulty = SpecModel(DFLASH), SpecModel(DFLASH, window_ignored=True)
    assert faulty.accept_prob(content, within) == clean.accept_prob(content, within)
    # A cliff, far beyond the clean model's own loss past a short window.
    assert faulty.expected_accept_length(content, past) < 0.55 * clean.expected_accept_length(
        content, within
    )


@given(CONTENT, st.integers(1, 8192), st.integers(2, 63))
def test_batch_collapse_falls_with_every_request_in_the_step(
    content: int, ctx: int, batch: int
) -> None:
    faulty = SpecModel(DFLASH, batch_collapse=True)
    assert faulty.accept_prob(content, ctx, 1) == SpecModel(DFLASH).accept_prob(content, ctx)
    assert faulty.accept_prob(content, ctx, batch + 1) < faulty.accept_prob(content, ctx, batch)
    if batch >= 8:
        assert faulty.expected_accept_length(content, ctx, batch) < 1.5


def test_draws_are_deterministic_for_a_seed_and_follow_the_batch() -> None:
    faulty = SpecModel(DFLASH, batch_collapse=True)
    draws = [[faulty.draw(random.Random(7), PROSE, 100, b) for _ in range(3)] for b in (1, 1)]
    assert draws[0] == draws[1]
    rng = random.Random(3)
    lone = sum(faulty.draw(rng, PROSE, 100, 1) for _ in range(4000)) / 4000
    crowded = sum(faulty.draw(rng, PROSE, 100, 8) for _ in range(4000)) / 4000
    assert crowded < 0.5 * lone


BASE = ["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "d"]
WINDOW = ["--speculative-draft-window-size", "1024", "--speculative-num-draft-tokens", "8"]


@pytest.mark.parametrize("fault", ["window-ignored", "batch-collapse"])
def test_the_server_reports_and_runs_the_window_it_was_given(fault: str) -> None:
    args = cli.resolve(cli.parse([*BASE, *WINDOW, "--sim-fault", fault]), {})
    server = SimServer(args, args.spec, "sim")
    # The config check passes: the window is the one asked for, only acceptance breaks.
    assert server.spec.window == 1024
    assert server.model.window_ignored is (fault == "window-ignored")
    assert server.model.batch_collapse is (fault == "batch-collapse")


@pytest.mark.parametrize("bad", ["window-ignored:1", "batch-collapse:2"])
def test_the_acceptance_faults_take_no_value(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.parse(["--sim-fault", bad])
    assert exc.value.code == 2
    assert "--sim-fault" in capsys.readouterr().err
