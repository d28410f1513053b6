"""Runs that measure nothing: a gate still says why the run fails; listing runs nothing."""

from __future__ import annotations

import pytest


@pytest.fixture
def gated(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\ndflash_min_accept_length = 2\n")
    pytester.makepyfile(test_plain="def test_a():\n    pass\n")
    return pytester


def test_a_gate_with_nothing_measured_fails_with_its_line(gated: pytest.Pytester) -> None:
    result = gated.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*accept-length gate CANNOT JUDGE: unknown < 2: no throughput*"])


@pytest.mark.parametrize("listing", ["--collect-only", "--fixtures"])
def test_listing_tests_or_fixtures_judges_nothing(gated: pytest.Pytester, listing: str) -> None:
    result = gated.runpytest("-p", "no:cacheprovider", listing)
    assert result.ret == pytest.ExitCode.OK
    assert "gate" not in result.stdout.str()
    assert "dflash sweep" not in result.stdout.str()
