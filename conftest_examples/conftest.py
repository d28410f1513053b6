"""Project-wide settings of the example: one problem of our own.

Problems from ``pytest_dflash_problems`` join the built-in ones as
``test_coding[<name>]`` items. The simulator cannot know this problem, so the
ini feeds it a scripted answer (``--sim-answers answers.json``); against a
real model, drop that flag.
"""

from __future__ import annotations

from hypothesis import strategies as st

from pytest_specdecode.coding import Problem


def clamp(x: int, lo: int, hi: int) -> int:
    return max(lo, min(x, hi))


def ordered_bounds(t: tuple[int, int, int]) -> tuple[int, int, int]:
    x, a, b = t
    return x, min(a, b), max(a, b)


def pytest_dflash_problems(config):
    return [
        Problem(
            name="clamp",
            prompt=(
                "Write a Python function `clamp(x: int, lo: int, hi: int) -> int` that returns "
                "x limited to the closed range [lo, hi]. You may assume lo <= hi."
            ),
            entry_point="clamp",
            reference=clamp,
            cases=((5, 0, 3), (-1, 0, 3), (2, 0, 3), (7, 7, 7)),
            strategy=st.tuples(st.integers(), st.integers(), st.integers()).map(ordered_bounds),
        )
    ]
