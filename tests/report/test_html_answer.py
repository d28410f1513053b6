"""The top of the HTML page: the answer (the verdict per load and domain and the speculation
policy per concurrency band, never a config shown as the choice without saying that no test
checked it), then the config x load matrix with every case in its cell."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_specdecode.output import figures
from pytest_specdecode.report import html, html_answer, html_sections, matrix, policy, tables
from pytest_specdecode.report.verdict import case_shape

from .conftest import judged, sweep_report, typed
from .test_policy import LABELS, sweeps
from .test_policy import report as policy_report

FAKE_JS = "window.Plotly = {newPlot: function () {}};"


def table_cells(text: str, ident: str) -> list[list[str]]:
    body = re.search(rf'<table id="{re.escape(ident)}">(.*?)</table>', text, re.DOTALL)
    assert body is not None, ident
    rows = re.findall(r"<tr>(.*?)</tr>", body[1].split("<tbody>")[1])
    return [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in rows]


def with_coding(report: dict[str, Any], checked: set[str]) -> dict[str, Any]:
    """Coding results (all passed) for the configs in ``checked``, none for the others."""
    for config in report["configs"]:
        if config["label"] in checked:
            config["coding"] = [{"problem": "gcd", "passed": True, "status": "passed"}]
            config["pass_rate"] = {"rate": 1.0, "passed": 1, "total": 1}
        else:
            config["coding"], config["pass_rate"] = [], None
    return report


@settings(max_examples=60, deadline=None)
@given(figures_=sweeps, checked=st.sets(st.sampled_from(LABELS)))
def test_the_policy_never_shows_an_unchecked_config_without_saying_so(
    figures_: Mapping[tuple[str, int, str], tuple[float, float, float] | None],
    checked: set[str],
) -> None:
    report = typed(with_coding(policy_report(figures_), checked))
    found = policy.build(report)
    assert found is not None
    rows = html_answer.policy_rows(report, found)
    assert len(rows) == len(found["bands"])
    for row, band in zip(rows, found["bands"], strict=True):
        label = band["label"]
        unchecked = label != "NONE" and label not in checked
        assert row[1].endswith(html_answer.NOT_CHECKED) == unchecked, (row, checked)
        assert ("not checked (no coding" in row[4]) == unchecked
        if label in checked:
            assert row[4].startswith("pass rate 1/1")
    text = html.render(report, js=FAKE_JS)
    assert table_cells(text, "policy-table") == [
        [html_sections.esc(c) for c in row] for row in rows
    ]


def test_the_answer_holds_the_verdict_and_the_policy_and_names_the_unchecked() -> None:
    report = judged(with_coding(sweep_report(), {"NONE", "DFLASH budget=8 window=2048"}))
    text = html.render(report, js=FAKE_JS)
    answer = text.split('<section id="answer">')[1].split("</section>")[0]
    verdict_rows = table_cells(answer, "verdict-table")
    assert verdict_rows == [[html_sections.esc(c) for c in r] for r in tables.verdict(report)[1]]
    policy_rows = table_cells(answer, "policy-table")
    assert policy_rows, "the sweep has a NONE baseline and concurrency cases: a policy"
    short = tables.short_labels(report.configs)
    named_unchecked = 0
    for row in [*verdict_rows, *policy_rows]:
        named = row[2] if row in verdict_rows else row[1]
        for label, name in short.items():
            if label in ("NONE", "DFLASH budget=8 window=2048"):
                continue
            # Each unchecked config it names says so, right after its name.
            for at in [m.end() for m in re.finditer(re.escape(name) + r"\b", named)]:
                assert named[at:].startswith(" (correctness not checked)"), (named, name)
                named_unchecked += 1
    assert named_unchecked, "the sweep's answer names an unchecked config somewhere"


def test_without_a_baseline_the_answer_says_why_there_is_no_policy() -> None:
    report = sweep_report()
    report["configs"] = report["configs"][1:]
    text = html.render(judged(report), js=FAKE_JS)
    answer = text.split('<section id="answer">')[1].split("</section>")[0]
    assert "No policy: it needs a NONE baseline" in answer
    assert 'id="verdict-table"' in answer


# --- the matrix ------------------------------------------------------------------------

CONTEXTS = (60, 1024)
LOADS = ("c1", "c8", "c32")
DOMAINS = ("code", "chat", "math")


def case_of(context: int, load: str, domain: str, tok_s: float, speedup: float | None) -> Any:
    metrics = {"context": context, "load": load, "domain": domain, "tok_s": tok_s,
               "ttft_ms_p99": tok_s / 10, "itl_ms_p99": tok_s / 100}  # fmt: skip
    found: dict[str, Any] = {"case": f"ctx{context}-{load}-t64-{domain}", "metrics": metrics}
    if speedup is not None:
        found["speedup"] = {"tpot": {"value": speedup, "low": speedup * 0.9, "high": speedup}}
    return found


shapes = st.sets(
    st.tuples(st.sampled_from(CONTEXTS), st.sampled_from(LOADS), st.sampled_from(DOMAINS)),
    min_size=1,
)


@st.composite
def matrix_reports(draw: st.DrawFn) -> dict[str, Any]:
    configs = []
    budgets = draw(st.lists(st.sampled_from([None, 4, 8, 16]), min_size=1, max_size=4, unique=True))
    for budget in budgets:
        algorithm = "NONE" if budget is None else "DFLASH"
        cases = [
            case_of(*shape, draw(st.floats(1, 1e5)), None if budget is None else draw(
                st.one_of(st.none(), st.floats(0.1, 10))))
            for shape in draw(st.permutations(sorted(draw(shapes))))  # in any order
        ]  # fmt: skip
        label = "NONE" if budget is None else f"DFLASH budget={budget}"
        configs.append({"label": label, "config": {"algorithm": algorithm, "budget": budget},
                        "throughput": cases})  # fmt: skip
    return {"configs": configs}


@settings(max_examples=80, deadline=None)
@given(matrix_reports())
def test_every_case_is_in_its_cell_and_every_cell_is_a_case(data: dict[str, Any]) -> None:
    report = typed(data)
    found = dict(matrix.matrix(report))
    short = tables.short_labels(report.configs)
    seen: set[tuple[str, int, str]] = set()
    for config in report.configs:
        for case in config.throughput:
            context, load, domain = case_shape(case.case, case.metrics)
            header, rows = found[domain]
            row = next(r for r in rows if r[0] == short[config.label])
            column = header.index(f"ctx{context} {load}: speedup · tok/s")
            speedup = case.speedup.tpot if case.speedup else None
            value = speedup.value if speedup else None
            ratio = "1.00x" if config.label == "NONE" else (
                f"{value:.2f}x" if value is not None else "-")  # fmt: skip
            assert row[column] == f"{ratio} · {figures.tok_s(case.metrics.tok_s)}"
            assert header[column + 1] == "p99 TTFT / ITL ms"
            ttft, itl = case.metrics.ttft_ms_p99, case.metrics.itl_ms_p99
            assert row[column + 1] == f"{figures.number(ttft, 1)} / {figures.number(itl, 2)}"
            seen.add((config.label, column, domain))
    for domain, (header, rows) in found.items():
        # One row per config measured in the domain; a cell without a case is "-".
        assert len({r[0] for r in rows}) == len(rows)
        assert len(header) == 1 + 2 * len({h for h in header[1::2]})
        loads = [h.split(":")[0] for h in header[1::2]]
        order = [(int(h.split()[0][3:]), LOADS.index(h.split()[1])) for h in loads]
        assert order == sorted(order), "columns in context, then load order"
        for row in rows:
            label = next(k for k, v in short.items() if v == row[0])
            for column in range(1, len(header), 2):
                if (label, column, domain) not in seen:
                    assert row[column] == row[column + 1] == "-"
