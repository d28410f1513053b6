"""The simulator reads a prompt's kind from its content and drafts accordingly."""

from __future__ import annotations

import pytest

from pytest_specdecode.sim.answers import AnswerBook
from pytest_specdecode.sim.domains import CODE, MATH, PROSE, SUMMARY, classify

from .test_scheduler import DFLASH8, request, run

# Written here, not taken from the plugin's prompt set: the simulator must judge any text.
CODE_PROMPT = """import os


def walk(root):
    for name in os.listdir(root):
        path = os.path.join(root, name)
        if os.path.isdir(path):
            yield from walk(path)
        else:
            yield path
"""
MATH_PROMPT = (
    "Problem. A farmer has 48 sheep and buys 3 times as many goats. How many animals?\n"
    "Solution. Goats: 3 x 48 = 144. Animals: 48 + 144 = 192.\n"
    "Problem. Solve 5y + 4 = 39.\nSolution."
)
CHAT_PROMPT = (
    "User: What should I pack for a weekend of hiking in the mountains?\n"
    "Assistant: Layers, a rain jacket, good boots, water and a map.\n"
    "User: Do I need a stove?\nAssistant:"
)
SUMMARY_PROMPT = (
    "The council met on Tuesday and agreed to repair the old bridge before winter, "
    "at a cost of 1.2 million, after engineers found cracks in two of its supports. "
    "Work starts next month.\n\nSummarise the text above in two sentences."
)


@pytest.mark.parametrize(
    ("prompt", "kind"),
    [(CODE_PROMPT, CODE), (MATH_PROMPT, MATH), (CHAT_PROMPT, PROSE), (SUMMARY_PROMPT, SUMMARY)],
)
def test_a_prompt_gets_the_kind_its_content_calls_for(prompt: str, kind: int) -> None:
    assert classify(prompt) == kind
    answer = AnswerBook(0, 1.0).answer(prompt)
    assert set(answer.classes) == {kind}
    assert answer.kind == kind, "ignore_eos continues in the same kind"


def test_a_coding_problem_still_gets_prose_around_a_code_block() -> None:
    answer = AnswerBook(0, 1.0).answer("Write a function `fib(n)` returning the n-th number.")
    assert set(answer.classes) == {PROSE, CODE}


def test_code_is_accepted_more_than_conversation_past_the_reply_too() -> None:
    seqs, steps, _ = run(DFLASH8, [request(CODE_PROMPT, 600, ignore_eos=True),
                                   request(CHAT_PROMPT, 600, ignore_eos=True)])  # fmt: skip
    code, chat = (len(s) for s in steps)
    assert seqs[0].total == seqs[1].total == 600
    assert code < chat * 0.8, "code needs clearly fewer verify steps for the same tokens"
    # The histogram of correct drafts per step (SGLang's spec_correct_drafts_histogram).
    assert sum(seqs[0].hist) == code
    assert sum((i + 1) * n for i, n in enumerate(seqs[0].hist)) == 600
