"""What the simulated model says: chat-like answers, scripted replies, filler.

Coding prompts for the built-in problems get a little prose and a fenced
python block with a solution written here and in the ``solutions`` modules
(never the plugin's reference solutions); HumanEval prompts get the dataset's
own solutions (``humaneval``). ``quality`` is the probability that
an answer is correct; the wrong ones carry a plausible bug. Everything is
seeded, so the same prompt and seed give the same answer in every process.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

from pytest_specdecode.sim import domains, humaneval, solutions, solutions_lists, tokenizer
from pytest_specdecode.sim.domains import CODE, FILLER, MATH, PROSE, SUMMARY
from pytest_specdecode.sim.solutions import Solver
from pytest_specdecode.sim.tokenizer import Pieces

__all__ = ["CODE", "FILLER", "MATH", "PROSE", "SUMMARY", "Answer", "AnswerBook", "build_answer"]

FILLER_POOL_TOKENS = 8192
# Solutions per problem and correctness; the variant drawn is below this.
VARIANTS = 2


@dataclass(frozen=True)
class Answer:
    """Tokens of one reply plus the content class of each token.

    ``kind`` is the class of what the model would write past the reply's end
    (``ignore_eos``): more of the same kind for a reply to a plain prompt,
    filler after a coding answer.
    """

    pieces: Pieces
    classes: bytes
    kind: int = FILLER


@dataclass(frozen=True)
class Scripted:
    """One ``--sim-answers`` entry: the first whose ``match`` is in the prompt wins."""

    match: str
    response: str


class AnswersFileError(ValueError):
    """The ``--sim-answers`` file cannot be used; the message is one line."""


def load_scripted(path: str) -> list[Scripted]:
    """Read a ``--sim-answers`` file: a JSON list of ``{"match", "response"}``."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise AnswersFileError(f"cannot read --sim-answers {path!r}: {exc}") from None
    if not isinstance(data, list):
        raise AnswersFileError(f"--sim-answers {path!r} must hold a JSON list, got {type(data)!r}")
    out = []
    for i, item in enumerate(data):
        if not (
            isinstance(item, dict)
            and isinstance(item.get("match"), str)
            and isinstance(item.get("response"), str)
        ):
            raise AnswersFileError(
                f"--sim-answers {path!r} entry {i} must be {{'match': str, 'response': str}},"
                f" got {item!r}"
            )
        out.append(Scripted(item["match"], item["response"]))
    return out


def _has(prompt: str, *words: str) -> bool:
    low = prompt.lower()
    return any(w in low for w in words)


def _palindrome(prompt: str, correct: bool, variant: int) -> str:
    normalise = _has(prompt, "alphanumeric", "ignoring case", "ignore case", "case-insensitive")
    if not normalise:
        if not correct:
            return (
                "def is_palindrome(s: str) -> bool:\n"
                "    half = len(s) // 2\n"
                "    return s[:half] == s[half:][::-1]\n"
            )
        if variant:
            return (
                "def is_palindrome(s: str) -> bool:\n"
                "    left, right = 0, len(s) - 1\n"
                "    while left < right:\n"
                "        if s[left] != s[right]:\n"
                "            return False\n"
                "        left += 1\n"
                "        right -= 1\n"
                "    return True\n"
            )
        return "def is_palindrome(s: str) -> bool:\n    return s == s[::-1]\n"
    keep = "c.isalnum()" if correct else "c != ' '"
    return (
        "def is_palindrome(s: str) -> bool:\n"
        f"    cleaned = [c.lower() for c in s if {keep}]\n"
        "    return cleaned == cleaned[::-1]\n"
    )


def _fib(prompt: str, correct: bool, variant: int) -> str:
    start = "0, 1" if correct else "1, 1"
    if variant and correct:
        return (
            "def fib(n: int) -> int:\n"
            "    if n < 2:\n"
            "        return n\n"
            "    prev, cur = 0, 1\n"
            "    for _ in range(n - 1):\n"
            "        prev, cur = cur, prev + cur\n"
            "    return cur\n"
        )
    return (
        "def fib(n: int) -> int:\n"
        f"    a, b = {start}\n"
        "    for _ in range(n):\n"
        "        a, b = b, a + b\n"
        "    return a\n"
    )


def _merge(prompt: str, correct: bool, variant: int) -> str:
    if variant and correct:
        return "def merge_sorted(a: list, b: list) -> list:\n    return sorted(a + b)\n"
    tail = (
        "    result.extend(a[i:])\n    result.extend(b[j:])\n"
        if correct
        else ("    result.extend(a[i:])\n")
    )
    return (
        "def merge_sorted(a: list, b: list) -> list:\n"
        "    result = []\n"
        "    i = j = 0\n"
        "    while i < len(a) and j < len(b):\n"
        "        if a[i] <= b[j]:\n"
        "            result.append(a[i])\n"
        "            i += 1\n"
        "        else:\n"
        "            result.append(b[j])\n"
        "            j += 1\n"
        f"{tail}"
        "    return result\n"
    )


def _word_count(prompt: str, correct: bool, variant: int) -> str:
    lower = _has(prompt, "case-insensitive", "case insensitive", "lowercase", "lower-case")
    strip = _has(prompt, "punctuation")
    lines = ["def word_count(text: str) -> dict:"]
    if strip:
        lines = ["import string", "", *lines]
    lines.append("    counts: dict = {}")
    lines.append("    for word in text.split():" if correct else "    for word in text.split(' '):")
    if strip:
        lines.append("        word = word.strip(string.punctuation)")
        lines.append("        if not word:")
        lines.append("            continue")
    if lower:
        lines.append("        word = word.lower()")
    lines.append("        counts[word] = counts.get(word, 0) + 1")
    lines.append("    return counts")
    return "\n".join(lines) + "\n"


def _gcd(prompt: str, correct: bool, variant: int) -> str:
    result = "a" if correct else "a if a > 0 else 1"
    return (
        "def gcd(a: int, b: int) -> int:\n"
        "    a, b = abs(a), abs(b)\n"
        "    while b:\n"
        "        a, b = b, a % b\n"
        f"    return {result}\n"
    )


# The five classics are recognized by their bare name, as they always were.
_CLASSICS: dict[str, Solver] = {
    "is_palindrome": _palindrome,
    "merge_sorted": _merge,
    "word_count": _word_count,
    "gcd": _gcd,
    "fib": _fib,
}
PROBLEMS: dict[str, Solver] = {**_CLASSICS, **solutions.SOLVERS, **solutions_lists.SOLVERS}
# The other names are ordinary words ("chunk", "flatten") that throughput
# prompts cut from source text often contain, so those must be written as
# code: `chunk` or chunk(...), not .chunk( or _chunk(. Each pattern starts
# with the name itself (the boundary checks are lookbehinds after it) so the
# regex engine can scan for the literal: prompts can be 100k characters long.
_PROBLEM_RE = {
    name: re.compile(
        rf"{name}(?<!\w{name})\b"
        if name in _CLASSICS
        else rf"{name}(?<![\w.]{name})(?:(?<=`{name})\b|\()"
    )
    for name in PROBLEMS
}


def recognize(prompt: str) -> str | None:
    """The built-in problem ``prompt`` asks for: the earliest mentioned, else None."""
    found = [
        (m.start(), -len(name), name) for name, p in _PROBLEM_RE.items() if (m := p.search(prompt))
    ]
    return min(found)[2] if found else None


_INTROS = (
    "Here is a straightforward implementation of `{name}`:",
    "Sure! Below is a Python function `{name}` that does what you asked.",
    "You can solve this with a short function. Here is `{name}`:",
)
_OUTROS = (
    "It handles the edge cases directly and runs in linear time.",
    "The function does not modify its inputs and has no side effects.",
    "Let me know if you would like a version with more tests or comments.",
)

_WORDS = [
    "the",
    "model",
    "system",
    "request",
    "server",
    "token",
    "batch",
    "draft",
    "window",
    "answer",
    "value",
    "result",
    "time",
    "step",
    "cache",
    "speed",
    "simple",
    "order",
    "data",
    "point",
    "case",
    "method",
    "test",
    "run",
    "output",
    "input",
    "layer",
    "block",
    "tree",
    "branch",
    "depth",
    "budget",
    "context",
    "memory",
    "stream",
    "chunk",
    "latency",
    "signal",
    "measure",
    "sample",
    "review",
    "detail",
    "number",
    "shape",
    "record",
    "report",
]
_JOIN = ("and", "of", "with", "for", "in", "to", "on", "by")


def filler_text(rng: random.Random, tokens: int) -> str:
    """Plausible-looking prose of roughly ``tokens`` tokens."""
    out: list[str] = []
    n = 0
    while n < tokens:
        length = rng.randint(6, 14)
        words = [rng.choice(_WORDS) if i % 3 else rng.choice(_JOIN) for i in range(length)]
        words[0] = rng.choice(_WORDS).capitalize()
        out.append(" ".join(words) + ".")
        n += length + 1
        if rng.random() < 0.2:
            out.append("\n\n")
    return " ".join(out).replace(" \n\n ", "\n\n")


def _humaneval_reply(
    found: humaneval.Match, rng: random.Random, quality: float
) -> tuple[str, int | None]:
    """A HumanEval answer, right with probability ``quality`` drawn as for the built-in
    problems (so runs of one seed at two qualities are nested); a plain completion gets
    the function's body alone, as code."""
    correct = rng.random() < quality
    variant = rng.randrange(VARIANTS)
    if found.continuation:
        return found.task.body(correct, variant), CODE
    return _coding_reply(rng, found.task.entry_point, found.task.function(correct, variant)), None


def _coding_reply(rng: random.Random, name: str, code: str) -> str:
    """A short introduction, the fenced ``code`` and a closing remark."""
    intro = rng.choice(_INTROS).format(name=name)
    return f"{intro}\n\n```python\n{code}```\n\n{rng.choice(_OUTROS)}"


def build_answer(text: str, default_class: int = PROSE, kind: int = FILLER) -> Answer:
    """Tokenize ``text``; the insides of ``` fences are classed as code."""
    pieces: list[str] = []
    classes = bytearray()
    in_code = False
    for part in re.split(r"(```[^\n]*\n?)", text):
        if not part:
            continue
        chunk = tokenizer.split(part)
        pieces += chunk
        is_fence = part.startswith("```")
        cls = CODE if in_code and not is_fence else default_class
        classes += bytes([cls]) * len(chunk)
        if is_fence:
            in_code = not in_code
    return Answer(Pieces(pieces), bytes(classes), kind)


def domain_text(rng: random.Random, kind: int, tokens: int) -> str:
    """A reply of ``kind`` (code, worked maths, or prose for chat and summaries)."""
    if kind == CODE:
        return domains.code_text(rng, tokens)
    if kind == MATH:
        return domains.math_text(rng, tokens)
    return filler_text(rng, tokens)


class AnswerBook:
    """Chooses the reply to a prompt: scripted, coding answer, or filler."""

    def __init__(self, seed: int, quality: float, scripted: list[Scripted] | None = None) -> None:
        self.seed = seed
        self.quality = quality
        self.scripted = scripted or []
        self._cache: dict[str, Answer] = {}
        self._pools: dict[int, Answer] = {}

    def pool(self, kind: int) -> Answer:
        """Tokens of ``kind`` that extend a reply past its end (``ignore_eos``), built once."""
        found = self._pools.get(kind)
        if found is None:
            rng = random.Random(f"{self.seed}:pool:{kind}")
            text = domain_text(rng, kind, FILLER_POOL_TOKENS)
            found = self._pools[kind] = build_answer(text, kind, kind)
        return found

    def text(self, prompt: str, sample: int | None = None) -> str:
        """The reply text; ``sample`` is None for greedy decoding, else the sample number."""
        return self._reply(prompt, sample)[0]

    def _reply(self, prompt: str, sample: int | None) -> tuple[str, int | None]:
        """The reply text and its kind; None for a scripted or coding reply (classed by
        its fences). The prompt is read once: this runs for every request admitted."""
        for entry in self.scripted:
            if entry.match in prompt:
                return entry.response, None
        rng = random.Random(f"{self.seed}:{prompt}:{'greedy' if sample is None else sample}")
        # Before the built-in names: HumanEval prompts quote functions such as fib.
        task = humaneval.recognize(prompt)
        if task is not None:
            return _humaneval_reply(task, rng, self.quality)
        name = recognize(prompt)
        if name is None:
            kind = domains.classify(prompt)
            return domain_text(rng, kind, rng.randint(120, 360)), kind
        correct = rng.random() < self.quality
        code = PROBLEMS[name](prompt, correct, rng.randrange(VARIANTS))
        return _coding_reply(rng, name, code), None

    def answer(self, prompt: str, sample: int | None = None) -> Answer:
        """The reply as tokens; greedy replies are cached per prompt."""
        if sample is not None:
            return self._build(prompt, sample)
        cached = self._cache.get(prompt)
        if cached is None:
            if len(self._cache) > 4096:
                self._cache.clear()
            cached = self._cache[prompt] = self._build(prompt, None)
        return cached

    def _build(self, prompt: str, sample: int | None) -> Answer:
        text, kind = self._reply(prompt, sample)
        if kind is None:
            return build_answer(text)
        return build_answer(text, kind, kind)
