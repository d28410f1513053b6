"""Cases, option parsing and prompt building."""

from __future__ import annotations

import argparse

import pytest

from pytest_specdecode.sim import tokenizer
from pytest_specdecode.throughput import domains
from pytest_specdecode.throughput.workload import (
    PromptBuilder,
    ThroughputCase,
    make_cases,
    parse_case_id,
)


def test_default_cases_and_ids() -> None:
    ids = [c.id for c in make_cases()]
    assert ids == [
        "ctx60-c1-chat", "ctx60-c8-chat", "ctx60-c32-chat",
        "ctx1024-c1-chat", "ctx1024-c8-chat", "ctx1024-c32-chat",
        "ctx4096-c1-chat", "ctx4096-c8-chat", "ctx4096-c32-chat",
    ]  # fmt: skip
    assert all(c.max_tokens == 512 and c.ignore_eos for c in make_cases())


def test_domains_and_rates_add_cases_with_their_own_ids() -> None:
    cases = make_cases((1024,), (8,), domains=("code", "math"), rates=(4, 2.5), max_concurrency=16)
    assert [c.id for c in cases] == [
        "ctx1024-c8-code", "ctx1024-c8-math",
        "ctx1024-r4-m16-code", "ctx1024-r4-m16-math",
        "ctx1024-r2.5-m16-code", "ctx1024-r2.5-m16-math",
    ]  # fmt: skip
    assert [c.round_requests for c in cases] == [8, 8, 16, 16, 16, 16]
    assert [c.load for c in cases[::2]] == ["c8", "r4-m16", "r2.5-m16"]


@pytest.mark.parametrize(
    "case",
    [
        ThroughputCase(1024, 8),
        ThroughputCase(60, 1, 128, domain="summary"),
        ThroughputCase(60, 0, rate=8.0, requests=16, domain="code"),
        ThroughputCase(4096, 4, 64, rate=0.5, requests=32, domain="math"),
    ],
)
def test_case_id_round_trips(case: ThroughputCase) -> None:
    assert parse_case_id(case.id) == case


@pytest.mark.parametrize(
    "bad", ["ctx-c8-chat", "1024-8", "ctx1024-c8-x3", "ctx1024", "ctx1024-c8", "ctx60-c1-n4-chat"]
)
def test_bad_case_id_is_one_line(bad: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=f"invalid throughput case {bad!r}"):
        parse_case_id(bad)


@pytest.mark.parametrize("name", domains.DOMAINS)
def test_every_domain_ships_with_its_licence_and_enough_text(name: str) -> None:
    domain = domains.load(name)
    assert domain.license == "MIT"
    assert "written for pytest-specdecode" in domain.provenance.lower()
    assert tokenizer.count(domain.corpus) >= 3000, "a 3k-token prompt must not repeat text"
    assert (domains.SET_DIR / "README.md").is_file()


def test_summaries_end_by_asking_for_the_summary_and_code_is_code() -> None:
    summary = PromptBuilder(tokenizer.count, domain="summary").build(1024, 2)
    assert all(p.text.endswith("keeping the key figures and decisions.") for p in summary)
    code = PromptBuilder(tokenizer.count, domain="code").build(300, 3)
    assert all(p.text.startswith("# Continue this Python module") for p in code)
    assert sum("def " in p.text or "return" in p.text for p in code) == 3


@pytest.mark.parametrize("name", domains.DOMAINS)
def test_prompts_are_pinned_distinct_and_cut_to_the_servers_tokens(name: str) -> None:
    first = PromptBuilder(tokenizer.count, domain=name).build(1024, 24)
    again = PromptBuilder(tokenizer.count, domain=name).build(1024, 24)
    assert [p.text for p in first] == [p.text for p in again], "every run sends the same"
    assert all(abs(p.tokens - 1024) <= 21 and p.tokens == tokenizer.count(p.text) for p in first)
    # The body right after the domain's prefix differs for every prompt: no shared prefix.
    prefix = len(domains.load(name).prefix)
    assert len({p.text[prefix : prefix + 40] for p in first}) == 24


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


def test_a_throughput_marker_picks_domains_and_rates_over_the_settings() -> None:
    from pytest_specdecode.config.settings import Settings
    from pytest_specdecode.config.spec import ConfigError
    from pytest_specdecode.throughput.workload import marker_cases

    settings = Settings(contexts=(60,), concurrency=(1,), max_concurrency=4, rate_requests=8)
    ids = [c.id for c in marker_cases({"domains": ["math"], "request_rates": [2]}, settings)]
    assert ids == ["ctx60-c1-math", "ctx60-r2-m4-n8-math"]
    assert [c.id for c in marker_cases({}, settings)] == ["ctx60-c1-chat"]
    with pytest.raises(ConfigError, match="unknown 'poetry'"):
        marker_cases({"domains": ["poetry"]}, settings)
    with pytest.raises(ConfigError, match=r"request_rates=.*> 0"):
        marker_cases({"request_rates": [0]}, settings)
