"""Cases, option parsing and prompt building."""

from __future__ import annotations

import argparse

import pytest

from pytest_specdecode.throughput.workload import (
    PromptBuilder,
    ThroughputCase,
    batches,
    make_cases,
    parse_case_id,
    parse_int_list,
    stdlib_corpus,
)


def test_default_cases_and_ids() -> None:
    ids = [c.id for c in make_cases()]
    assert ids == [
        "ctx60-c1", "ctx60-c8", "ctx60-c32",
        "ctx1024-c1", "ctx1024-c8", "ctx1024-c32",
        "ctx4096-c1", "ctx4096-c8", "ctx4096-c32",
    ]  # fmt: skip
    assert all(c.max_tokens == 512 and c.ignore_eos for c in make_cases())


@pytest.mark.parametrize("case", [ThroughputCase(1024, 8), ThroughputCase(60, 1, 128)])
def test_case_id_round_trips(case: ThroughputCase) -> None:
    assert parse_case_id(case.id) == case


@pytest.mark.parametrize("bad", ["ctx-c8", "1024-8", "ctx1024-c8-x3", "ctx1024"])
def test_bad_case_id_is_one_line(bad: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=f"invalid throughput case {bad!r}"):
        parse_case_id(bad)


def test_parse_int_list() -> None:
    assert parse_int_list("60, 1024,4096") == (60, 1024, 4096)
    assert parse_int_list("8,8,1") == (8, 1)


@pytest.mark.parametrize(("text", "message"), [("60,abc", "'abc'"), ("0,8", "must be >= 1")])
def test_parse_int_list_errors(text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        parse_int_list(text, what="context")


def test_stdlib_corpus_is_real_python() -> None:
    corpus = stdlib_corpus(min_chars=50_000)
    assert len(corpus) >= 50_000
    assert "def " in corpus
    assert "import " in corpus


def words_counter(calls: list[str]):  # type: ignore[no-untyped-def]
    """A tokenizer stand-in whose ratio varies with the text: one token per word."""

    def count(text: str) -> int:
        calls.append(text)
        return len(text.split())

    return count


def test_prompts_hit_the_target_and_differ() -> None:
    calls: list[str] = []
    corpus = " ".join(f"w{i}" + " x" * (i % 5) for i in range(40_000))
    builder = PromptBuilder(words_counter(calls), corpus)
    prompts = builder.build(200, 12)
    assert len(prompts) == 12
    for p in prompts:
        assert p.tokens == len(p.text.split())
        assert abs(p.tokens - 200) <= 4
    starts = {p.text[:50] for p in prompts}
    assert len(starts) == 12, "every prompt must start on different text"
    # The learnt ratio keeps the cost near one count per prompt.
    assert len(calls) <= 1 + 12 * 3


def test_prompt_builder_rejects_nonpositive_target() -> None:
    with pytest.raises(ValueError, match="target_tokens"):
        PromptBuilder(len, "abc").one(0, 0)


def test_batches_split_in_order() -> None:
    assert batches([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]  # type: ignore[list-item,comparison-overlap]
