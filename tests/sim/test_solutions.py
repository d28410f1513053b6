"""The simulator's solutions against the plugin's built-in problems.

The simulator imports nothing from the coding package; this test is where the
two meet: every built-in prompt must be recognized, every correct variant
must agree with the reference (fixed cases and generated ones), and every
buggy variant must disagree on a fixed case or on a generated one, so
``--sim-quality`` failures are caught.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, find, given, settings

from pytest_specdecode.coding.builtin import builtin_problems
from pytest_specdecode.coding.problem import Problem
from pytest_specdecode.sim.answers import PROBLEMS, VARIANTS, AnswerBook, recognize

BUILTINS = {p.name: p for p in builtin_problems()}


def load(source: str, name: str) -> Callable[..., Any]:
    namespace: dict[str, Any] = {"__name__": f"sim_{name}"}
    exec(compile(source, f"<sim {name}>", "exec"), namespace)
    func = namespace.get(name)
    assert callable(func), f"{name!r} not defined by:\n{source}"
    return func  # type: ignore[no-any-return]


def agrees(problem: Problem, func: Callable[..., Any], args: tuple[Any, ...]) -> bool:
    want = problem.reference_function()(*_copy(args))
    got = func(*_copy(args))
    return type(got) is type(want) and bool(got == want)


def _copy(args: tuple[Any, ...]) -> tuple[Any, ...]:
    # A solution that mutates its input must not change what the reference sees.
    return copy.deepcopy(args)


def variants(name: str, correct: bool) -> list[str]:
    prompt = BUILTINS[name].prompt
    return sorted({PROBLEMS[name](prompt, correct, v) for v in range(VARIANTS)})


def test_every_builtin_prompt_is_recognized_as_itself() -> None:
    for name, problem in BUILTINS.items():
        assert recognize(problem.prompt) == name
        assert name in PROBLEMS


@pytest.mark.parametrize(
    "prompt",
    [
        "Split the file into a chunk of 4096 bytes and flatten the tree.",
        "Read a chunk (4 KiB) at a time; primes_up_to is a nice name.",
        "data = self._read_chunk(n)\nrows = table.dedupe(rows)",
    ],
)
def test_ordinary_words_are_not_coding_prompts(prompt: str) -> None:
    assert recognize(prompt) is None
    assert "```" not in AnswerBook(seed=0, quality=1.0).text(prompt)


def test_the_earliest_name_in_the_prompt_wins() -> None:
    assert recognize("Write `chunk(items, size)`; do not use flatten(x).") == "chunk"
    assert recognize("Use gcd(a, b) to write `int_to_roman`") == "gcd"


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_correct_variants_match_the_reference(name: str) -> None:
    problem = BUILTINS[name]
    sources = variants(name, correct=True)
    funcs = [load(src, name) for src in sources]
    for func in funcs:
        for args in problem.cases:
            assert agrees(problem, func, args), (sources, args)
    assert problem.strategy is not None

    @settings(
        max_examples=25,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(problem.strategy)
    def generated(args: tuple[Any, ...]) -> None:
        for func in funcs:
            assert agrees(problem, func, args)

    generated()


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_wrong_variants_are_caught(name: str) -> None:
    problem = BUILTINS[name]
    for source in variants(name, correct=False):
        func = load(source, name)

        def fails(args: tuple[Any, ...], func: Callable[..., Any] = func) -> bool:
            try:
                return not agrees(problem, func, args)
            except Exception:
                return True

        if any(fails(args) for args in problem.cases):
            continue
        # Not on a fixed case: then the generated cases must find it, as in the suite.
        assert problem.strategy is not None
        find(problem.strategy, fails, settings=settings(max_examples=200, database=None))


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_code_blocks_compile_and_define_the_entry_point(name: str) -> None:
    book = AnswerBook(seed=1, quality=0.5)
    for sample in range(8):
        text = book.text(f"Write a Python function `{name}`.", sample)
        match = re.search(r"```python\n(.*?)```", text, re.S)
        assert match, text
        load(match.group(1), name)


def test_quality_mixes_right_and_wrong_on_a_builtin() -> None:
    problem = BUILTINS["caesar_cipher"]
    book = AnswerBook(seed=5, quality=0.6)
    outcomes = []
    for sample in range(40):
        text = book.text(problem.prompt, sample)
        match = re.search(r"```python\n(.*?)```", text, re.S)
        assert match
        func = load(match.group(1), problem.entry_point)
        outcomes.append(all(agrees(problem, func, args) for args in problem.cases))
    assert 10 < sum(outcomes) < 35
    assert AnswerBook(seed=5, quality=0.6).text(problem.prompt, 7) == book.text(problem.prompt, 7)
