from __future__ import annotations

import ast
from typing import Any

import pytest

from pytest_specdecode.coding import builtin_problems, check_reply, extract_code, strip_reasoning
from pytest_specdecode.coding.extract import ExtractionTimeout

GCD = next(p for p in builtin_problems() if p.name == "gcd")

GOOD = "def gcd(a, b):\n    return a\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>hmm</think>answer", "answer"),
        ("a<think>x</think>b<think>y</think>c", "abc"),
        ("<THINK>x</THINK>answer", "answer"),
        ("before<think>never closed ```python\ndef f(): pass\n```", "before"),
        ("reasoning without an opening tag</think>answer", "answer"),
        ("plain answer", "plain answer"),
    ],
)
def test_strip_reasoning(text: str, expected: str) -> None:
    assert strip_reasoning(text) == expected


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        pytest.param(f"Here:\n```python\n{GOOD}```\nDone.", GOOD, id="fenced"),
        pytest.param(f"```\n{GOOD}```", GOOD, id="fence-without-language"),
        pytest.param(
            "```python\ndef gcd(a, b):\n    return 0\n```\nBetter:\n"
            f"```python\n{GOOD}```\nUsage:\n```python\nprint(gcd(1, 2))\n```",
            GOOD,
            id="last-defining-block-wins-usage-ignored",
        ),
        pytest.param(
            f"```bash\npip install x\n```\n```python\n{GOOD}```", GOOD, id="skips-shell-block"
        ),
        pytest.param(f"Sure, here it is.\n{GOOD}That is Euclid.", GOOD, id="no-fences"),
        pytest.param(
            f"<think>```python\ndef gcd(a, b):\n    return 1\n```</think>\n```python\n{GOOD}```",
            GOOD,
            id="code-in-think-ignored",
        ),
        pytest.param(
            "```python\nimport math\n\ndef gcd(a, b):\n    return math.gcd(a, b)\n```",
            "import math\ndef gcd(a, b):\n    return math.gcd(a, b)\n",
            id="imports-kept",
        ),
        pytest.param(
            "```python\nimport math\nimport os\n```\n"
            "```python\ndef gcd(a, b):\n    return math.gcd(a, b)\n```",
            "import math\ndef gcd(a, b):\n    return math.gcd(a, b)\n",
            id="used-imports-from-other-blocks",
        ),
        pytest.param(
            f"```python\n{GOOD}\nassert gcd(4, 6) == 2\nif __name__ == '__main__':\n"
            "    print(gcd(1, 2))\n```",
            GOOD,
            id="test-code-dropped",
        ),
        pytest.param(f"```python\n{GOOD}", GOOD, id="unclosed-fence"),
        pytest.param("```python\ndef other(x):\n    return x\n```", None, id="wrong-name-kept"),
    ],
)
def test_extract_code(reply: str, expected: str | None) -> None:
    code = extract_code(reply, "gcd")
    if expected is None:
        assert code is not None
        assert "def other" in code
    else:
        assert code == expected


@pytest.mark.parametrize(
    "reply",
    ["I cannot help with that.", "", "<think>```python\ndef gcd(a, b): ...\n```", "Sure"],
)
def test_no_code(reply: str) -> None:
    assert extract_code(reply, "gcd") is None


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param("def f():\n" * 1200, id="1200-headers"),
        pytest.param("def f(:\n" * 1200, id="1200-broken-headers"),
        pytest.param("import os\n(\n" * 600, id="600-unclosed-brackets"),
        pytest.param("Intro.\n" + f"{GOOD}prose in between\n" * 400, id="400-spans-and-prose"),
    ],
)
def test_extraction_is_bounded(reply: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The run search once tried every run from every line: cubic, 33 s for 1200 headers.
    calls = []
    real_parse = ast.parse

    def parse(source: str, *args: Any, **kwargs: Any) -> ast.AST:
        calls.append(len(source))
        tree: ast.AST = real_parse(source, *args, **kwargs)
        return tree

    monkeypatch.setattr(ast, "parse", parse)
    extract_code(reply, "gcd")
    lines = reply.count("\n")
    assert len(calls) <= 2 * lines + 250


def test_extraction_stops_at_the_deadline() -> None:
    now = [0.0]

    def clock() -> float:
        now[0] += 1.0  # every look at the clock costs a second
        return now[0]

    with pytest.raises(ExtractionTimeout):
        extract_code("def f():\n" * 50, "gcd", deadline=10.0, clock=clock)


def test_extraction_counts_against_the_answer_time_limit() -> None:
    now = [0.0]

    def clock() -> float:
        now[0] += 1.0
        return now[0]

    verdict = check_reply(GCD, "def f():\n" * 50, timeout=5.0, clock=clock)
    assert (verdict.passed, verdict.status) == (False, "timeout")
    assert verdict.reason == "extracting the code did not finish within the 5 s limit"
