"""Acceptance: several samples per problem and pass@k, through the plugin.

The simulator answers a sampled request (temperature > 0) with the n-th of a
seeded series of answers, right with probability ``--sim-quality``; greedy
requests always get the same answer.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

import pytest

from ..report.markdown_tables import render

PROBLEMS = "fib or gcd"

TESTS = """
import pytest

@pytest.mark.coding
def test_coding(dflash_problem, dflash_coding):
    dflash_coding.check(dflash_problem)
"""


@pytest.fixture
def project(
    pytester: pytest.Pytester, sim_project: Callable[[pytest.Pytester, str], None]
) -> pytest.Pytester:
    sim_project(pytester, "--sim-quality 0.6")
    pytester.makepyfile(test_samples=TESTS)
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-k", PROBLEMS, *args)
    assert "INTERNALERROR" not in result.stdout.str()
    (config,) = json.loads((pytester.path / "report.json").read_text())["configs"]
    return result, config


def unbiased_pass_at_k(n: int, c: int, k: int) -> float:
    """pass@k = 1 - C(n-c, k) / C(n, k) (Chen et al. 2021), with exact integers."""
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def summary_row(result: pytest.RunResult, label: str) -> list[str]:
    """The config's row of the dflash summary table, split into its columns."""
    lines = result.stdout.lines
    start = lines.index(next(line for line in lines if "dflash summary" in line))
    row = next(line for line in lines[start:] if line.startswith(label + "  "))
    return re.split(r"\s{2,}", row)


@pytest.mark.slow
@pytest.mark.parametrize("samples", [4, 5])
def test_samples_give_pass_at_k_consistent_with_the_counts(
    project: pytest.Pytester, samples: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(project.path / "summary.md"))
    result, config = run(project, f"--dflash-samples={samples}", "--dflash-temperature=0.8", "-v")
    coding = {c["problem"]: c for c in config["coding"]}
    assert sorted(coding) == ["fib", "gcd"]
    assert {c["samples"] for c in coding.values()} == {samples}
    # Sampling really varies the answers: some problem is right only sometimes.
    assert any(0 < c["correct"] < samples for c in coding.values()), coding
    outcomes = result.parseoutcomes()
    all_right = [p for p, c in coding.items() if c["correct"] == samples]
    assert outcomes.get("passed", 0) == len(all_right)
    for problem, c in coding.items():
        assert c["passed"] == (problem in all_right)
        if problem not in all_right:
            result.stdout.fnmatch_lines(
                [
                    f"{problem} under DFLASH: *({c['correct']}/{samples} samples passed); "
                    "the reply starts: *"
                ]
            )

    ks = [k for k in (1, 5, 10) if k <= samples]
    passk = {p["k"]: p["value"] for p in config["pass_at_k"]}
    assert sorted(passk) == ks
    for k in ks:
        expected = sum(unbiased_pass_at_k(samples, c["correct"], k) for c in coding.values()) / 2
        assert passk[k] == pytest.approx(expected)
    assert config["pass_rate"]["rate"] == pytest.approx(passk[1])

    row = summary_row(result, "DFLASH")
    header = summary_row(result, "config")
    cells = dict(zip(header, row, strict=True))
    assert [cells[f"pass@{k}"] for k in ks] == [f"{passk[k]:.2f}" for k in ks]
    assert "pass@10" not in cells

    _, tables = render((project.path / "summary.md").read_text())
    header, md_row = tables[0]
    md = dict(zip(header, md_row, strict=True))
    for k in ks:
        assert md[f"pass@{k}"] == f"{passk[k]:.2f}"
    assert "pass@10" not in md
    right = sum(c["correct"] for c in coding.values())
    assert md["pass rate"] == f"{right}/{2 * samples} samples ({config['pass_rate']['rate']:.0%})"
    assert pass_rate_cell_agrees(md["pass rate"], config["pass_rate"]["rate"])


def pass_rate_cell_agrees(cell: str, rate: float) -> bool:
    """A pass-rate cell shows ``rate``, and any ``a/b`` fraction in it equals it."""
    fraction = re.match(r"(\d+)/(\d+)\b", cell)
    agrees = fraction is None or abs(int(fraction[1]) / int(fraction[2]) - rate) < 0.005
    return f"{rate:.0%}" in cell and agrees


def test_summary_pass_rate_cell_agrees_with_itself_with_samples() -> None:
    from pytest_specdecode.report import summary
    from pytest_specdecode.report.model import Report

    # The shape of a --dflash-samples 4 run's report (see the test above).
    coding = [
        {"problem": "fib", "passed": False, "status": "failed", "reason": "x",
         "samples": 4, "correct": 2},
        {"problem": "gcd", "passed": False, "status": "failed", "reason": "x",
         "samples": 4, "correct": 3},
    ]  # fmt: skip
    report = {
        "configs": [
            {
                "label": "DFLASH",
                "config": {"algorithm": "DFLASH"},
                "service": {"ready_seconds": 1.0, "restarted": True},
                "pass_rate": {"rate": 0.625, "passed": 0, "total": 2},
                "pass_at_k": [{"k": 1, "value": 0.625}],
                "coding": coding,
                "throughput": [],
            }
        ]
    }
    lines = summary.render(Report.from_dict(report))
    header = re.split(r"\s{2,}", next(line for line in lines if line.startswith("config")))
    row = re.split(r"\s{2,}", next(line for line in lines if line.startswith("DFLASH")))
    cell = dict(zip(header, row, strict=True))["pass rate"]
    assert pass_rate_cell_agrees(cell, 0.625), cell


def test_samples_at_temperature_zero_is_a_usage_error(project: pytest.Pytester) -> None:
    """Every sample would be the same greedy answer: N times the work, no pass@k."""
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "--dflash-samples=4")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--dflash-samples 4 needs --dflash-temperature > 0*"])
