"""The page and the verdict in linear time, shown by the work they do, not by a clock.

The work is counted as the Python and C function calls a profile hook sees
while a report is judged (speedups, degenerate output, break-even, verdict
with its Pareto front) and its page rendered. For work ``a + b*n`` the
increase from 2n to 4n configs is twice the increase from n to 2n; a
quadratic part (a scan of every config per config) makes it four times.
The wall-clock requirement (3,000 configs in under 10 s) is
``benchmarks/html_scale.py``'s.
"""

from __future__ import annotations

import re
import sys
from types import FrameType
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_specdecode.report import html, html_sections, outputs, verdict
from pytest_specdecode.report.model import ParetoPoint, Report, VerdictMember

from .conftest import config_dict, config_entry, make_report, typed

FAKE_JS = "window.Plotly = {newPlot: function () {}};"


def sweep(configs: int) -> dict[str, Any]:
    entries = [config_entry(config_dict("NONE"), problems=2, failing=1)]
    entries += [
        config_entry(
            config_dict("DFLASH", 2 + i % 10, 256 * (1 + i // 10)), problems=2, failing=i % 2
        )
        for i in range(configs - 1)
    ]
    # One gate line per config, as a run's pass-rate gate writes them: each card finds its own.
    labels = [str(e["label"]) for e in entries]
    gates = {
        "summary": [f"pass rate gate passed: {label}: 1/2 >= 0.5" for label in labels],
        "failed": [f"accept length: {label}: 1.0 < 1.5" for label in labels[::7]],
    }
    return make_report(entries, gates=gates)


def judge(report: dict[str, Any]) -> Report:
    """The sweep judged as RunOutputs judges it, then the typed report a page takes."""
    found = typed(report)
    outputs.judge(found, 0.5)
    return found


def judge_and_render(report: dict[str, Any]) -> str:
    return html.render(judge(report), js=FAKE_JS)


def calls(configs: int) -> int:
    """Function calls made judging and rendering a sweep of ``configs`` configs."""
    report = sweep(configs)
    count = 0

    def hook(frame: FrameType, event: str, arg: object) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(hook)
    try:
        judge_and_render(report)
    finally:
        sys.setprofile(None)
    return count


@pytest.mark.slow
def test_the_work_grows_linearly_with_the_configs() -> None:
    judge_and_render(sweep(3))  # imports and caches outside the count
    small, middle, large = calls(50), calls(100), calls(200)
    # Linear: 2.0. Before, a per-trace recount of the short labels and an all-pairs
    # Pareto front made it 2.7 at these sizes (and more as they grow), and matching
    # every gate line against every config's label in each card more still.
    assert (large - middle) / (middle - small) < 2.2, (small, middle, large)


class CountedMember(VerdictMember):
    """A verdict member that counts how often the page reads one of its fields."""

    reads = 0

    def __getattribute__(self, name: str) -> Any:
        if not name.startswith("__"):
            CountedMember.reads += 1
        return super().__getattribute__(name)


def member_reads(configs: int) -> int:
    """How often rendering the page of a judged sweep reads a verdict member."""
    report = judge(sweep(configs))
    assert report.verdict is not None
    for group in report.verdict.groups:
        group.members = [CountedMember(**msgspec.structs.asdict(m)) for m in group.members]
    CountedMember.reads = 0
    html.render(report, js=FAKE_JS)
    return CountedMember.reads


def test_the_page_reads_each_verdict_member_a_bounded_number_of_times() -> None:
    # Every config is a member of every group here (3 per config): a card that scans all
    # members for its own reads 3n per card, 3n^2 in all (the increase ratio 4, not 2).
    small, middle, large = member_reads(50), member_reads(100), member_reads(200)
    assert small > 0
    assert (large - middle) / (middle - small) < 2.2, (small, middle, large)


def _front_by_all_pairs(points: list[dict[str, Any]]) -> list[bool]:
    eligible = [p for p in points if p["eligible"]]
    return [
        p["eligible"]
        and not any(
            q is not p
            and q["req_tok_s"] >= p["req_tok_s"]
            and q["tok_s"] >= p["tok_s"]
            and (q["req_tok_s"] > p["req_tok_s"] or q["tok_s"] > p["tok_s"])
            for q in eligible
        )
        for p in points
    ]


# Few distinct values, so ties on either axis and repeated points are common.
AXIS = st.sampled_from([0.0, 1.0, 2.5, 3.0, 10.0, 1e9])
POINTS = st.lists(
    st.fixed_dictionaries({"req_tok_s": AXIS, "tok_s": AXIS, "eligible": st.booleans()}),
    max_size=30,
)


@given(POINTS)
def test_the_front_by_a_sort_is_the_front_by_definition(points: list[dict[str, Any]]) -> None:
    expected = _front_by_all_pairs(points)
    typed_points = [ParetoPoint(config="", load="", **p) for p in points]
    verdict.mark_front(typed_points)
    assert [p.front for p in typed_points] == expected


# Labels and lines over a small alphabet with spaces, other whitespace and colons, so
# labels inside labels, labels ending in a colon and repeated names are common.
TEXT = st.text(alphabet="ab :\t\u00a0=", max_size=12)


@given(st.lists(TEXT, max_size=6), st.lists(TEXT, max_size=6))
def test_the_gate_lines_by_index_are_the_lines_naming_each_label(
    lines: list[str], labels: list[str]
) -> None:
    def names(line: str, label: str) -> bool:
        return bool(re.search(rf"(^|\s){re.escape(label)}:", line))

    expected = {
        label: [line for line in lines if names(line, label)]
        for label in labels
        if any(names(line, label) for line in lines)
    }
    assert html_sections.named_in(lines, labels) == expected
