"""The plugin's fixtures and its hook explain themselves in ``pytest --fixtures``."""

from __future__ import annotations

import pytest


def test_fixtures_lists_dflash_problem_and_case_with_their_docs(
    pytester: pytest.Pytester,
) -> None:
    result = pytester.runpytest("--fixtures", "-v", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(
        [
            "dflash_problem -- *pytest_specdecode*plugin.py:*",
            "    One coding problem; a test using it runs once per problem*",
            "*pytest_dflash_problems(config)*",
        ],
        consecutive=False,
    )
    result.stdout.fnmatch_lines(
        [
            "dflash_case -- *pytest_specdecode*plugin.py:*",
            "    One throughput case; a test using it runs once per case*",
            "*dflash_throughput.run(dflash_case, benchmark)*",
        ]
    )
    for name in ("dflash_config", "dflash_service", "dflash_client", "dflash_coding"):
        result.stdout.fnmatch_lines([f"{name} *-- *plugin.py:*", "    [A-Z]*"])


def test_a_test_using_dflash_problem_runs_once_per_problem(pytester: pytest.Pytester) -> None:
    # The fixture exists for its docs; the session's parametrization still wins.
    pytester.makepyfile("def test_names(dflash_problem):\n    assert dflash_problem.name\n")
    result = pytester.runpytest("--collect-only", "-q", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*test_names[[]is_palindrome[]]*", "*test_names[[]gcd[]]*"])
