"""The simulator reads a prompt's kind from its content and drafts accordingly."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_specdecode.config.load_options import DOMAINS
from pytest_specdecode.sim import tokenizer
from pytest_specdecode.sim.answers import AnswerBook
from pytest_specdecode.sim.domains import (
    _MATH_WORDS,
    CODE,
    MATH,
    PROSE,
    SUMMARY,
    _is_code,
    _visible_and_digits,
    classify,
)
from pytest_specdecode.throughput.workload import PromptBuilder

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


# The classifier as it was first written (a regex search per line, a list of the
# visible characters): the reference the C-speed one must agree with on any text.
_REF_CODE_LINE = re.compile(
    r"^\s*(?:def |class |return\b|import |from \S+ import |if .*:$|elif |else:|for .*:$|"
    r"while .*:$|try:|except\b|with .*:$|raise |@\w|#|\"\"\"|[\w.\[\]]+ ?[-+*/]?= )"
    r"|[(\[{,]$|^\s{4,}\S"
)
_REF_MATH = re.compile(r"\b(?:solve|solution|equation|prove|integral|derivative)\b")


def reference_classify(prompt: str) -> int:
    if "summar" in prompt[-400:].lower():
        return SUMMARY
    sample = prompt[:6000]
    lines = [line for line in sample.splitlines() if line.strip()]
    if lines and sum(1 for line in lines if _REF_CODE_LINE.search(line)) / len(lines) >= 0.5:
        return CODE
    visible = [c for c in sample if not c.isspace()]
    if visible:
        digits = sum(c.isdigit() for c in visible) / len(visible)
        operators = sum(sample.count(op) for op in ("=", " x ", "^", "/")) / max(1, len(lines))
        worded = len(_REF_MATH.findall(sample.lower())) * 1000 / len(sample)
        if worded >= 2 or (digits >= 0.04 and (operators >= 0.5 or worded >= 0.5)):
            return MATH
    return PROSE


# Pieces that move the verdict: code starts and ends, digits (ASCII and not), every
# kind of whitespace str.isspace() knows, operators, maths words, "summar".
_PIECES = st.sampled_from(
    ["def f(x):", "    return x", "import os", "x = 1", "if a:", "#", "@d", "(", ",", "[", "{",
     " ", "\t", "\n", "\r\n", "\x0b", "\x0c", "\x1c", "\x1f", "\x85", "\u2028", "\u00a0",
     "7", "42", "\u00b2", "\u0663", " x ", "=", "^", "/", "solve", "Solution.", "word",
     "prove", "summarise", "é", "The cat sat."]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=80).map("".join) | st.text(max_size=300))
def test_the_fast_classifier_agrees_with_the_reference_on_any_text(prompt: str) -> None:
    assert classify(prompt) == reference_classify(prompt)


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("context", [60, 1024, 8192])
def test_the_fast_classifier_agrees_on_the_plugins_prompts(domain: str, context: int) -> None:
    builder = PromptBuilder(tokenizer.count, domain=domain)
    for prompt in builder.build(context, 6):
        assert classify(prompt.text) == reference_classify(prompt.text)


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=40).map("".join) | st.text(max_size=200))
def test_visible_characters_and_digits_are_counted_as_str_methods_count_them(text: str) -> None:
    visible = [c for c in text if not c.isspace()]
    assert _visible_and_digits(text) == (len(visible), sum(c.isdigit() for c in visible))
    for line in text.splitlines():
        assert _is_code(line) == (_REF_CODE_LINE.search(line) is not None), line


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=40).map("".join).map(str.lower) | st.text(max_size=200))
def test_maths_words_are_counted_as_the_one_alternation_counts_them(text: str) -> None:
    assert sum(len(w.findall(text)) for w in _MATH_WORDS) == len(_REF_MATH.findall(text))
