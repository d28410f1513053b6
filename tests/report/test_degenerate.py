"""Degenerate output: the judgement, the one failure line, the verdict and the summary."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_specdecode.config.settings import Settings
from pytest_specdecode.report import degenerate, gates, summary, tables
from pytest_specdecode.report.model import CaseRepetition, DegenerateCase, Report
from pytest_specdecode.report.outputs import judge
from pytest_specdecode.report.results import RunResults

from .feed import B4, B8, NONE, throughput

LOOP = "Order review and the same thing, and the same thing, and the same thing"


def case(repetition: float | None, excerpt: str = "varied words", **more: Any) -> dict[str, Any]:
    return {
        "tok_s": 1000.0,
        "tpot_ms_p50": 10.0,
        "context": 60,
        "load": "c1",
        "domain": "chat",
        "repetition": repetition,
        "repetition_excerpt": excerpt,
        **more,
    }


def run(*entries: tuple[Any, str, dict[str, Any]]) -> RunResults:
    results = RunResults()
    for config, name, metrics in entries:
        throughput(results, config, name, metrics)
    return results


@pytest.mark.parametrize(
    ("figure", "baseline", "bound", "expected"),
    [
        (0.97, None, 0.5, True),  # no baseline: the bound alone
        (0.45, None, 0.5, False),
        (0.5, None, 0.5, False),  # at the bound is within it
        (0.97, 0.05, 0.5, True),
        (0.97, 0.85, 0.5, False),  # the baseline repeats as much: the domain's nature
        (0.40, 0.05, 0.5, False),  # well beyond the baseline but under the bound
        (0.40, 0.05, 0.3, True),
        (None, 0.05, 0.5, False),  # unknown judges nothing
    ],
)
def test_judge(figure: float | None, baseline: float | None, bound: float, expected: bool) -> None:
    assert degenerate.judge(figure, baseline, bound) is expected


@given(
    st.one_of(st.none(), st.floats(0, 1)),
    st.one_of(st.none(), st.floats(0, 1)),
    st.floats(0, 1),
)
def test_degenerate_means_beyond_the_bound_and_the_baseline(
    figure: float | None, baseline: float | None, bound: float
) -> None:
    if degenerate.judge(figure, baseline, bound):
        assert figure is not None
        assert figure > bound
        assert baseline is None or figure - baseline > degenerate.MARGIN


def test_the_failure_line_names_config_domain_both_figures_and_an_excerpt() -> None:
    results = run(
        (NONE, "ctx60-c1-chat", case(0.02)),
        (NONE, "ctx60-c8-chat", case(0.04, load="c8")),
        (B8, "ctx60-c1-chat", case(0.97, LOOP)),
        (B8, "ctx60-c8-chat", case(0.99, LOOP, load="c8")),
        (B4, "ctx60-c1-chat", case(0.03)),
    )
    lines = gates.evaluate(Settings(), results, [])
    # One line per config and domain: its worst case, with the baseline's figure beside.
    assert lines == [
        "degenerate output: DFLASH budget=8 window=2048 on chat: repetition 0.99 vs 0.04 for "
        "the baseline NONE (bound 0.5, margin 0.2) in ctx60-c8-chat; output starts "
        "'Order review and the same thing, and the same thing, and the'..."
    ]
    assert gates.exit_status(0, Settings(), results, lines) == 1


def test_without_a_baseline_the_bound_decides() -> None:
    results = run((B8, "ctx60-c1-chat", case(0.6, LOOP)))
    (line,) = gates.evaluate(Settings(), results, [])
    assert "repetition 0.60 > bound 0.5 (no NONE baseline in this run)" in line
    assert gates.evaluate(Settings(max_repetition=0.7), results, []) == []


@given(st.text(max_size=200))
def test_the_excerpt_is_escaped_into_one_printable_line(text: str) -> None:
    results = run((B8, "ctx60-c1-chat", case(0.97, text)))
    (line,) = gates.evaluate(Settings(), results, [])
    assert line.isprintable()  # no ANSI escape, line break or bidi override acts
    assert len(line) < 400


def test_ansi_escapes_are_written_out() -> None:
    results = run((B8, "ctx60-c1-chat", case(0.97, "\x1b[2J\x1b]52;c;aGk=\x07and\nand")))
    (line,) = gates.evaluate(Settings(), results, [])
    assert "\\x1b[2J" in line
    assert "\\x07" in line
    assert "\\n" in line
    assert "\x1b" not in line


def test_a_degenerate_config_is_infeasible_and_never_the_verdict() -> None:
    results = run(
        (NONE, "ctx60-c1-chat", case(0.02, tpot_ms_p50=20.0)),
        (B8, "ctx60-c1-chat", case(0.97, LOOP, tpot_ms_p50=2.0)),
        (B4, "ctx60-c1-chat", case(0.03, tpot_ms_p50=8.0)),
    )
    settings = Settings()
    excluded = gates.config_failures(settings, results)
    assert excluded["DFLASH budget=8 window=2048"] == [
        "degenerate output on chat (repetition 0.97)"
    ]
    assert excluded["DFLASH budget=4 window=2048"] == []
    assert degenerate.infeasible(results, settings.max_repetition) == {
        "DFLASH budget=8 window=2048": ["degenerate output on chat (repetition 0.97)"]
    }
    report = Report.from_dict(results.to_json())
    judge(report, settings.max_repetition, excluded=excluded)
    found = report.verdict
    assert found is not None
    # The fastest config by far, but its output collapsed: budget=4 wins.
    assert [g.best for g in found.groups] == ["DFLASH budget=4 window=2048"]
    assert "DFLASH budget=8 window=2048" in [e.config for e in found.excluded]
    assert report.repetition is not None
    assert report.repetition.degenerate == [
        DegenerateCase(
            config="DFLASH budget=8 window=2048",
            case="ctx60-c1-chat",
            domain="chat",
            repetition=0.97,
            baseline=0.02,
            baseline_config="NONE",
            excerpt=degenerate.escaped(LOOP),
        )
    ]
    b8 = next(c for c in report.configs if c.label == "DFLASH budget=8 window=2048")
    assert b8.throughput[0].repetition == CaseRepetition(
        value=0.97, baseline=0.02, baseline_config="NONE", degenerate=True
    )
    none = next(c for c in report.configs if c.label == "NONE")
    assert none.throughput[0].repetition is None, "the baseline is the reference"
    header, rows = tables.repetition(report)
    assert header == ["config", "domain", "repetition", "baseline", "output"]
    assert ["budget=8", "chat", "0.97", "0.02", "DEGENERATE"] in rows
    assert ["budget=4", "chat", "0.03", "0.02", "ok"] in rows
    assert ["NONE", "chat", "0.02", "-", "baseline"] in rows
    lines = summary.render(report)
    assert any("not eligible: DFLASH budget=8 window=2048: degenerate output" in x for x in lines)


def test_no_figure_no_judgement() -> None:
    # A report from before the figure existed, or replies too short to say.
    results = run((NONE, "ctx60-c1-chat", case(None)), (B8, "ctx60-c1-chat", case(None)))
    assert gates.evaluate(Settings(), results, []) == []
    report = Report.from_dict(results.to_json())
    judge(report, 0.5)
    assert tables.repetition(report)[1] == []
    assert report.repetition is not None
    assert report.repetition.degenerate == []
