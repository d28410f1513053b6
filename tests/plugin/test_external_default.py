"""External mode (``--dflash-restart=never``): tests that ask for no config of their own
run under the config the live server runs; one that asks for another gets one line."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ..conftest import dflash_flags, run_sim


@pytest.fixture(scope="module")
def live_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A simulator someone else started: window 2048 and a budget that is no default."""
    flags = dflash_flags(budget=16, window=2048, draft="sim/dflash-drafter")
    with run_sim(tmp_path_factory.mktemp("live"), *flags, healthy="/health") as sim:
        yield sim.port


def suite(pytester: pytest.Pytester, port: int, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:randomly", "--pyargs", "pytest_specdecode.suite",
        "-m", "coding", "--dflash-restart=never", "--dflash-port", str(port), *args,
    )  # fmt: skip


@pytest.mark.slow
def test_the_suite_runs_under_the_live_servers_config(
    pytester: pytest.Pytester, live_port: int
) -> None:
    result = suite(pytester, live_port)
    result.assert_outcomes(passed=25, deselected=11)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "dflash: the live server runs DFLASH budget=16 window=2048: tests without a config "
            "of their own run under it (--dflash-restart=never)",
            "DFLASH budget=16 window=2048 * 25/25 (100%) *no (live)*",
        ]
    )


def test_a_config_the_live_server_does_not_run_fails_the_run_in_one_line(
    pytester: pytest.Pytester, live_port: int
) -> None:
    result = suite(pytester, live_port, "--dflash-config", "budget=8")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    url = f"http://127.0.0.1:{live_port}"
    result.stdout.fnmatch_lines(
        [
            "*coding gate CANNOT JUDGE: 25 coding test(s) selected, none ran: all skipped: "
            f"the server at {url} runs DFLASH budget=16 window=2048, not DFLASH budget=8 "
            "window=2048 (speculative_num_draft_tokens is 16, expected 8); "
            "--dflash-restart=never does not restart it: ask for its config "
            "(@pytest.mark.dflash(algorithm='DFLASH', budget=16, window=2048) or --dflash-config "
            "algorithm=DFLASH,budget=16,window=2048), or drop --dflash-restart=never so the "
            "plugin restarts it"
        ]
    )


def test_a_marker_asking_another_config_names_the_live_one(
    pytester: pytest.Pytester, live_port: int
) -> None:
    pytester.makepyfile(
        test_m="""
import pytest

def test_live(dflash_service):
    assert dflash_service.config.budget == 16

@pytest.mark.dflash(budget=16, window=1024)
def test_other(dflash_service):
    pass
"""
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-rs", "--dflash-restart=never", "--dflash-port", str(live_port),
    )  # fmt: skip
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "SKIPPED *runs DFLASH budget=16 window=2048, not DFLASH budget=16 window=1024 "
            "(speculative_draft_window_size is 2048, expected 1024)*"
        ]
    )
