"""The simulated model's own solutions, part 1: string problems.

Each problem has up to two correct solutions (different styles, as a model's
samples differ) and up to two plausible buggy ones for ``--sim-quality``.
Every buggy one is wrong on an ordinary input (an off-by-one, a missed edge
case), so a differential test catches it. Solutions never use backslashes:
they are plain text inside these string literals.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

# (prompt, correct, variant) -> the code block's source.
Solver = Callable[[str, bool, int], str]
_DEF = re.compile(r"^def (\w+)\(", re.MULTILINE)


@dataclass(frozen=True)
class Fixed:
    """A solver whose sources do not depend on the prompt's wording."""

    correct: tuple[str, ...]
    wrong: tuple[str, ...]

    def __call__(self, prompt: str, correct: bool, variant: int) -> str:
        pool = self.correct if correct else self.wrong
        return pool[variant % len(pool)]

    @property
    def name(self) -> str:
        """The function the solutions define: the first one's first top-level ``def``."""
        found = _DEF.search(self.correct[0])
        assert found is not None, self.correct[0]
        return found.group(1)


def by_name(*solvers: Fixed) -> dict[str, Solver]:
    """The solvers by the name of the function they write."""
    return {solver.name: solver for solver in solvers}


SOLVERS = by_name(
    Fixed(
        correct=(
            """\
def reverse_words(s: str) -> str:
    words = s.split()
    words.reverse()
    return " ".join(words)
""",
            """\
def reverse_words(s: str) -> str:
    result: list[str] = []
    word = ""
    for ch in s + " ":
        if ch.isspace():
            if word:
                result.insert(0, word)
            word = ""
        else:
            word += ch
    return " ".join(result)
""",
        ),
        wrong=(
            """\
def reverse_words(s: str) -> str:
    return " ".join(s.split(" ")[::-1])
""",
        ),
    ),
    Fixed(
        correct=(
            """\
from itertools import groupby


def run_length_encode(s: str) -> list[tuple[str, int]]:
    return [(ch, len(list(run))) for ch, run in groupby(s)]
""",
            """\
def run_length_encode(s: str) -> list[tuple[str, int]]:
    runs = []
    i = 0
    while i < len(s):
        j = i
        while j < len(s) and s[j] == s[i]:
            j += 1
        runs.append((s[i], j - i))
        i = j
    return runs
""",
        ),
        wrong=(
            # Forgets to emit the final run.
            """\
def run_length_encode(s: str) -> list[tuple[str, int]]:
    runs = []
    count = 0
    for i, ch in enumerate(s):
        if i > 0 and ch != s[i - 1]:
            runs.append((s[i - 1], count))
            count = 0
        count += 1
    return runs
""",
        ),
    ),
    Fixed(
        correct=(
            """\
from collections import Counter


def is_anagram(a: str, b: str) -> bool:
    return Counter(a) == Counter(b)
""",
            """\
def is_anagram(a: str, b: str) -> bool:
    if len(a) != len(b):
        return False
    counts: dict[str, int] = {}
    for ch in a:
        counts[ch] = counts.get(ch, 0) + 1
    for ch in b:
        if counts.get(ch, 0) == 0:
            return False
        counts[ch] -= 1
    return True
""",
        ),
        wrong=(
            """\
def is_anagram(a: str, b: str) -> bool:
    return set(a) == set(b)
""",
            """\
def is_anagram(a: str, b: str) -> bool:
    return sorted(a.lower()) == sorted(b.lower())
""",
        ),
    ),
    Fixed(
        correct=(
            """\
import string


def caesar_cipher(text: str, shift: int) -> str:
    k = shift % 26
    lower, upper = string.ascii_lowercase, string.ascii_uppercase
    table = str.maketrans(lower + upper, lower[k:] + lower[:k] + upper[k:] + upper[:k])
    return text.translate(table)
""",
            """\
def caesar_cipher(text: str, shift: int) -> str:
    out = []
    for ch in text:
        if ch.isascii() and ch.isalpha():
            base = ord("a") if ch.islower() else ord("A")
            ch = chr(base + (ord(ch) - base + shift) % 26)
        out.append(ch)
    return "".join(out)
""",
        ),
        wrong=(
            # Only lowercase letters are shifted.
            """\
import string


def caesar_cipher(text: str, shift: int) -> str:
    k = shift % 26
    lower = string.ascii_lowercase
    return text.translate(str.maketrans(lower, lower[k:] + lower[:k]))
""",
            # Wraps modulo 25.
            """\
def caesar_cipher(text: str, shift: int) -> str:
    out = []
    for ch in text:
        if ch.isascii() and ch.isalpha():
            base = ord("a") if ch.islower() else ord("A")
            ch = chr(base + (ord(ch) - base + shift) % 25)
        out.append(ch)
    return "".join(out)
""",
        ),
    ),
    Fixed(
        correct=(
            """\
def balanced_brackets(s: str) -> bool:
    closer = {"(": ")", "[": "]", "{": "}"}
    expected: list[str] = []
    for ch in s:
        if ch in closer:
            expected.append(closer[ch])
        elif ch in ")]}":
            if not expected or expected.pop() != ch:
                return False
    return len(expected) == 0
""",
            """\
def balanced_brackets(s: str) -> bool:
    rest = "".join(ch for ch in s if ch in "()[]{}")
    previous = None
    while rest != previous:
        previous = rest
        rest = rest.replace("()", "").replace("[]", "").replace("{}", "")
    return rest == ""
""",
        ),
        wrong=(
            # Unclosed openers left on the stack are not noticed.
            """\
def balanced_brackets(s: str) -> bool:
    closer = {"(": ")", "[": "]", "{": "}"}
    expected: list[str] = []
    for ch in s:
        if ch in closer:
            expected.append(closer[ch])
        elif ch in ")]}":
            if not expected or expected.pop() != ch:
                return False
    return True
""",
        ),
    ),
    Fixed(
        correct=(
            """\
def int_to_roman(n: int) -> str:
    thousands = ["", "M", "MM", "MMM"]
    hundreds = ["", "C", "CC", "CCC", "CD", "D", "DC", "DCC", "DCCC", "CM"]
    tens = ["", "X", "XX", "XXX", "XL", "L", "LX", "LXX", "LXXX", "XC"]
    ones = ["", "I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX"]
    return thousands[n // 1000] + hundreds[n // 100 % 10] + tens[n // 10 % 10] + ones[n % 10]
""",
            """\
def int_to_roman(n: int) -> str:
    symbols = "IVXLCDM  "
    parts = []
    place = 0
    while n > 0:
        digit = n % 10
        one, five, ten = symbols[place], symbols[place + 1], symbols[place + 2]
        if digit == 9:
            parts.append(one + ten)
        elif digit >= 5:
            parts.append(five + one * (digit - 5))
        elif digit == 4:
            parts.append(one + five)
        else:
            parts.append(one * digit)
        n //= 10
        place += 2
    return "".join(reversed(parts))
""",
        ),
        wrong=(
            # No subtractive forms below ten: 4 -> IIII.
            """\
def int_to_roman(n: int) -> str:
    values = [(1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"),
              (90, "XC"), (50, "L"), (40, "XL"), (10, "X"), (5, "V"), (1, "I")]
    out = []
    for value, symbol in values:
        count, n = divmod(n, value)
        out.append(symbol * count)
    return "".join(out)
""",
        ),
    ),
    Fixed(
        correct=(
            """\
def longest_common_prefix(words: list[str]) -> str:
    if not words:
        return ""
    first, last = min(words), max(words)
    i = 0
    while i < len(first) and first[i] == last[i]:
        i += 1
    return first[:i]
""",
            """\
def longest_common_prefix(words: list[str]) -> str:
    if not words:
        return ""
    prefix = []
    for column in zip(*words):
        if len(set(column)) != 1:
            break
        prefix.append(column[0])
    return "".join(prefix)
""",
        ),
        wrong=(
            # Stops one character short when a whole word is the prefix.
            """\
def longest_common_prefix(words: list[str]) -> str:
    if not words:
        return ""
    shortest = min(words, key=len)
    for i in range(len(shortest) - 1):
        if any(w[i] != shortest[i] for w in words):
            return shortest[:i]
    return shortest[: max(len(shortest) - 1, 0)]
""",
        ),
    ),
    Fixed(
        correct=(
            """\
def edit_distance(a: str, b: str) -> int:
    rows, cols = len(a) + 1, len(b) + 1
    table = [[0] * cols for _ in range(rows)]
    for i in range(rows):
        table[i][0] = i
    for j in range(cols):
        table[0][j] = j
    for i in range(1, rows):
        for j in range(1, cols):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            table[i][j] = min(
                table[i - 1][j] + 1,
                table[i][j - 1] + 1,
                table[i - 1][j - 1] + cost,
            )
    return table[-1][-1]
""",
            """\
from functools import lru_cache


def edit_distance(a: str, b: str) -> int:
    @lru_cache(maxsize=None)
    def dist(i: int, j: int) -> int:
        if i == len(a):
            return len(b) - j
        if j == len(b):
            return len(a) - i
        if a[i] == b[j]:
            return dist(i + 1, j + 1)
        return 1 + min(dist(i + 1, j), dist(i, j + 1), dist(i + 1, j + 1))

    return dist(0, 0)
""",
        ),
        wrong=(
            # Substitutions cost two (a delete plus an insert).
            """\
def edit_distance(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        row = [i]
        for j, y in enumerate(b, 1):
            row.append(min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (0 if x == y else 2)))
        prev = row
    return prev[-1]
""",
        ),
    ),
)
