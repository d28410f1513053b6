"""The sweep's tables read one histogram sum: the acceptance table and the histogram chart agree."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pytest_specdecode.report import tables
from pytest_specdecode.report.model import Report

from .conftest import typed

# The typed report holds only ints as counts (a bool, a float or text does not read), and a
# case may have no histogram at all: zero counts, empty and missing histograms stand in for
# the hostile counts a dict could hold.
COUNTS = st.integers(0, 50)
HISTOGRAMS = st.one_of(st.none(), st.lists(COUNTS, max_size=12))
LABEL = "DFLASH budget=8"


def report(histograms: list[list[int] | None]) -> Report:
    cases = [
        {
            "case": f"ctx1024-c{i + 1}-chat",
            "metrics": {
                "accept_histogram": h,
                "context": 1024,
                "load": f"c{i + 1}",
                "domain": "chat",
            },
        }
        for i, h in enumerate(histograms)
    ]
    data: dict[str, Any] = {
        "configs": [{"label": LABEL, "config": {"algorithm": "DFLASH"}, "throughput": cases}]
    }
    return typed(data)


@given(st.lists(HISTOGRAMS, min_size=1, max_size=4))
def test_acceptance_rates_are_those_of_the_summed_histogram(
    histograms: list[list[int] | None],
) -> None:
    data = report(histograms)
    _, rows = tables.acceptance(data)
    summed = tables.accept_histograms(data).get("chat", {}).get(LABEL, [])
    drafts = sum(summed)
    if not drafts:  # no speculation counted: the table has no row for it
        assert rows == []
        return
    rates = [f"{sum(summed[i:]) / drafts:.2f}" for i in range(1, len(summed))]
    (row,) = rows
    assert row[:2] == [LABEL, "chat"]
    assert row[4:] == rates[: tables.MAX_POSITIONS]
