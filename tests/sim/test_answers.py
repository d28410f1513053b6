"""Answers: chat-like coding replies with working code, seeded wrong ones, scripted, filler."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_specdecode.sim.answers import (
    CODE,
    AnswerBook,
    AnswersFileError,
    build_answer,
    load_scripted,
)

CASES: dict[str, list[tuple[tuple[Any, ...], Any]]] = {
    "is_palindrome": [
        (("abba",), True),
        (("aba",), True),
        (("abc",), False),
        (("",), True),
        (("Aa",), False),
    ],
    "fib": [((0,), 0), ((1,), 1), ((10,), 55)],
    "merge_sorted": [(([1, 4], [2, 3, 9]), [1, 2, 3, 4, 9]), (([], [1]), [1])],
    "word_count": [(("a b  a",), {"a": 2, "b": 1})],
    "gcd": [((12, 18), 6), ((0, 0), 0), ((-4, 6), 2), ((0, 5), 5)],
}


def extract(text: str) -> Callable[..., Any]:
    match = re.search(r"```python\n(.*?)```", text, re.S)
    assert match, text
    namespace: dict[str, Any] = {}
    exec(match.group(1), namespace)
    (name,) = [k for k in namespace if k in CASES]
    return namespace[name]  # type: ignore[no-any-return]


def passes(name: str, func: Callable[..., Any]) -> bool:
    return all(func(*args) == want for args, want in CASES[name])


@pytest.mark.parametrize("name", sorted(CASES))
def test_coding_answers_have_prose_and_a_correct_fenced_block(name: str) -> None:
    book = AnswerBook(seed=0, quality=1.0)
    for sample in (None, 0, 1, 2, 3):
        text = book.text(f"Write a Python function `{name}`.", sample)
        assert not text.startswith("```")
        assert "```python\n" in text
        assert passes(name, extract(text))


@pytest.mark.parametrize("name", sorted(CASES))
def test_quality_zero_gives_wrong_answers(name: str) -> None:
    book = AnswerBook(seed=0, quality=0.0)
    assert not passes(name, extract(book.text(f"Implement {name}(...) in Python.")))


def test_quality_is_a_seeded_share() -> None:
    book = AnswerBook(seed=3, quality=0.6)
    results = [passes("gcd", extract(book.text("def gcd(a, b)", i))) for i in range(200)]
    assert 0.45 < sum(results) / len(results) < 0.75
    again = AnswerBook(seed=3, quality=0.6)
    assert [passes("gcd", extract(again.text("def gcd(a, b)", i))) for i in range(200)] == results


def test_palindrome_follows_the_prompt_spec() -> None:
    book = AnswerBook(seed=0, quality=1.0)
    func = extract(book.text("is_palindrome ignoring case and non-alphanumeric characters"))
    assert func("A man, a plan, a canal: Panama")


def test_scripted_answers_first_match_wins(tmp_path: Path) -> None:
    path = tmp_path / "answers.json"
    entries = [{"match": "gcd", "response": "one"}, {"match": "g", "response": "two"}]
    path.write_text(json.dumps(entries))
    book = AnswerBook(seed=0, quality=1.0, scripted=load_scripted(str(path)))
    assert book.text("def gcd") == "one"
    assert book.text("go") == "two"
    assert "```" not in book.text("hello")


@pytest.mark.parametrize("content", ["{", '{"match": 1}', '[{"match": "x"}]'])
def test_bad_answers_file_is_one_line_error(tmp_path: Path, content: str) -> None:
    path = tmp_path / "a.json"
    path.write_text(content)
    with pytest.raises(AnswersFileError, match="--sim-answers") as exc:
        load_scripted(str(path))
    assert "\n" not in str(exc.value)


def test_code_tokens_are_classed_as_code() -> None:
    answer = build_answer("Intro.\n\n```python\nx = 1\n```\n\nOutro.")
    code = "".join(
        p for p, c in zip(answer.pieces.pieces, answer.classes, strict=False) if c == CODE
    )
    assert code == "x = 1\n"
    assert "".join(answer.pieces.pieces) == "Intro.\n\n```python\nx = 1\n```\n\nOutro."
