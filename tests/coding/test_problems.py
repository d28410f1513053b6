"""Problems that cannot judge answers are refused when the problems are loaded."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_specdecode.coding import Problem, args_strategy, builtin_problems, load_humaneval
from pytest_specdecode.coding.problem import BadProblem, validate_problem


def problem(reference: str, **fields: object) -> Problem:
    defaults: dict[str, object] = {
        "name": "add",
        "prompt": "Write `add(a, b)`.",
        "entry_point": "add",
        "reference": reference,
        "cases": ((1, 2), (0, 0)),
    }
    return Problem(**{**defaults, **fields})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("reference", "fields", "message"),
    [
        pytest.param(
            "def add(a, b):\n    return a + bb\n",
            {},
            "coding problem 'add' (python): its reference fails on add(1, 2): NameError: "
            "name 'bb' is not defined; fix the reference",
            id="typo-name-error",
        ),
        pytest.param(
            "def add(a, b):\n    raise ValueError('not yet')\n",
            {},
            "coding problem 'add' (python): its reference raises on all 2 of its inputs "
            "(first: add(1, 2) raised ValueError: not yet); fix the reference",
            id="raises-on-every-case",
        ),
        pytest.param(
            "def add(a, b):\n    return a.value + b\n",
            {"cases": (), "strategy": args_strategy("int", "int")},
            "coding problem 'add' (python): its reference fails on add(0, 0): AttributeError: "
            "'int' object has no attribute 'value'; fix the reference",
            id="generated-inputs-without-cases",
        ),
        pytest.param(
            "def plus(a, b):\n    return a + b\n",
            {},
            "coding problem 'add' (python): the reference does not load: BadReference: "
            "the reference does not define a function 'add'",
            id="wrong-name",
        ),
        pytest.param(
            "def add(a, b):\n    return a + b\n",
            {"cases": ()},
            "coding problem 'add' (python) has nothing to judge an answer by: give it cases, "
            "a strategy or check code",
            id="nothing-to-judge-by",
        ),
    ],
)
def test_refused(reference: str, fields: dict[str, object], message: str) -> None:
    with pytest.raises(BadProblem) as caught:
        validate_problem(problem(reference, **fields))
    assert str(caught.value) == message


def test_accepted() -> None:
    # A reference may raise on some inputs on purpose: the answer must raise alike.
    raises_on_negatives = (
        "def add(a, b):\n    if a < 0:\n        raise ValueError(a)\n    return a + b\n"
    )
    validate_problem(problem(raises_on_negatives, cases=((1, 2), (-1, 0))))
    for known in [*builtin_problems(), *load_humaneval()]:
        validate_problem(known)


TOML_TYPO = """
[[problem]]
name = "add"
prompt = "Write a Python function `add(a, b)` that returns a + b."
reference = '''
def add(a, b):
    return a + bb
'''
cases = [[1, 2], [3, 4]]
"""

HOOK_EMPTY = """
from pytest_specdecode.coding import Problem

def pytest_dflash_problems(config):
    return [Problem(name="empty", prompt="Write `empty()`.", entry_point="empty",
                    reference="def empty():\\n    return 1\\n")]
"""

CODING_TEST = """
import pytest

@pytest.mark.coding
def test_coding(dflash_problem, dflash_coding):
    dflash_coding.check(dflash_problem)
"""


@pytest.mark.parametrize(
    ("files", "args", "line"),
    [
        pytest.param(
            {"problems.toml": TOML_TYPO},
            ["--dflash-problems", "problems.toml"],
            "*test_coding.py::test_coding: coding problem 'add' (*problems.toml): its reference "
            "fails on add(1, 2): NameError: name 'bb' is not defined; fix the reference",
            id="toml-reference-typo",
        ),
        pytest.param(
            {"conftest.py": HOOK_EMPTY},
            [],
            "*test_coding.py::test_coding: coding problem 'empty' (python) has nothing to judge "
            "an answer by: give it cases, a strategy or check code",
            id="hook-problem-without-cases",
        ),
    ],
)
def test_bad_problem_is_a_collection_error(
    pytester: pytest.Pytester, files: dict[str, str], args: list[str], line: str
) -> None:
    for name, text in files.items():
        Path(pytester.path, name).write_text(text)
    pytester.makepyfile(test_coding=CODING_TEST)
    result = pytester.runpytest("-p", "no:cacheprovider", *args)
    # The bad source errors its own tests (named at collection), not the whole run.
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"dflash: collection error: {line.lstrip('*')}"])
    assert "Traceback" not in result.stdout.str()
