"""Whether a launch line sets an option, in every spelling SGLang's parser takes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pytest_specdecode import facts

TABLE = facts.load()
OPTIONS = st.sampled_from(TABLE.options)


@given(OPTIONS, OPTIONS, st.booleans())
def test_every_flag_sets_its_own_dest_and_no_other(
    option: facts.Option, other: facts.Option, joined: bool
) -> None:
    for flag in option.flags:
        words = [f"{flag}=v"] if joined else [flag, "v"]
        assert TABLE.gives(["--model-path", "/m", *words], option.dest)
        if other.dest != option.dest:
            assert not TABLE.gives(words, other.dest)


@given(OPTIONS)
def test_an_abbreviation_counts_only_when_it_names_one_option(option: facts.Option) -> None:
    flag = option.flags[-1]
    for end in range(3, len(flag)):
        short = flag[:end]
        matches = TABLE.prefix_matches(short)
        if TABLE.option(short) is None:
            assert TABLE.gives([short, "v"], option.dest) == (matches == [flag])


def test_values_and_single_words_are_not_flags() -> None:
    assert not TABLE.gives(["python", "-m", "sglang.launch_server", "0.0.0.0"], "host")
    assert TABLE.gives(["--hos", "0.0.0.0"], "host")
