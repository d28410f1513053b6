"""The repetition figure: share of repeated word 4-grams over a bounded sample of replies."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from pytest_specdecode.throughput.quality import (
    SAMPLE_CHARS,
    SAMPLE_TEXTS,
    TextSample,
    repetition,
    text_repetition,
    words,
)

TEXTS = st.lists(st.text(max_size=300), max_size=8)
VOCAB = [f"w{i}" for i in range(40)]


@given(TEXTS)
def test_the_figure_is_a_fraction_or_unknown(texts: list[str]) -> None:
    found = repetition(texts)
    assert found is None or 0 <= found <= 1


@given(TEXTS, st.randoms(use_true_random=False))
def test_the_order_of_the_replies_does_not_matter(texts: list[str], rng: random.Random) -> None:
    shuffled = texts[:]
    rng.shuffle(shuffled)
    assert repetition(shuffled) == repetition(texts)


@given(
    st.lists(st.sampled_from(VOCAB), min_size=1, max_size=6, unique=True),
    st.integers(min_value=20, max_value=80),
)
def test_a_repeated_phrase_scores_high(phrase: list[str], times: int) -> None:
    text = " ".join(phrase * times)
    found = text_repetition(text)
    assert found is not None
    assert found >= 0.9


@given(st.lists(st.sampled_from(VOCAB), min_size=8, max_size=40, unique=True))
def test_varied_text_scores_zero(vocabulary: list[str]) -> None:
    assert text_repetition(" ".join(vocabulary)) == 0


def test_prose_scores_low_and_its_collapse_high() -> None:
    prose = (
        "The history of the printing press begins in the workshops of Mainz, where metal type, "
        "oil-based ink and a wine press were put together. Within fifty years presses ran in "
        "more than two hundred cities, and the price of a book fell by two thirds."
    )
    collapsed = "The history of the printing press and the same thing," + (
        " and the same thing," * 60
    )
    low, high = text_repetition(prose), text_repetition(collapsed)
    assert low is not None
    assert high is not None
    assert low < 0.1 < 0.9 < high


def test_words_ignore_case_whitespace_and_tokenizer() -> None:
    # The same words however the server split or spaced them: the figure reads alike.
    assert words("Hello,  World\n\tagain") == ["hello", ",", "world", "again"]
    assert repetition(["a b c d a b c d"]) == repetition(["A  b\nc d a B c  d"])


def test_each_reply_is_judged_on_its_own() -> None:
    # Two replies sharing their start (similar prompts) repeat nothing within themselves.
    reply = "one two three four five six seven eight"
    assert repetition([reply, reply]) == 0


def test_too_short_to_say_is_unknown() -> None:
    assert repetition([]) is None
    assert repetition(["three words only"]) is None


def test_the_sample_is_bounded() -> None:
    sample = TextSample()
    for i in range(SAMPLE_TEXTS * 3):
        sample.add(f"reply {i} " + "x" * (SAMPLE_CHARS * 2))
    assert sample.seen == SAMPLE_TEXTS * 3
    assert len(sample.texts) == SAMPLE_TEXTS
    assert all(len(t) == SAMPLE_CHARS for t in sample.texts)
    assert sample.texts[0].startswith("reply 0 ")


def test_the_excerpt_is_the_most_repetitive_reply() -> None:
    sample = TextSample()
    sample.add("a varied reply with many different words in it")
    sample.add("loop " * 200)
    sample.add("short")
    excerpt = sample.excerpt()
    assert excerpt is not None
    assert excerpt.startswith("loop loop")
    assert len(excerpt) <= 80
    assert TextSample().excerpt() is None
