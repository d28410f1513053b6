"""Output quality beside speed: how repetitive the text a throughput case measured was.

A broken drafter or verify path can collapse the output into a short
repeated phrase ("and the same, and the same, ..."), which the drafter then
predicts perfectly: accept length near the block size, a record speedup.
Throughput figures alone never look at the text, so every case keeps a
bounded sample of it (:class:`TextSample`: the first :data:`SAMPLE_TEXTS`
replies, each cut to :data:`SAMPLE_CHARS` characters) and computes one
figure from it, :func:`repetition`.

The figure is the share of repeated word 4-grams: within each sampled reply,
1 - distinct 4-grams / 4-grams, pooled over the replies (their repeated
4-grams over their 4-grams). Words are runs of letters and digits, and each
punctuation mark is a word of its own, lower-cased: so the figure reads the
same whichever tokenizer the server has (SGLang's BPE ids or the
simulator's word pieces), and whatever the text's whitespace. It lies in
[0, 1]: about 0 for varied prose, a little more for code (its idioms recur),
near 1 for a phrase repeated to the end. Each reply is judged on its own,
because replies to similar prompts may share their start without anything
being wrong; and the pooled figure does not depend on the order of the
replies.

Where words are few, characters stand in for them: a reply with fewer
words than one per :data:`CHARS_PER_WORD` characters (a collapse into one
repeated CJK character or letter, which is a single "word", or into line
breaks, which are none; unspaced CJK prose) is judged by its character
:data:`CHAR_NGRAM`-grams instead, whitespace included. Ordinary prose and
code have a word every 3-7 characters and keep the word figure; a reply
shorter than :data:`CHAR_FLOOR` characters says nothing.

A compression ratio would say much the same but reads less plainly ("0.31
of the size") and depends on the compressor's window.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

NGRAM = 4
"""Words per n-gram of the figure."""
SAMPLE_TEXTS = 32
"""Replies kept per case (the first ones): enough to see a collapse, small to keep."""
SAMPLE_CHARS = 4096
"""Characters kept of each reply (a 512-token reply is about 2-3 KB)."""
CHARS_PER_WORD = 16
"""A reply with fewer words than one per this many characters is judged by characters:
English and code have one every 3-7 (punctuation marks count), a long word is 15."""
CHAR_NGRAM = 8
"""Characters per n-gram where words are few: a repeated unit of up to 8 characters
gives one distinct n-gram per offset, while prose (even CJK, a word per 1-2
characters) seldom repeats 8 characters in a row."""
CHAR_FLOOR = 32
"""Characters a reply judged by characters needs to say anything: a short answer
("1000000000", "ok") is no evidence of a collapse."""
EXCERPT_CHARS = 80
"""Characters of a reply shown in a failure line (escaped there)."""

_WORD = re.compile(r"[^\W_]+|[^\w\s]|_", re.UNICODE)


def words(text: str) -> list[str]:
    """The words of ``text`` as the figure counts them: lower-cased letter/digit runs
    and single punctuation marks."""
    return _WORD.findall(text.lower())


def few_words(found: list[str], text: str) -> bool:
    """Whether ``text``, whose words are ``found``, is to be judged by characters."""
    return len(found) * CHARS_PER_WORD < len(text)


def ngram_counts(text: str, n: int = NGRAM) -> tuple[int, int]:
    """(n-grams, distinct n-grams) of one text: of its words, or of its characters
    (:data:`CHAR_NGRAM`-grams) where words are few; (0, 0) when it has fewer words
    than one n-gram needs or, judged by characters, fewer than :data:`CHAR_FLOOR`."""
    found = words(text)
    if few_words(found, text):
        if len(text) < CHAR_FLOOR:
            return 0, 0
        chars = [text[i : i + CHAR_NGRAM] for i in range(len(text) - CHAR_NGRAM + 1)]
        return len(chars), len(set(chars))
    grams = [tuple(found[i : i + n]) for i in range(len(found) - n + 1)]
    return len(grams), len(set(grams))


def repetition(texts: Iterable[str], n: int = NGRAM) -> float | None:
    """Share of repeated word n-grams over ``texts``, each text judged on its own:
    sum of (n-grams - distinct n-grams) / sum of n-grams, a text's n-grams being of
    characters where its words are few (:func:`ngram_counts`); ``None`` when no text
    has one n-gram (too short to say)."""
    total = repeated = 0
    for text in texts:
        count, distinct = ngram_counts(text, n)
        total += count
        repeated += count - distinct
    return repeated / total if total else None


def text_repetition(text: str, n: int = NGRAM) -> float | None:
    """:func:`repetition` of one text."""
    return repetition([text], n)


@dataclass
class TextSample:
    """A bounded sample of a case's replies: the first ``limit`` texts, each cut to
    ``chars`` characters, so memory stays small whatever the case's size."""

    limit: int = SAMPLE_TEXTS
    chars: int = SAMPLE_CHARS
    texts: list[str] = field(default_factory=list)

    def add(self, text: str) -> None:
        """Keep ``text`` (its start) while the sample has room."""
        if len(self.texts) < self.limit:
            self.texts.append(text[: self.chars])

    def repetition(self) -> float | None:
        """The sample's :func:`repetition`."""
        return repetition(self.texts)

    def excerpt(self) -> str | None:
        """The start of the sample's most repetitive reply (the evidence), unescaped:
        whoever shows it escapes it."""
        scored = [(r, i) for i, t in enumerate(self.texts) if (r := text_repetition(t)) is not None]
        if not scored:
            return None
        _, index = max(scored, key=lambda entry: (entry[0], -entry[1]))
        return self.texts[index][:EXCERPT_CHARS]
