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
    PROBLEMS,
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
    "reverse_words": [(("  a  b c ",), "c b a"), (("hello world",), "world hello"), (("",), "")],
    "run_length_encode": [
        (("aaabcc",), [("a", 3), ("b", 1), ("c", 2)]),
        (("a",), [("a", 1)]),
        (("",), []),
    ],
    "is_anagram": [
        (("listen", "silent"), True),
        (("a b", "ba "), True),
        (("ab", "abb"), False),
        (("a", "A"), False),
    ],
    "caesar_cipher": [
        (("abc", 1), "bcd"),
        (("xyz", 3), "abc"),
        (("Hello, World!", 13), "Uryyb, Jbeyq!"),
        (("abc", -1), "zab"),
        (("Zz", 52), "Zz"),
    ],
    "balanced_brackets": [
        (("a([]{})b",), True),
        (("(]",), False),
        (("((",), False),
        ((")(",), False),
        (("",), True),
    ],
    "int_to_roman": [((4,), "IV"), ((9,), "IX"), ((1994,), "MCMXCIV"), ((3999,), "MMMCMXCIX")],
    "longest_common_prefix": [
        ((["flower", "flow", "flight"],), "fl"),
        ((["a"],), "a"),
        ((["ab", "ab"],), "ab"),
        ((["", "a"],), ""),
        (([],), ""),
    ],
    "edit_distance": [
        (("kitten", "sitting"), 3),
        (("flaw", "lawn"), 2),
        (("", "ab"), 2),
        (("abc", ""), 3),
    ],
    "flatten": [(([1, [2, [3, [4]]], 5],), [1, 2, 3, 4, 5]), (([[[]]],), []), (([],), [])],
    "has_pair_with_sum": [
        (([1, 2, 3], 5), True),
        (([3, 3], 6), True),
        (([3], 6), False),
        (([1, 2], 4), False),
    ],
    "binary_search": [
        (([1, 3, 5], 5), 2),
        (([1, 3, 5], 1), 0),
        (([1, 3, 5], 4), -1),
        (([2], 2), 0),
        (([], 3), -1),
    ],
    "max_subarray_sum": [
        (([-2, 1, -3, 4, -1, 2, 1, -5, 4],), 6),
        (([-3, -1, -2],), -1),
        (([5, -1, 5],), 9),
    ],
    "chunk": [
        (([1, 2, 3, 4, 5], 2), [[1, 2], [3, 4], [5]]),
        (([1, 2], 5), [[1, 2]]),
        (([], 3), []),
    ],
    "rotate_right": [
        (([1, 2, 3], 1), [3, 1, 2]),
        (([1, 2, 3], 4), [3, 1, 2]),
        (([1, 2, 3], -1), [2, 3, 1]),
        (([], 3), []),
    ],
    "dedupe": [(([3, 1, 3, 2, 1],), [3, 1, 2]), (([],), [])],
    "invert_dict": [
        (({"a": 1, "b": 2, "c": 1},), {1: ["a", "c"], 2: ["b"]}),
        (({"b": 0, "a": 0},), {0: ["a", "b"]}),
        (({},), {}),
    ],
    "second_largest": [
        (([1, 3, 3, 2],), 2),
        (([2, 2],), None),
        (([],), None),
        (([-1, -5],), -5),
    ],
    "primes_up_to": [
        ((30,), [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]),
        ((2,), [2]),
        ((1,), []),
        ((-1,), []),
    ],
    "hanoi_moves": [
        ((0,), []),
        ((1,), [("A", "C")]),
        ((2,), [("A", "B"), ("A", "C"), ("B", "C")]),
        (
            (3,),
            [("A", "C"), ("A", "B"), ("C", "B"), ("A", "C"), ("B", "A"), ("B", "C"), ("A", "C")],
        ),
    ],
    "is_valid_ipv4": [
        (("192.168.0.1",), True),
        (("0.0.0.0",), True),
        (("01.2.3.4",), False),
        (("255.255.255.256",), False),
        (("1.2.3",), False),
        (("",), False),
    ],
}


def extract(text: str) -> Callable[..., Any]:
    match = re.search(r"```python\n(.*?)```", text, re.S)
    assert match, text
    namespace: dict[str, Any] = {}
    exec(match.group(1), namespace)
    (name,) = [k for k in namespace if k in CASES]
    return namespace[name]  # type: ignore[no-any-return]


def passes(name: str, func: Callable[..., Any]) -> bool:
    return all(type(got := func(*args)) is type(want) and got == want for args, want in CASES[name])


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
    for sample in (None, 0, 1, 2, 3):
        assert not passes(name, extract(book.text(f"Implement {name}(...) in Python.", sample)))


def test_every_problem_has_cases_here() -> None:
    assert set(CASES) == set(PROBLEMS)


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
