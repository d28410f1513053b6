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


@pytest.mark.parametrize("marker", ["coding", "throughput", "lossless"])
def test_a_measuring_marker_whose_every_test_skipped_fails_the_run(
    pytester: pytest.Pytester, marker: str
) -> None:
    # Any reason a test skips (here its own): asked to measure, the run measured nothing.
    pytester.makepyfile(
        test_m=f"""
import pytest

@pytest.mark.{marker}
@pytest.mark.parametrize("n", [1, 2])
def test_m(dflash_config, n):
    pytest.skip("no server for this one")

def test_plain():
    pass
"""
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            f"*{marker} gate CANNOT JUDGE: 2 {marker} test(s) selected, none ran: all skipped: "
            "no server for this one"
        ]
    )


def test_one_measuring_test_that_ran_is_a_measurement(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_m="""
import pytest

@pytest.mark.throughput
@pytest.mark.parametrize("n", [1, 2])
def test_m(dflash_config, n):
    if n == 1:
        pytest.skip("this case only")
"""
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK
    assert "CANNOT JUDGE" not in result.stdout.str()
