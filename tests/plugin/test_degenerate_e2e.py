"""Fast garbage: a drafter whose output collapsed fails the run, however fast it was."""

from __future__ import annotations

import json

import pytest

THROUGHPUT = """
import pytest

@pytest.mark.throughput
@pytest.mark.dflash(algorithm=["NONE", "DFLASH"], budget=8, window=2048)
def test_throughput(dflash_case, dflash_throughput, benchmark):
    dflash_throughput.run(dflash_case, benchmark)
"""
SMALL = (
    "-p",
    "no:cacheprovider",
    "--dflash-contexts=60",
    "--dflash-concurrency=2",
    "--dflash-output-tokens=96",
    "--dflash-rounds=1",
    "--dflash-domains=code,chat",
)


@pytest.fixture
def project(sim_ini: pytest.Pytester) -> pytest.Pytester:
    sim_ini.makepyfile(test_tp=THROUGHPUT)
    return sim_ini


def test_a_degenerate_drafter_fails_the_run_in_one_line_per_domain(
    project: pytest.Pytester,
) -> None:
    result = project.runpytest(
        *SMALL, "--dflash-sim-fault", "degenerate-drafter", "--benchmark-json=bench.json"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.assert_outcomes(passed=4)  # the measurements themselves all ran
    out = result.stdout.str()
    failed = [line for line in out.splitlines() if "degenerate output:" in line]
    # The gate list and the report: one line per domain of the speculative config only.
    lines = json.loads((project.path / "report.json").read_text())["gates"]["failed"]
    assert len(lines) == 2, lines
    for line, domain in zip(lines, ("code", "chat"), strict=True):
        assert line.startswith(f"degenerate output: DFLASH budget=8 window=2048 on {domain}: ")
        assert "for the baseline NONE" in line
        assert "output starts '" in line
        assert any(line in shown for shown in failed)
    assert "NONE on" not in out
    # The summary flags it, and the verdict keeps it out: NONE is the best left.
    result.stdout.fnmatch_lines(
        [
            "output repetition per config and domain*",
            "config*domain*repetition*baseline*output",
            "NONE*code*baseline",
            "*code*DEGENERATE",
        ]
    )
    result.stdout.fnmatch_lines(["*not eligible: DFLASH budget=8 window=2048: degenerate output*"])
    report = json.loads((project.path / "report.json").read_text())
    for group in report["verdict"]["groups"]:
        # NONE is the best left wherever its own figures were judged: on a loaded machine
        # a fast round can arrive in one read (TPOT 0) and leave that group unranked.
        unranked = {u["config"] for u in group["unranked"]}
        assert group["best"] == (None if "NONE" in unranked else "NONE"), group
    records = [
        case["repetition"]
        for config in report["configs"]
        if config["config"]["algorithm"] == "DFLASH"
        for case in config["throughput"]
    ]
    assert records
    assert all(r["degenerate"] for r in records)
    assert all(r["value"] > 0.5 and r["baseline"] < r["value"] - 0.2 for r in records)
    # The figure and the baseline's (measured first, in this process) in extra_info too.
    benches = json.loads((project.path / "bench.json").read_text())["benchmarks"]
    spec = [b["extra_info"] for b in benches if b["extra_info"]["algorithm"] == "DFLASH"]
    assert len(spec) == 2
    for info in spec:
        assert info["repetition"] > 0.5
        assert info["repetition_baseline"] < 0.3
    # ...while the drafter looked perfect: accept length near the block size.
    dflash = next(c for c in report["configs"] if c["config"]["algorithm"] == "DFLASH")
    assert dflash["accept_length"] > 7


def test_without_the_fault_the_same_run_passes_unflagged(project: pytest.Pytester) -> None:
    result = project.runpytest(*SMALL)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(passed=4)
    out = result.stdout.str()
    assert "degenerate" not in out
    assert "DEGENERATE" not in out
    result.stdout.fnmatch_lines(["output repetition per config and domain*", "*code*ok"])
    saved = json.loads((project.path / "report.json").read_text())
    assert saved["repetition"]["degenerate"] == []
    assert saved["gates"]["failed"] == []


def test_a_budget_8_run_alone_is_judged_by_the_bound(sim_ini: pytest.Pytester) -> None:
    """No NONE baseline in the run: the bound (--dflash-max-repetition) decides."""
    sim_ini.makepyfile(
        test_tp=THROUGHPUT.replace('algorithm=["NONE", "DFLASH"], budget=8', "budget=8")
    )
    args = (*SMALL, "--dflash-domains=chat", "--dflash-sim-fault", "degenerate-drafter")
    result = sim_ini.runpytest(*args)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*repetition gate FAILED: degenerate output: DFLASH budget=8 window=2048 on chat: "
            "repetition 0.* > bound 0.5 (no NONE baseline in this run)*output starts '*"
        ]
    )
    # A bound above the figure lets it through.
    relaxed = sim_ini.runpytest(*args, "--dflash-max-repetition", "100%")
    assert relaxed.ret == pytest.ExitCode.OK, relaxed.stdout.str()


@pytest.mark.parametrize("shape", ["cjk", "letter", "newlines"])
def test_a_collapse_into_one_unspaced_token_fails_the_run_with_its_figure(
    project: pytest.Pytester, shape: str
) -> None:
    """One CJK character, one letter or only line breaks: a single "word" or none, so the
    figure is taken over characters, shown, and the run fails."""
    result = project.runpytest(
        *SMALL, "--dflash-domains=chat", "--dflash-sim-fault", f"degenerate-drafter:{shape}"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*degenerate output: DFLASH budget=8 window=2048 on chat: repetition 0.* vs 0.* "
            "for the baseline NONE*output starts '*"
        ]
    )
    report = json.loads((project.path / "report.json").read_text())
    (record,) = [
        case["repetition"]
        for config in report["configs"]
        if config["config"]["algorithm"] == "DFLASH"
        for case in config["throughput"]
    ]
    assert record["degenerate"]
    assert record["value"] > 0.5
