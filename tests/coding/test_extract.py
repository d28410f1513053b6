from __future__ import annotations

import pytest

from pytest_specdecode.coding import extract_code, strip_reasoning

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
