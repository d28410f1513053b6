"""Simulated numerics: top-2 margins, near-tie flips (NONE too), lossy:RATE defects, logprobs."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_specdecode.client import SGLangClient
from pytest_specdecode.sim import numerics
from pytest_specdecode.sim.answers import AnswerBook
from pytest_specdecode.sim.cli import parse, resolve
from pytest_specdecode.sim.generation import Generator, GenRequest
from pytest_specdecode.sim.scheduler import Sequence

from ..conftest import DFLASH

PROMPTS = [f"Ten facts about planet {i}:\n1." for i in range(40)]


def reply(gen: Generator, prompt: str) -> Sequence:
    seq, _ = gen.sequence(GenRequest(prompt, 8, 128, temperature=0.0, logprobs=2))
    return seq


def margins_at_changes(gen: Generator, other: Generator) -> list[float]:
    """The simulated margin wherever two servers' replies to the same prompts differ."""
    found = []
    for prompt in PROMPTS:
        a, b = reply(gen, prompt), reply(other, prompt)
        assert a.numerics is not None
        pairs = enumerate(zip(a.tokens.ids, b.tokens.ids, strict=True))
        found += [a.numerics.margins[i] for i, (x, y) in pairs if x != y]
    return found


def test_near_tie_flips_only_at_tiny_margins_and_in_none_runs_too() -> None:
    book = AnswerBook(0, 1.0)
    none = Generator(book, 0, near_tie=True, numerics_key="NONE")
    again = Generator(book, 0, near_tie=True, numerics_key="NONE")
    for prompt in PROMPTS:
        reply(again, prompt)  # this one's next replies are the prompts' second repeat
    found = margins_at_changes(none, again)
    assert found, "two repeats of a NONE server never differed"
    assert max(found) < numerics.TIE_MARGIN


def test_lossy_rate_is_one_defect_per_reply_at_its_rate_at_large_margins() -> None:
    book = AnswerBook(0, 1.0)
    clean = Generator(book, 0, numerics_key="NONE")
    lossy = Generator(book, 0, lossy_rate=0.1, numerics_key="DFLASH:8")
    changed = 0
    for prompt in PROMPTS * 5:
        a, b = reply(clean, prompt), reply(lossy, prompt)
        pairs = enumerate(zip(a.tokens.ids, b.tokens.ids, strict=True))
        diffs = [i for i, (x, y) in pairs if x != y]
        assert len(diffs) <= 1
        assert a.numerics is not None
        assert all(a.numerics.margins[i] >= numerics.LARGE_MARGIN for i in diffs)
        changed += len(diffs)
    assert 8 <= changed <= 35  # 200 replies at 1 in 10


def test_logprobs_put_the_chosen_token_on_top_after_a_flip_and_the_true_one_after_a_defect() -> (
    None
):
    info = numerics.Numerics(
        [0.01, 3.0, 2.0], [10, 11, 12], [" a", " b", " c"], bytearray([1, 2, 0])
    )
    meta = numerics.logprob_meta(info, [50, 51, 12], 2)
    (flip, defect, clean) = meta["output_top_logprobs"]
    assert [flip[0][1], flip[1][1]] == [50, 10]
    assert flip[0][0] - flip[1][0] == pytest.approx(0.01)
    assert defect[0][1] == 11
    assert defect[1][1] == 51
    assert clean[0][1] == 12
    assert [t[1] for t in meta["output_token_logprobs"]] == [50, 51, 12]
    assert meta["output_token_logprobs"][1][0] < defect[0][0]


@pytest.mark.parametrize(("value", "rate"), [("lossy:0.1", 0.1), ("lossy:1", 1.0)])
def test_lossy_takes_a_rate(value: str, rate: float) -> None:
    faults = resolve(parse(["--sim-fault", value, "--sim-fault", "near-tie"]), {}).faults
    assert (faults.lossy, faults.lossy_rate, faults.near_tie) == (False, rate, True)


@pytest.mark.parametrize("bad", ["lossy:0", "lossy:x", "near-tie:1"])
def test_a_bad_rate_exits_2(bad: str) -> None:
    with pytest.raises(SystemExit) as exc:
        parse(["--sim-fault", bad])
    assert exc.value.code == 2


def test_the_client_reads_the_simulators_top_logprobs(sim_factory: Any) -> None:
    sim = sim_factory(*DFLASH, "--sim-fault", "near-tie")
    with SGLangClient(sim.url, timeout=10) as c:
        result = c.generate("The history of the loom begins", max_new_tokens=32, top_logprobs=2)
        plain = c.generate("The history of the loom begins", max_new_tokens=32)
    assert result.top_logprobs is not None
    assert plain.top_logprobs is None
    assert len(result.top_logprobs) == result.completion_tokens == 32
    assert all(len(row) == 2 and row[0][0] >= row[1][0] for row in result.top_logprobs)
    assert "output_top_logprobs" not in plain.meta_info
