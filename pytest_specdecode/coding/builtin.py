"""The built-in problem suite."""

from __future__ import annotations

from pytest_specdecode.coding import problems_basic, problems_more
from pytest_specdecode.coding.problem import Problem


def builtin_problems() -> list[Problem]:
    """The built-in problems (is_palindrome, fib, merge_sorted, word_count, gcd, ...)."""
    return [*problems_basic.PROBLEMS, *problems_more.PROBLEMS]
