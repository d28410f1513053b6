"""Figures read the same everywhere: thousands separators, units, never an exponent."""

from __future__ import annotations

import math

import pytest

from pytest_specdecode.output import figures
from pytest_specdecode.throughput import comparison as compare


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (30572.4, "30,572 tok/s"),
        (1e9, "1,000,000,000 tok/s"),
        (42.46, "42.5 tok/s"),
        (None, "-"),
        (math.nan, "-"),
        (math.inf, "-"),
        ("fast", "-"),
        (True, "-"),
    ],
)
def test_tok_s(value: object, shown: str) -> None:
    assert figures.tok_s(value) == shown


@pytest.mark.parametrize(
    ("name", "value", "shown"),
    [
        ("tok_s", 30572.4, "30,572 tok/s"),
        ("accept_length", 3.14159, "3.14"),
        ("ttft_ms_p50", 1234.56, "1,234.6 ms"),
        ("requests", 1200, "1,200"),
    ],
)
def test_metric(name: str, value: float, shown: str) -> None:
    assert figures.metric(name, value) == shown


@pytest.mark.parametrize(("value", "shown"), [(2.5, "2.5"), (1e6, "1,000,000"), (0.125, "0.125")])
def test_plain_never_uses_an_exponent(value: float, shown: str) -> None:
    assert figures.plain(value) == shown


def row(tok_s: float | None, rounds: list[float] | None = None) -> compare.CaseRow:
    info = {"intervals": {"tok_s": {"values": rounds}}} if rounds else {}
    return compare.CaseRow("k", "k", "ctx60-c1", "DFLASH", tok_s, 3.0, info)


def test_a_regression_gate_line_shows_tok_s_with_separators() -> None:
    deltas = compare.pair([row(30572.4)], [row(25000.0, [25000.0, 25100.0, 24900.0])])
    findings = compare.check(deltas, [compare.parse_fail_spec("tok_s:5%")])
    (line,) = [f.line for f in findings if f.status == "fail"]
    assert line == (
        "ctx60-c1: tok_s 30,572 tok/s -> 25,000 tok/s (-18.2%, 95% interval -19.8% to -16.6%), "
        "beyond the allowed drop tok_s:5%"
    )
    assert "e+" not in line


def test_a_vanished_figure_is_shown_as_it_was() -> None:
    deltas = compare.pair([row(30572.4)], [row(None)])
    findings = compare.check(deltas, [compare.parse_fail_spec("tok_s:5%")])
    (line,) = [f.line for f in findings if f.status == "fail"]
    assert line == "ctx60-c1: tok_s missing in the current run (was 30,572 tok/s)"


def test_tables_use_separators_too() -> None:
    table = compare.render_compare(compare.pair([row(30572.4)], [row(30572.4)]), "a", "b")
    assert "30,572" in table
    assert "30572" not in table
