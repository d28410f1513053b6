"""The simulator's HumanEval answers against the plugin's own HumanEval loader and checker.

The simulator reads the dataset itself; this is where the two meet: every
plugin prompt (chat and plain completion) is recognized as its own task, every
right answer passes the dataset's check and every wrong variant fails it, for
all 164 tasks, and answers at two qualities of one seed are nested.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_specdecode.coding import load_humaneval
from pytest_specdecode.coding.humaneval import DatasetUnavailable, data_path
from pytest_specdecode.coding.parallel import Checker
from pytest_specdecode.coding.problem import Problem
from pytest_specdecode.sim import humaneval
from pytest_specdecode.sim.answers import AnswerBook

try:
    data_path()
except DatasetUnavailable as exc:  # pragma: no cover - the dev extra installs it
    pytest.skip(str(exc), allow_module_level=True)

PROBLEMS = load_humaneval()
TIMEOUT = 30.0  # generous: a busy machine must not turn a right answer into a timeout


def task_of(problem: Problem) -> humaneval.Task:
    found = humaneval.recognize(problem.prompt)
    assert found is not None, problem.name
    return found.task


def verdicts(pairs: Iterable[tuple[Problem, str]]) -> list[tuple[str, bool, str]]:
    with Checker() as checker:
        listed = list(pairs)
        results = checker.map(listed, timeout=TIMEOUT)
        return [(p.name, v.passed, v.reason) for (p, _), v in zip(listed, results, strict=True)]


def test_every_prompt_is_recognized_as_its_own_task() -> None:
    assert len(PROBLEMS) == 164
    for problem in PROBLEMS:
        number = problem.name.removeprefix("HumanEval_")
        chat = humaneval.recognize(problem.prompt)
        plain = humaneval.recognize(problem.completion_prompt)
        assert chat is not None
        assert plain is not None
        assert chat.task.task_id == plain.task.task_id == f"HumanEval/{number}"
        assert not chat.continuation
        assert plain.continuation


def test_humaneval_wins_over_a_builtin_name_it_quotes() -> None:
    # HumanEval/55 asks for fib, a built-in problem's name: the dataset's task answers.
    problem = PROBLEMS[55]
    text = AnswerBook(seed=0, quality=1.0).text(problem.prompt)
    assert task_of(problem).solution in text


@pytest.mark.slow
def test_right_answers_pass_and_wrong_variants_fail_for_every_task() -> None:
    book = AnswerBook(seed=0, quality=1.0)
    pairs: list[tuple[Problem, str]] = []
    for problem in PROBLEMS:
        pairs.append((problem, book.text(problem.prompt)))
        completion = book.text(problem.completion_prompt)
        pairs.append((problem, problem.completion_prompt + completion))
    right = verdicts(pairs)
    assert [r for r in right if not r[1]] == []
    wrong_pairs = [
        (problem, task_of(problem).function(False, variant))
        for problem in PROBLEMS
        for variant in range(humaneval.WRONG_VARIANTS)
    ]
    wrong = verdicts(wrong_pairs)
    assert [r for r in wrong if r[1]] == []


def test_quality_zero_answers_are_the_wrong_variants() -> None:
    book = AnswerBook(seed=0, quality=0.0)
    for problem in PROBLEMS[:20]:
        task = task_of(problem)
        wrong = {task.function(False, v) for v in range(humaneval.WRONG_VARIANTS)}
        text = book.text(problem.prompt)
        assert any(w in text for w in wrong)
        assert task.solution not in text


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    low=st.floats(0.0, 1.0),
    high=st.floats(0.0, 1.0),
)
def test_answers_at_two_qualities_of_one_seed_are_nested(
    seed: int, low: float, high: float
) -> None:
    low, high = sorted((low, high))
    worse, better = AnswerBook(seed, low), AnswerBook(seed, high)
    for problem in PROBLEMS[::8]:
        solution = task_of(problem).solution
        for prompt in (problem.prompt, problem.completion_prompt):
            if solution in worse.text(prompt):
                assert solution in better.text(prompt)


def test_without_the_package_nothing_is_recognized(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert humaneval.data_path() is None
    absent = tmp_path / "HumanEval.jsonl.gz"
    assert humaneval.recognize(PROBLEMS[0].prompt, absent) is None
    absent.write_bytes(b"not gzip")
    assert humaneval.tasks(absent) == {}
