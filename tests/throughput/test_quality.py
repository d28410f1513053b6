"""The repetition figure: share of repeated word 4-grams over a bounded sample of replies."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_specdecode.config.options import MAX_REPETITION
from pytest_specdecode.throughput.quality import (
    NGRAM,
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


# Where words are few: a collapse into one unit that has no spaces (one CJK character,
# one letter, line breaks) is one word or none, so characters judge it.
COLLAPSE_FLOOR = 64
ZH_PROSE = (
    "印刷术的历史始于美因茨的作坊，在那里金属活字、油性墨水和葡萄压榨机被组合在一起。"
    "不到五十年，两百多个城市都有了印刷机，一本书的价格下降了三分之二。"
    "学者们开始交换校勘过的文本，商人用印好的表格记账，教会则担心异端小册子传播得太快。"
)
JA_PROSE = (
    "東京の朝は早い。電車は六時前から動き始め、駅のホームには通勤客が並ぶ。"
    "コンビニでおにぎりを買う人、新聞を読む人、スマートフォンを見つめる人。"
)
CODE = """def merge(a, b):
    out = []
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i] <= b[j]:
            out.append(a[i])
            i += 1
        else:
            out.append(b[j])
            j += 1
    return out + a[i:] + b[j:]
"""


@given(
    st.text(min_size=1, max_size=3),
    st.integers(min_value=COLLAPSE_FLOOR, max_value=SAMPLE_CHARS),
)
def test_one_short_unit_repeated_is_flagged_whatever_it_is(unit: str, length: int) -> None:
    text = (unit * length)[:length]
    found = text_repetition(text)
    assert found is not None, text
    assert found > MAX_REPETITION, (text, found)


@given(st.lists(st.characters(codec="utf-8"), min_size=COLLAPSE_FLOOR, unique=True))
def test_text_that_never_repeats_a_character_is_not_flagged(chars: list[str]) -> None:
    found = text_repetition("".join(chars))
    assert found is None or found == 0


@pytest.mark.parametrize(
    "collapse",
    ["好" * 200, "a" * 200, "\n" * 200, "The answer is " + "好" * 300, "x = 1" + "\n" * 300],
)
def test_a_collapse_without_spaces_scores_high(collapse: str) -> None:
    found = text_repetition(collapse)
    assert found is not None
    assert found > 0.8
    # ...which the word figure alone never saw: one long word, or none.
    assert len(words(collapse)) < NGRAM + 1


@pytest.mark.parametrize(
    "text",
    [ZH_PROSE, ZH_PROSE.replace("，", "").replace("。", "").replace("、", ""), JA_PROSE, CODE],
)
def test_cjk_prose_and_code_score_low(text: str) -> None:
    found = text_repetition(text)
    assert found is not None
    assert found < 0.1


@pytest.mark.parametrize("answer", ["42", "Yes.", "好", "1000000000", "ok\n", "a" * 20])
def test_a_short_answer_says_nothing(answer: str) -> None:
    assert text_repetition(answer) is None
