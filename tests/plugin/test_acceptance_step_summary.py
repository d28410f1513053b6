"""Acceptance: a plugin run under GitHub Actions appends a Markdown summary whose
tables render (parsed with markdown-it-py, as GFM tables)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

markdown_it = pytest.importorskip("markdown_it", reason="dev dependency markdown-it-py")

from ..report.markdown_tables import render  # noqa: E402

WRONG_GCD = [
    {
        "match": "`gcd(",
        "response": "```python\ndef gcd(a, b):\n    return max(a, b) % (min(a, b) or 1)\n```\n",
    }
]

TESTS = """
import pytest

@pytest.mark.coding
def test_coding(dflash_problem, dflash_coding):
    dflash_coding.check(dflash_problem)

@pytest.mark.throughput
def test_throughput(dflash_case, dflash_throughput, benchmark):
    dflash_throughput.run(dflash_case, benchmark)
"""


def test_step_summary_is_appended_and_its_tables_render(
    pytester: pytest.Pytester,
    sim_project: Callable[[pytest.Pytester, str], None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (pytester.path / "answers.json").write_text(json.dumps(WRONG_GCD))
    sim_project(pytester, "--sim-answers answers.json")
    pytester.makepyfile(test_ci=TESTS)
    summary = pytester.path / "step-summary.md"
    summary.write_text("## an earlier step\n\nits own text\n\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))

    result = pytester.runpytest(
        "-p",
        "no:cacheprovider",
        "-k",
        "gcd or fib or throughput",
        "--dflash-sweep=budget=4,8",
        "--dflash-contexts=60",
        "--dflash-concurrency=1",
        "--dflash-output-tokens=32",
        "--dflash-rounds=1",
        "--dflash-min-pass-rate=0.9",
    )

    result.assert_outcomes(passed=4, failed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["dflash: summary appended to GITHUB_STEP_SUMMARY"])
    text = summary.read_text()
    assert text.startswith("## an earlier step\n\nits own text\n\n## pytest-specdecode run\n")
    html, tables = render(text)
    assert html.count("<table>") == 6

    configs, phases, throughput, acceptance, repetition, verdict = tables
    assert phases[0][0] == "config"
    assert sorted(r[0] for r in phases[1:]) == ["DFLASH budget=4", "DFLASH budget=8"]
    header = configs[0]
    assert header[:3] == ["config", "ready", "pass rate"]
    assert "accept length" in header
    rows = {row[0]: dict(zip(header, row, strict=True)) for row in configs[1:]}
    labels = ["DFLASH budget=4", "DFLASH budget=8"]
    assert sorted(rows) == labels
    for label in labels:
        assert rows[label]["pass rate"] == "1/2 (50%)"
        assert rows[label]["ready"].endswith(" s")
        assert float(rows[label]["accept length"]) > 1.0

    assert throughput[0] == ["case", "config", "tok/s", "TPOT ms", "accept", "speedup",
                             "tok/s ratio"]  # fmt: skip
    assert [row[:2] for row in throughput[1:]] == [
        ["ctx60-c1-t32-chat", "budget=4"], ["ctx60-c1-t32-chat", "budget=8"]
    ]  # fmt: skip
    for _, _, tok_s, _, accept, speedup, _ in throughput[1:]:
        assert float(tok_s.replace(",", "")) > 0  # with thousands separators, e.g. '6,102'
        assert float(accept) > 1.0
        assert speedup == "-", "no baseline in this run: no speedup invented"
    assert "no speedup: this run has no non-speculative baseline" in html
    assert [row[:2] for row in acceptance[1:]] == [["budget=4", "chat"], ["budget=8", "chat"]]
    assert repetition[0] == ["config", "domain", "repetition", "baseline", "output"]
    assert [(row[0], row[4]) for row in repetition[1:]] == [("budget=4", "ok"), ("budget=8", "ok")]
    assert verdict[0][3] == "tok/s", "without a baseline the verdict ranks by tok/s"
    # Both configs failed the pass-rate gate: neither is chosen, none is on a Pareto front.
    assert [row[:3] for row in verdict[1:]] == [["c1", "chat", "none passed every gate"]]
    assert "<li>not eligible: DFLASH budget=4: pass rate 50% &lt; 90%</li>" in html
    assert "Pareto front" not in html

    # The failed gates and the coding failures render as list items, not raw text.
    assert (
        "<li>pass rate: DFLASH budget=4: 1/2 = 50% &lt; 90% "
        "(95% interval 9%-91%, within noise of the floor)</li>" in html
    )
    assert "gcd under DFLASH budget=8: failed: gcd(" in html
    assert "simulated (not GPU)" in html
