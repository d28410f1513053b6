from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import strategies as st

from pytest_specdecode.coding import (
    ProblemFileError,
    TypeSpecError,
    check_answer,
    generate_inputs,
    load_problems_toml,
    parse_type,
    sandbox_mode,
)

GOOD = '''
[[problem]]
name = "add"
prompt = "Write a Python function `add(a, b)` that returns a + b."
reference = """
def add(a, b):
    return a + b
"""
args = ["int(-5, 5)", "int"]
cases = [[1, 2], [0, 0]]

[[problem]]
name = "total"
entry_point = "total_of"
prompt = "Write `total_of(xs)`."
reference = "def total_of(xs):\\n    return sum(xs)\\n"
args = ["list of int(0, 9)"]
'''


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "problems.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_load_and_check(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD)
    add, total = load_problems_toml(path)
    assert (add.name, add.entry_point, add.source) == ("add", "add", str(path))
    assert add.cases == ((1, 2), (0, 0))
    assert total.entry_point == "total_of"
    assert total.cases == ()
    assert check_answer(add, "def add(a, b):\n    return a + b\n", examples=50).passed
    verdict = check_answer(total, "def total_of(xs):\n    return sum(xs[1:])\n", examples=50)
    assert verdict.reason.startswith("total_of([")
    peek = f"def add(a, b):\n    return open({str(path)!r}).read()\n"
    if sandbox_mode() == "bwrap":  # the TOML file holds the reference: hidden from answers
        seen = check_answer(add, peek, examples=1).reason
        assert seen.startswith("add(1, 2) r")
        assert "return a + b" not in seen
    for (xs,) in generate_inputs(total.strategy, 30):  # type: ignore[arg-type]
        assert all(0 <= x <= 9 for x in xs)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not toml = = 1", "not valid TOML"),
        ("x = 1", "no [[problem]] tables"),
        ('[[problem]]\nname = "a b"', "problem #1: 'name' must be"),
        (
            '[[problem]]\nname = "p"\nprompt = "x"\nreference = "def p(): pass"\nargs = ["int"]'
            "\nexamples = 3",
            "problem 'p': unknown key(s) ['examples']",
        ),
        ('[[problem]]\nname = "p"\nprompt = "x"\nreference = "def p(): pass"', "needs 'args'"),
        (
            '[[problem]]\nname = "p"\nprompt = "x"\nreference = "def p(x): pass"'
            '\nargs = ["lst[int]"]',
            "problem 'p': bad type 'lst[int]': unknown type 'lst'",
        ),
        (
            '[[problem]]\nname = "p"\nprompt = "x"\nreference = "def q(x): pass"\nargs = ["int"]',
            "problem 'p': the reference does not load",
        ),
        (
            '[[problem]]\nname = "p"\nprompt = "x"\nreference = "def p(x): pass"\nargs = ["int"]'
            "\ncases = [[1, 2]]",
            "every case needs 1 argument(s)",
        ),
        (
            '[[problem]]\nname = "p"\nprompt = "x"\nreference = "def p(x): pass"\nargs = ["int"]'
            '\n[[problem]]\nname = "p"\nprompt = "x"\nreference = "def p(x): pass"\nargs = ["int"]',
            "problem 'p': the name is used twice",
        ),
    ],
)
def test_bad_files(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ProblemFileError) as info:
        load_problems_toml(path)
    text_of = str(info.value)
    assert text_of.startswith(str(path))
    assert message in text_of
    assert "\n" not in text_of
    assert isinstance(info.value, ValueError)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ProblemFileError, match="cannot read"):
        load_problems_toml(tmp_path / "nope.toml")


@pytest.mark.parametrize(
    ("spec", "check"),
    [
        ("int(0, 3)", lambda v: isinstance(v, int) and 0 <= v <= 3),
        ("float(-1, 1)", lambda v: isinstance(v, float) and -1 <= v <= 1),
        ("bool", lambda v: isinstance(v, bool)),
        ("ascii(1, 4)", lambda v: isinstance(v, str) and 1 <= len(v) <= 4 and v.isascii()),
        ("list[int](2, 2)", lambda v: isinstance(v, list) and len(v) == 2),
        ("list of str", lambda v: isinstance(v, list) and all(isinstance(s, str) for s in v)),
        ("set[int(0, 9)]", lambda v: isinstance(v, set) and all(0 <= x <= 9 for x in v)),
        ("dict[str, list[bool]]", lambda v: isinstance(v, dict)),
        ("tuple[int, str]", lambda v: isinstance(v, tuple) and len(v) == 2),
        ("optional[int]", lambda v: v is None or isinstance(v, int)),
    ],
)
def test_types(spec: str, check: object) -> None:
    values = [args[0] for args in generate_inputs(st.tuples(parse_type(spec)), 25)]
    assert values
    assert all(check(v) for v in values)  # type: ignore[operator]


@pytest.mark.parametrize(
    "spec",
    [
        "",
        "lst[int]",
        "list[int",
        "int(5, 1)",
        "dict[list[int], int]",
        "tuple[]",
        "bool(0, 1)",
        "int x",
    ],
)
def test_bad_types(spec: str) -> None:
    with pytest.raises(TypeSpecError, match="type"):
        parse_type(spec)
