"""Built-in problems, part 1: the five classics and string problems.

Prompts name the function and its signature in backticks; the simulator
recognizes the classics by their names, so keep those prompts stable.
Strategies stay within the domain each prompt states (e.g. ASCII where the
prompt says ASCII) so a faithful answer never fails on an unstated corner.
"""

from __future__ import annotations

import string
from typing import Any

from hypothesis import strategies as st

from pytest_specdecode.coding.problem import Problem


def make(
    name: str,
    signature: str,
    task: str,
    reference: str,
    cases: list[tuple[Any, ...]],
    strategy: st.SearchStrategy[tuple[Any, ...]],
) -> Problem:
    """A built-in problem with a chat prompt and a completion prompt from one description."""
    return Problem(
        name=name,
        prompt=f"Write a Python function `{signature}` that {task}",
        entry_point=name,
        reference=reference,
        cases=tuple(cases),
        strategy=strategy,
        completion_prompt=f'def {signature}:\n    """{task[0].upper()}{task[1:]}"""\n',
        source="builtin",
    )


def one(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[tuple[Any, ...]]:
    """Single-argument tuples."""
    return strategy.map(lambda x: (x,))


_PAL = st.text(alphabet="abcAB12 ,.!?'", max_size=12)

PROBLEMS = [
    make(
        "is_palindrome",
        "is_palindrome(s: str) -> bool",
        "returns True if the ASCII string `s` reads the same forwards and backwards when only"
        " its alphanumeric characters are considered, ignoring case, and False otherwise.",
        "def is_palindrome(s):\n"
        "    kept = [c.lower() for c in s if c.isalnum()]\n"
        "    return kept == kept[::-1]\n",
        [("",), ("A man, a plan, a canal: Panama",), ("race a car",), ("ab",), (" ",), ("0P",)],
        one(
            st.one_of(
                _PAL, _PAL.map(lambda t: t + t[::-1]), _PAL.map(lambda t: t + t[::-1].upper())
            )
        ),
    ),
    make(
        "fib",
        "fib(n: int) -> int",
        "returns the n-th Fibonacci number, with fib(0) == 0 and fib(1) == 1, for"
        " 0 <= n <= 200. It must run in linear time.",
        "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n"
        "        a, b = b, a + b\n    return a\n",
        [(0,), (1,), (2,), (10,), (50,), (200,)],
        one(st.integers(0, 200)),
    ),
    make(
        "merge_sorted",
        "merge_sorted(a: list[int], b: list[int]) -> list[int]",
        "merges two lists of integers, each sorted in ascending order, into one sorted list"
        " holding every element of both (duplicates included). Do not modify the inputs.",
        "def merge_sorted(a, b):\n    return sorted(a + b)\n",
        [([], []), ([1, 3, 5], [2, 4, 6]), ([], [1]), ([1, 1], [1]), ([-3, 0], [])],
        st.tuples(
            st.lists(st.integers(-50, 50), max_size=15).map(sorted),
            st.lists(st.integers(-50, 50), max_size=15).map(sorted),
        ),
    ),
    make(
        "word_count",
        "word_count(text: str) -> dict[str, int]",
        "returns a dict mapping each word of `text` to how many times it occurs. Words are"
        " the pieces `text.split()` gives (runs of whitespace separate words); keep each"
        " word exactly as written, so 'The' and 'the' are different words.",
        "def word_count(text):\n"
        "    counts = {}\n"
        "    for word in text.split():\n"
        "        counts[word] = counts.get(word, 0) + 1\n"
        "    return counts\n",
        [("",), ("the cat the",), ("  a  b\ta\n",), ("The the THE",)],
        one(st.text(alphabet="ab Ab\t\n.,", max_size=20)),
    ),
    make(
        "gcd",
        "gcd(a: int, b: int) -> int",
        "returns the greatest common divisor of the integers `a` and `b`, which may be"
        " negative or zero. The result is never negative, and gcd(0, 0) == 0.",
        "def gcd(a, b):\n"
        "    a, b = abs(a), abs(b)\n"
        "    while b:\n"
        "        a, b = b, a % b\n"
        "    return a\n",
        [(12, 18), (-4, 6), (0, 5), (17, 0), (7, 13)],
        st.tuples(st.integers(-(10**6), 10**6), st.integers(-(10**6), 10**6)),
    ),
    make(
        "reverse_words",
        "reverse_words(s: str) -> str",
        "returns the words of `s` (separated by any whitespace) in reverse order, joined by"
        " single spaces, with no leading or trailing space.",
        "def reverse_words(s):\n    return ' '.join(reversed(s.split()))\n",
        [("",), ("hello world",), ("  a  b c ",), ("one",)],
        one(st.text(alphabet="abc \t\n", max_size=20)),
    ),
    make(
        "run_length_encode",
        "run_length_encode(s: str) -> list[tuple[str, int]]",
        "returns the run-length encoding of `s` as a list of (character, count) tuples, one"
        " per maximal run of equal characters, in order; the empty string gives [].",
        "def run_length_encode(s):\n"
        "    out = []\n"
        "    for c in s:\n"
        "        if out and out[-1][0] == c:\n"
        "            out[-1] = (c, out[-1][1] + 1)\n"
        "        else:\n"
        "            out.append((c, 1))\n"
        "    return out\n",
        [("",), ("aaabcc",), ("a",), ("abab",)],
        one(st.text(alphabet="aab", max_size=20)),
    ),
    make(
        "is_anagram",
        "is_anagram(a: str, b: str) -> bool",
        "returns True if `b` is a rearrangement of exactly the characters of `a` (case and"
        " spaces count), and False otherwise.",
        "def is_anagram(a, b):\n    return sorted(a) == sorted(b)\n",
        [("listen", "silent"), ("", ""), ("a", "A"), ("ab", "abb"), ("a b", "ba ")],
        st.one_of(
            st.tuples(st.text("abAB ", max_size=6), st.text("abAB ", max_size=6)),
            st.text("ab", min_size=1, max_size=5).map(lambda t: (t, t + t[0])),
            st.text("abcAB ", max_size=8).flatmap(
                lambda t: st.permutations(list(t)).map(lambda p: (t, "".join(p)))
            ),
        ),
    ),
    make(
        "caesar_cipher",
        "caesar_cipher(text: str, shift: int) -> str",
        "shifts every ASCII letter of `text` by `shift` places in the alphabet, wrapping"
        " around and keeping its case (negative shifts go backwards); other characters are"
        " unchanged.",
        "def caesar_cipher(text, shift):\n"
        "    out = []\n"
        "    for c in text:\n"
        "        if 'a' <= c <= 'z':\n"
        "            c = chr((ord(c) - 97 + shift) % 26 + 97)\n"
        "        elif 'A' <= c <= 'Z':\n"
        "            c = chr((ord(c) - 65 + shift) % 26 + 65)\n"
        "        out.append(c)\n"
        "    return ''.join(out)\n",
        [("abc", 1), ("xyz", 3), ("Hello, World!", 13), ("abc", -1), ("", 5), ("Zz", 52)],
        st.tuples(
            st.text(alphabet=string.ascii_letters + " ,!é", max_size=15), st.integers(-60, 60)
        ),
    ),
    make(
        "balanced_brackets",
        "balanced_brackets(s: str) -> bool",
        "returns True if the brackets (), [] and {} in `s` are balanced and properly nested,"
        " ignoring every other character, and False otherwise.",
        "def balanced_brackets(s):\n"
        "    pairs = {')': '(', ']': '[', '}': '{'}\n"
        "    stack = []\n"
        "    for c in s:\n"
        "        if c in '([{':\n"
        "            stack.append(c)\n"
        "        elif c in pairs:\n"
        "            if not stack or stack.pop() != pairs[c]:\n"
        "                return False\n"
        "    return not stack\n",
        [("",), ("([]{})",), ("(]",), ("((",), ("a(b)c",), (")(",)],
        one(st.text(alphabet="()[]{}a", max_size=14)),
    ),
    make(
        "int_to_roman",
        "int_to_roman(n: int) -> str",
        "returns the Roman numeral for 1 <= n <= 3999 in standard subtractive form"
        " (e.g. 4 -> 'IV', 1994 -> 'MCMXCIV').",
        "def int_to_roman(n):\n"
        "    table = [(1000, 'M'), (900, 'CM'), (500, 'D'), (400, 'CD'), (100, 'C'),\n"
        "             (90, 'XC'), (50, 'L'), (40, 'XL'), (10, 'X'), (9, 'IX'), (5, 'V'),\n"
        "             (4, 'IV'), (1, 'I')]\n"
        "    out = ''\n"
        "    for value, numeral in table:\n"
        "        while n >= value:\n"
        "            out += numeral\n"
        "            n -= value\n"
        "    return out\n",
        [(1,), (4,), (9,), (14,), (40,), (1994,), (3999,)],
        one(st.integers(1, 3999)),
    ),
    make(
        "longest_common_prefix",
        "longest_common_prefix(words: list[str]) -> str",
        "returns the longest string that every word in `words` starts with; an empty list"
        " gives ''.",
        "def longest_common_prefix(words):\n"
        "    if not words:\n"
        "        return ''\n"
        "    prefix = words[0]\n"
        "    for w in words[1:]:\n"
        "        while not w.startswith(prefix):\n"
        "            prefix = prefix[:-1]\n"
        "    return prefix\n",
        [([],), (["flower", "flow", "flight"],), (["a"],), (["", "a"],), (["ab", "ab"],)],
        one(st.lists(st.text(alphabet="ab", max_size=5), max_size=5)),
    ),
    make(
        "edit_distance",
        "edit_distance(a: str, b: str) -> int",
        "returns the Levenshtein distance between `a` and `b`: the minimum number of"
        " single-character insertions, deletions and substitutions turning `a` into `b`.",
        "def edit_distance(a, b):\n"
        "    prev = list(range(len(b) + 1))\n"
        "    for i, ca in enumerate(a, 1):\n"
        "        cur = [i]\n"
        "        for j, cb in enumerate(b, 1):\n"
        "            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))\n"
        "        prev = cur\n"
        "    return prev[-1]\n",
        [("", ""), ("kitten", "sitting"), ("abc", ""), ("", "ab"), ("flaw", "lawn")],
        st.tuples(st.text(alphabet="abc", max_size=8), st.text(alphabet="abc", max_size=8)),
    ),
]
