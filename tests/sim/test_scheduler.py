"""Engine and generator: shared steps, exact token accounting, losslessness, determinism."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_specdecode.sim.answers import AnswerBook
from pytest_specdecode.sim.faults import DEGENERATE_SHAPES
from pytest_specdecode.sim.generation import (
    DEGENERATE_LEAD,
    DEGENERATE_PHRASE,
    DEGENERATE_PIECES,
    Generator,
    GenRequest,
)
from pytest_specdecode.sim.model import SpecModel, SpecSettings
from pytest_specdecode.sim.scheduler import WAKE_PER_TURN, Engine, Sequence

DFLASH8 = SpecSettings("DFLASH", 8, 1, 1, 2048)


def request(prompt: str = "tell me a story", n: int = 512, **kw: object) -> GenRequest:
    return GenRequest(prompt=prompt, prompt_tokens=5, max_new_tokens=n, temperature=0, **kw)  # type: ignore[arg-type]


async def drain(seq: Sequence) -> list[tuple[int, int]]:
    steps: list[tuple[int, int]] = []
    while not steps or steps[-1][0] < seq.total:
        steps.append(await seq.queue.get())
    return steps


def run(
    settings: SpecSettings,
    reqs: list[GenRequest],
    *,
    lossy: bool = False,
    degenerate: bool = False,
    scale: float = 0,
    sleeps: list[float] | None = None,
) -> tuple[list[Sequence], list[list[tuple[int, int]]], Engine]:
    async def go() -> tuple[list[Sequence], list[list[tuple[int, int]]], Engine]:
        clock = [0.0]

        async def fake_sleep(s: float) -> None:
            clock[0] += s
            if sleeps is not None and s:
                sleeps.append(s)
            await asyncio.sleep(0)

        engine = Engine(
            SpecModel(settings), scale, lossy=lossy, clock=lambda: clock[0], sleep=fake_sleep
        )
        gen = Generator(AnswerBook(0, 1.0), 0, lossy=lossy, degenerate=degenerate)
        seqs = [gen.sequence(r)[0] for r in reqs]
        for s in seqs:
            engine.submit(s)
        task = asyncio.ensure_future(engine.run())
        try:
            steps = [await drain(s) for s in seqs]
        finally:
            task.cancel()
        return seqs, steps, engine

    return asyncio.run(go())


def text(seq: Sequence) -> str:
    return "".join(seq.tokens.pieces[: seq.total])


def test_ignore_eos_gives_exactly_max_tokens_in_fewer_steps() -> None:
    (seq,), (steps,), _ = run(DFLASH8, [request(ignore_eos=True)])
    assert seq.total == 512
    assert steps[-1] == (512, len(steps))
    assert len(steps) < 512
    assert all(0 < b - a <= 8 for (a, _), (b, _) in zip([(0, 0), *steps], steps, strict=False))
    assert seq.finish_reason == {"type": "length", "length": 512}


def test_without_ignore_eos_the_answer_stops() -> None:
    (seq,), _, _ = run(DFLASH8, [request("def gcd(a, b)")])
    assert seq.total < 512
    assert seq.finish_reason["type"] == "stop"


@pytest.mark.parametrize(
    "settings",
    [
        SpecSettings(),
        SpecSettings("DFLASH", 4, 1, 1, 1024),
        SpecSettings("DDTREE", 16, 4, 1, None, 32),
        SpecSettings("EAGLE", 4, 2, 3),
    ],
)
def test_greedy_output_is_the_same_under_every_config(settings: SpecSettings) -> None:
    reqs = [request("def gcd(a, b)"), request("story", 300, ignore_eos=True)]
    ref, _, _ = run(DFLASH8, reqs)
    seqs, _, _ = run(settings, reqs)
    assert [text(s) for s in seqs] == [text(s) for s in ref]


def test_lossy_fault_changes_speculative_output_only() -> None:
    reqs = [request("story", 300, ignore_eos=True)]
    (clean,), _, _ = run(DFLASH8, reqs)
    (lossy,), _, _ = run(DFLASH8, reqs, lossy=True)
    (plain,), _, _ = run(SpecSettings(), reqs, lossy=True)
    assert text(lossy) != text(clean)
    assert text(plain) == text(clean)


def test_a_degenerate_drafter_loops_on_a_phrase_it_predicts_almost_perfectly() -> None:
    reqs = [request("story", 400, ignore_eos=True), request("def gcd(a, b)", 200)]
    clean, clean_steps, _ = run(DFLASH8, reqs)
    broken, steps, engine = run(DFLASH8, reqs, degenerate=True)
    for seq, normal in zip(broken, clean, strict=True):
        assert seq.total == normal.total  # as many tokens: only their content collapsed
        tail = text(seq)[len("".join(seq.tokens.pieces[:DEGENERATE_LEAD])) :]
        phrase = "".join(DEGENERATE_PHRASE)
        assert tail.startswith(phrase)
        assert tail.count(phrase) >= seq.total // 6
    # Accept length near the block size (8), far above the clean drafter's.
    assert (engine.avg_accept_length or 0) > 7
    normal_accept = sum(s.total for s in clean) / sum(len(x) for x in clean_steps)
    assert normal_accept < 6
    assert len(steps[0]) < len(clean_steps[0])


@pytest.mark.parametrize("shape", DEGENERATE_SHAPES)
def test_each_collapse_shape_repeats_its_unit_to_the_end(shape: str) -> None:
    gen = Generator(AnswerBook(0, 1.0), 0, degenerate=True, degenerate_shape=shape)
    seq = gen.sequence(request("def gcd(a, b)", 200))[0]
    unit = "".join(DEGENERATE_PIECES[shape])
    tail = text(seq)[len("".join(seq.tokens.pieces[:DEGENERATE_LEAD])) :]
    assert tail.startswith(unit * 3)
    assert tail.count(unit) * len(DEGENERATE_PIECES[shape]) >= seq.total - DEGENERATE_LEAD - 5
    if shape != "phrase":
        assert " " not in unit  # no word boundary: one long word, or none


def test_every_shape_the_fault_parses_has_its_pieces() -> None:
    assert set(DEGENERATE_PIECES) == set(DEGENERATE_SHAPES)


def test_deterministic_for_a_seed() -> None:
    a = run(DFLASH8, [request(ignore_eos=True)])[1]
    b = run(DFLASH8, [request(ignore_eos=True)])[1]
    assert a == b


def test_concurrent_requests_share_steps() -> None:
    reqs = [request(f"story {i}", 200, ignore_eos=True) for i in range(8)]
    _, steps, engine = run(DFLASH8, reqs)
    assert engine.steps == max(len(s) for s in steps)


def test_modelled_time_per_step_grows_with_batch() -> None:
    one: list[float] = []
    many: list[float] = []
    run(DFLASH8, [request(n=64, ignore_eos=True)], scale=1.0, sleeps=one)
    run(DFLASH8, [request(f"s{i}", 64, ignore_eos=True) for i in range(16)], scale=1.0, sleeps=many)
    assert min(many) > max(one[1:])


def test_stop_string_cuts_the_reply() -> None:
    gen = Generator(AnswerBook(0, 1.0), 0)
    seq, stop_text = gen.sequence(request("def gcd(a, b)", stop=["while"]))
    assert stop_text is not None
    assert "while" not in stop_text
    assert seq.finish_reason == {"type": "stop", "matched": "while"}
    assert "while" in "".join(seq.tokens.pieces[: seq.total])


def test_a_step_wakes_its_streams_a_turn_at_a_time() -> None:
    # Between two slices of woken streams the engine yields a turn (the loop polls
    # its sockets then): at no yield are more than WAKE_PER_TURN more streams woken.
    n = 2 * WAKE_PER_TURN + 5
    woken_at_yields: list[int] = []

    async def go() -> list[Sequence]:
        async def yielding(_: float) -> None:
            woken_at_yields.append(sum(s.queue.qsize() for s in seqs))
            await asyncio.sleep(0)  # the engine's yield of a turn itself: what is counted

        engine = Engine(SpecModel(DFLASH8), 0, sleep=yielding)
        gen = Generator(AnswerBook(0, 1.0), 0)
        seqs = [gen.sequence(request(f"s{i}", 64, ignore_eos=True))[0] for i in range(n)]
        for s in seqs:
            engine.submit(s)
        engine.running, engine.waiting = engine.waiting, []
        await engine.step()
        return seqs

    seqs = asyncio.run(go())
    assert woken_at_yields == [WAKE_PER_TURN, 2 * WAKE_PER_TURN]
    assert all(s.queue.qsize() == 1 for s in seqs)  # every stream woken once by the step


def engine_times(reqs: list[GenRequest], stalls: list[float]) -> list[float]:
    """The engine's clock after each of its sleeps while it serves ``reqs`` at time scale 1,
    each sleep taking ``stalls[i]`` longer than asked (the machine ran something else)."""

    async def go() -> list[float]:
        clock = [0.0]
        times: list[float] = []

        async def stalling(s: float) -> None:
            n = len(times)
            clock[0] += s + (stalls[n] if n < len(stalls) else 0.0)
            times.append(clock[0])
            await asyncio.sleep(0)

        engine = Engine(SpecModel(DFLASH8), 1.0, clock=lambda: clock[0], sleep=stalling)
        gen = Generator(AnswerBook(0, 1.0), 0)
        seqs = [gen.sequence(r)[0] for r in reqs]
        for s in seqs:
            engine.submit(s)
        task = asyncio.ensure_future(engine.run())
        try:
            for s in seqs:
                await drain(s)
        finally:
            task.cancel()
        return times

    return asyncio.run(go())


@given(
    stalls=st.lists(st.floats(0, 0.05), min_size=2, max_size=40),
    n=st.integers(1, 4),
)
@settings(max_examples=40, deadline=None)
def test_a_stalled_engine_catches_up_its_modelled_timeline(stalls: list[float], n: int) -> None:
    # The acceptance draws are the seed's, so the steps and their modelled times are the
    # same with or without stalls: only the machine's delays differ. Step k ends at its
    # modelled time T[k] or, behind it, as soon as the engine gets to run: c[k] =
    # max(c[k-1], T[k]) + stall[k]. A delay is then made up by the steps after it. Had a
    # late step restarted the timeline, every stall would add to the end.
    reqs = [request(f"story {i}", 96, ignore_eos=True) for i in range(n)]
    modelled = engine_times(reqs, [])
    stalled = engine_times(reqs, stalls)
    assert len(stalled) == len(modelled)
    expected = 0.0
    for k, at in enumerate(modelled):
        expected = max(expected, at) + (stalls[k] if k < len(stalls) else 0.0)
    assert stalled[-1] == pytest.approx(expected, abs=1e-9)
    assert modelled[-1] - 1e-9 <= stalled[-1] <= modelled[-1] + sum(stalls) + 1e-9
