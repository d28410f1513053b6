"""Acceptance: a run against the simulator writes one self-contained HTML page, and
headless Chromium, with the network off, renders it without a console error."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_specdecode.report import cli

from ..report.chromium import errors_box, layout, loaded_sources, parse, render
from ..report.test_html import old_report

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
MAX_BYTES = 8 * 1024 * 1024


def check_in_browser(page: Path, tmp_path: Path, labels: list[str], *, charts: int) -> str:
    shown = render(page, tmp_path)
    assert shown.console == [], shown.console
    assert errors_box(shown.dom) == "", "the page recorded a script error"
    dom = parse(shown.dom)
    assert dom.classes.get("js-plotly-plot", 0) >= charts, dom.classes.get("js-plotly-plot")
    assert "simulated" in dom.text.lower()
    for label in labels:
        assert label in dom.text, label
    # The screenshot stays in tmp_path (never in git); a person looks at it when in doubt.
    assert shown.screenshot.stat().st_size > 10_000
    return shown.dom


@pytest.mark.slow
def test_a_run_writes_a_page_that_renders_offline(
    pytester: pytest.Pytester,
    sim_project: Callable[[pytest.Pytester, str], None],
    tmp_path: Path,
) -> None:
    (pytester.path / "answers.json").write_text(json.dumps(WRONG_GCD))
    sim_project(pytester, "--sim-answers answers.json --sim-time-scale 0.02")
    pytester.makepyfile(test_run=TESTS)
    result = pytester.runpytest(
        "-p",
        "no:cacheprovider",
        "-k",
        "gcd or fib or throughput",
        "--dflash-sweep=algorithm=NONE,DFLASH;budget=4,8",
        "--dflash-contexts=60",
        "--dflash-concurrency=1,4",
        "--dflash-output-tokens=32",
        "--dflash-rounds=3",
        "--dflash-html=out/run.html",
    )
    page = pytester.path / "out/run.html"
    result.stdout.fnmatch_lines([f"dflash html report: {page} (* MB)"])
    report = json.loads((pytester.path / "report.json").read_text())
    labels = [c["label"] for c in report["configs"]]
    assert len(labels) == 3
    assert report["verdict"]["groups"]
    text = page.read_text()
    assert loaded_sources(text) == []
    assert page.stat().st_size <= MAX_BYTES

    dom = check_in_browser(page, tmp_path, labels, charts=4)
    found = parse(dom)
    assert "verdict-table" in found.ids
    assert "failures-table" in found.ids
    assert "gcd" in found.text

    # At 800 px: the answer first, nothing wider than the window.
    narrow = tmp_path / "narrow"
    narrow.mkdir()
    shown = layout(page, narrow, width=800)
    assert shown.rendered.console == [], shown.rendered.console
    assert shown.first_section == "answer"
    assert shown.overflowing == [], shown.overflowing
    assert shown.viewport == 800 >= shown.page

    # The command line makes the same page from the saved report.
    again = pytester.path / "again.html"
    assert cli.main(["report", "--html", str(again), str(pytester.path / "report.json")]) == 0
    assert again.read_text() == text


@pytest.mark.slow
def test_an_old_report_renders_offline(tmp_path: Path) -> None:
    saved = tmp_path / "old.json"
    saved.write_text(json.dumps(old_report()))
    page = tmp_path / "old.html"
    assert cli.main(["report", "--html", str(page), str(saved)]) == 0
    check_in_browser(page, tmp_path, ["NONE", "DFLASH budget=8"], charts=2)


def test_the_browser_check_sees_a_console_error_and_a_script_error(tmp_path: Path) -> None:
    from pytest_specdecode.report import html
    from pytest_specdecode.report.model import Report
    from pytest_specdecode.report.upgrade import upgrade

    page = tmp_path / "bad.html"
    text = html.render(
        Report.from_dict(upgrade(old_report())), js="console.error('drawn badly'); notAFunction();"
    )
    page.write_text(text)
    shown = render(page, tmp_path)
    assert any("drawn badly" in line for line in shown.console), shown.console
    assert any("Uncaught ReferenceError: notAFunction" in line for line in shown.console)
    box = errors_box(shown.dom)
    assert "console.error: drawn badly" in box
    assert "notAFunction" in box
