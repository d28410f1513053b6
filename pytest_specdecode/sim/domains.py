"""What kind of text a prompt calls for, and replies of that kind.

A model continues code with code, a worked problem with a worked solution
and a conversation with conversation, and its drafter accepts more of the
predictable kinds (DFlash reports an accept length of 6.50 on HumanEval
against 4.24 on MT-Bench). The simulator reads a prompt the way the model
would, by its content alone: a request to summarise at its end, the share of
lines that look like code, the density of numbers and equations. It knows
nothing of the plugin's prompt set; any prompt gets a kind.
"""

from __future__ import annotations

import random
import re

# Content classes of reply tokens; the model gives each its own draft acceptance.
PROSE, CODE, FILLER, MATH, SUMMARY = 0, 1, 2, 3, 4
# A collapsed reply (the ``degenerate-drafter`` fault): a phrase repeated to the end.
REPEAT = 5

# A line of code starts like one (anchored: matched at the line's start only) or ends
# with an opening bracket or a comma. Lines come from ``splitlines``, so none ends
# with a line break and "ends with" is a plain suffix test.
_CODE_START = re.compile(
    r"\s*(?:def |class |return\b|import |from \S+ import |if .*:$|elif |else:|for .*:$|"
    r"while .*:$|try:|except\b|with .*:$|raise |@\w|#|\"\"\"|[\w.\[\]]+ ?[-+*/]?= )"
    r"|\s{4,}\S"
)
_CODE_END = ("(", "[", "{", ",")
# One pattern per word, each starting with its literal so the engine scans for it (an
# alternation after \b tries every position); matches of whole distinct words never
# overlap, so their counts add up to the alternation's.
_MATH_WORDS = tuple(
    re.compile(rf"{w}(?<!\w{w})\b")
    for w in ("solve", "solution", "equation", "prove", "integral", "derivative")
)
_SAMPLE = 6000
# What str.isspace() calls whitespace in ASCII, and its digits: counted by deleting them
# from the bytes (C speed) when the sample is ASCII; any other sample character by character.
_ASCII_SPACE = b" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"
_ASCII_DIGITS = b"0123456789"


def _is_code(line: str) -> bool:
    return line.endswith(_CODE_END) or _CODE_START.match(line) is not None


def _visible_and_digits(sample: str) -> tuple[int, int]:
    """Characters of ``sample`` that are not whitespace, and its digits (``str.isdigit``)."""
    if sample.isascii():
        raw = sample.encode("ascii")
        return len(raw.translate(None, _ASCII_SPACE)), len(raw) - len(
            raw.translate(None, _ASCII_DIGITS)
        )
    chars = [c for c in sample if not c.isspace()]
    return len(chars), sum(c.isdigit() for c in chars)


def classify(prompt: str) -> int:
    """The kind of reply ``prompt`` calls for: CODE, MATH, SUMMARY or PROSE.

    It runs on every request the simulator admits, so it is counted at C speed
    (bytes.translate, anchored or literal-led regexes): a burst of 256 prompts of 1,024 tokens
    must not keep the server from reading the requests behind them.
    """
    tail = prompt[-400:].lower()
    if "summar" in tail:
        return SUMMARY
    sample = prompt[:_SAMPLE]
    lines = [line for line in sample.splitlines() if line.strip()]
    if lines:
        code = sum(1 for line in lines if _is_code(line))
        if code / len(lines) >= 0.5:
            return CODE
    visible, digit_count = _visible_and_digits(sample)
    if visible:
        digits = digit_count / visible
        operators = sum(sample.count(op) for op in ("=", " x ", "^", "/")) / max(1, len(lines))
        # Maths words per 1,000 characters: every worked problem says solve or solution.
        lower = sample.lower()
        worded = sum(len(w.findall(lower)) for w in _MATH_WORDS) * 1000 / len(sample)
        if worded >= 2 or (digits >= 0.04 and (operators >= 0.5 or worded >= 0.5)):
            return MATH
    return PROSE


_NAMES = (
    "value", "items", "total", "count", "index", "result", "limit", "node", "queue", "cache",
    "parts", "entry", "buffer", "offset", "window", "score", "batch", "record", "key", "state",
)  # fmt: skip
_FUNCS = (
    "compute", "update", "merge", "resolve", "load", "parse", "render", "collect", "lookup",
    "split", "flush", "measure", "encode", "expand", "select",
)  # fmt: skip


def code_text(rng: random.Random, tokens: int) -> str:
    """Python-looking lines of roughly ``tokens`` tokens."""
    out: list[str] = []
    n = 0
    while n < tokens:
        name, other = rng.choice(_NAMES), rng.choice(_NAMES)
        func = rng.choice(_FUNCS)
        form = rng.randrange(6)
        if form == 0:
            block = f"\n\ndef {func}_{name}({other}, {name}=None):\n"
        elif form == 1:
            block = f"    {name} = {func}({other}, {rng.randint(1, 64)})\n"
        elif form == 2:
            block = f"    if {name} is None:\n        return {other}\n"
        elif form == 3:
            block = f"    for {name} in {other}:\n        {func}({name})\n"
        elif form == 4:
            block = f"    {name}[{other}] = {name}.get({other}, 0) + 1\n"
        else:
            block = f"    return {func}({name}, {other})\n"
        out.append(block)
        n += len(block.split()) + block.count("(") + block.count(",") + 2
    return "".join(out).lstrip("\n")


def math_text(rng: random.Random, tokens: int) -> str:
    """Worked-solution steps of roughly ``tokens`` tokens."""
    out: list[str] = []
    n = 0
    step = 1
    while n < tokens:
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        form = rng.randrange(3)
        if form == 0:
            line = f"Step {step}. Multiply: {a} x {b} = {a * b}.\n"
        elif form == 1:
            line = f"Step {step}. Add the parts: {a} + {b} = {a + b}.\n"
        else:
            line = f"Step {step}. So x = {a * b} / {b} = {a}; check: {a} x {b} = {a * b}.\n"
        out.append(line)
        n += len(line.split()) + 4
        step += 1
    return "".join(out)
