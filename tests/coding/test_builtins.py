from __future__ import annotations

import pytest

from pytest_specdecode.coding import Problem, builtin_problems, check_answer, check_reply

PROBLEMS = {p.name: p for p in builtin_problems()}

# A plausible bug for every built-in: each must fail with a counterexample.
WRONG = {
    "is_palindrome": "def is_palindrome(s):\n    return s.lower() == s[::-1].lower()\n",
    "fib": "def fib(n):\n    a, b = 1, 1\n    for _ in range(n):\n"
    "        a, b = b, a + b\n    return a\n",
    "merge_sorted": "def merge_sorted(a, b):\n    return sorted(set(a + b))\n",
    "word_count": "def word_count(text):\n    out = {}\n    for w in text.split(' '):\n"
    "        out[w] = out.get(w, 0) + 1\n    return out\n",
    "gcd": "def gcd(a, b):\n    a, b = abs(a), abs(b)\n    while b:\n        a, b = b, a % b\n"
    "    return a if a > 0 else 1\n",
    "reverse_words": "def reverse_words(s):\n    return ' '.join(reversed(s.split(' ')))\n",
    "run_length_encode": "def run_length_encode(s):\n"
    "    return [(c, s.count(c)) for c in dict.fromkeys(s)]\n",
    "is_anagram": "def is_anagram(a, b):\n    return set(a) == set(b)\n",
    "caesar_cipher": "def caesar_cipher(text, shift):\n"
    "    return ''.join(chr((ord(c) - 97 + shift) % 26 + 97) if c.isalpha() else c"
    " for c in text.lower())\n",
    "balanced_brackets": "def balanced_brackets(s):\n"
    "    return all(s.count(o) == s.count(c) for o, c in ['()', '[]', '{}'])\n",
    "int_to_roman": "def int_to_roman(n):\n    out = ''\n"
    "    for v, r in [(1000, 'M'), (500, 'D'), (100, 'C'), (50, 'L'), (10, 'X'), (5, 'V'),"
    " (1, 'I')]:\n        while n >= v:\n            out += r\n"
    "            n -= v\n    return out\n",
    "longest_common_prefix": "def longest_common_prefix(words):\n"
    "    return min(words, key=len) if words else ''\n",
    "edit_distance": "def edit_distance(a, b):\n"
    "    return sum(x != y for x, y in zip(a, b)) + abs(len(a) - len(b))\n",
    "flatten": "def flatten(items):\n"
    "    return [y for x in items for y in (x if isinstance(x, list) else [x])]\n",
    "has_pair_with_sum": "def has_pair_with_sum(nums, target):\n"
    "    return any(target - x in nums for x in nums)\n",
    "binary_search": "def binary_search(items, target):\n    lo, hi = 0, len(items) - 1\n"
    "    while lo < hi:\n        mid = (lo + hi) // 2\n        if items[mid] < target:\n"
    "            lo = mid + 1\n        else:\n            hi = mid\n"
    "    return lo if items and items[lo] == target and lo != len(items) - 1 else -1\n",
    "max_subarray_sum": "def max_subarray_sum(nums):\n    best = cur = 0\n    for x in nums:\n"
    "        cur = max(0, cur + x)\n        best = max(best, cur)\n    return best\n",
    "chunk": "def chunk(items, size):\n"
    "    return [items[i:i + size] for i in range(0, len(items) - size + 1, size)]\n",
    "rotate_right": "def rotate_right(items, k):\n    return items[-k:] + items[:-k]\n",
    "dedupe": "def dedupe(items):\n    return sorted(set(items))\n",
    "invert_dict": "def invert_dict(d):\n    return {v: [k] for k, v in d.items()}\n",
    "second_largest": "def second_largest(nums):\n"
    "    s = sorted(nums)\n    return s[-2] if len(s) >= 2 else None\n",
    "primes_up_to": "def primes_up_to(n):\n"
    "    return [p for p in range(2, n) if all(p % d for d in range(2, p))]\n",
    "hanoi_moves": "def hanoi_moves(n):\n    return [('A', 'C')] * (2 ** n - 1)\n",
    "is_valid_ipv4": "def is_valid_ipv4(s):\n    parts = s.split('.')\n"
    "    return len(parts) == 4 and all(p.isdigit() and int(p) <= 255 for p in parts)\n",
}


def test_suite_shape() -> None:
    assert len(PROBLEMS) >= 20
    assert set(WRONG) == set(PROBLEMS)
    for name in ("is_palindrome", "fib", "merge_sorted", "word_count", "gcd"):
        assert f"`{name}(" in PROBLEMS[name].prompt
    for problem in PROBLEMS.values():
        assert problem.entry_point in problem.prompt
        assert problem.strategy is not None
        assert problem.cases


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_reference_passes_wrong_fails(name: str) -> None:
    problem = PROBLEMS[name]
    assert isinstance(problem.reference, str)
    good = check_reply(problem, f"Here you go:\n```python\n{problem.reference}```\n")
    assert good.status == "passed", good.reason
    assert good.cases > len(problem.cases)

    bad = check_answer(problem, WRONG[name], examples=100)
    assert bad.status == "failed", bad.reason
    assert bad.counterexample is not None
    assert bad.counterexample.startswith(f"{name}(")
    assert bad.reason.startswith(bad.counterexample)
    assert "expected" in bad.reason


def test_shrunk_counterexample_for_gcd() -> None:
    problem = Problem(
        name="gcd",
        prompt="gcd",
        entry_point="gcd",
        reference=PROBLEMS["gcd"].reference,
        strategy=PROBLEMS["gcd"].strategy,  # no fixed cases: hypothesis must find and shrink
    )
    verdict = check_answer(problem, WRONG["gcd"])
    assert verdict.reason == "gcd(0, 0) returned 1, expected 0"
    assert verdict.counterexample == "gcd(0, 0)"


def test_verdict_is_reproducible() -> None:
    problem = PROBLEMS["max_subarray_sum"]
    first = check_answer(problem, WRONG["max_subarray_sum"])
    again = check_answer(problem, WRONG["max_subarray_sum"])
    assert first.reason == again.reason


def test_function_reference_and_raising_reference() -> None:
    def safe_div(a: int, b: int) -> int:
        return a // b

    problem = Problem(
        name="safe_div",
        prompt="Write `safe_div(a, b)`",
        entry_point="safe_div",
        reference=safe_div,
        cases=((7, 2), (1, 0)),
    )
    assert check_answer(problem, "def safe_div(a, b):\n    return a // b\n").passed
    verdict = check_answer(problem, "def safe_div(a, b):\n    return a // b if b else 0\n")
    assert verdict.reason == "safe_div(1, 0) returned 0, expected it to raise ZeroDivisionError"


@pytest.mark.parametrize(
    ("code", "status", "reason"),
    [
        ("def gcd(a, b)\n    return a\n", "error", "SyntaxError"),
        ("def other(a, b):\n    return a\n", "error", "does not define a function 'gcd'"),
        ("import numpy_that_does_not_exist\n", "error", "ModuleNotFoundError"),
        ("def gcd(a, b):\n    return None\n", "failed", "returned None, expected 6"),
        ("def gcd(a, b):\n    return 1 / 0\n", "failed", "raised ZeroDivisionError"),
    ],
)
def test_error_statuses(code: str, status: str, reason: str) -> None:
    verdict = check_answer(PROBLEMS["gcd"], code, examples=10)
    assert verdict.status == status
    assert not verdict.passed
    assert reason in verdict.reason


def test_no_code_verdict() -> None:
    verdict = check_reply(PROBLEMS["gcd"], "<think>I should write ```python\ndef gcd(a, b):")
    assert verdict.status == "no-code"
    assert not verdict.passed
