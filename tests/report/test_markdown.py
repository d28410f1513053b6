"""The Markdown summary renders as GFM tables holding the report's figures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_specdecode import figures
from pytest_specdecode.report.markdown import SIM_NOTE, append_step_summary, render_markdown
from pytest_specdecode.throughput.comparison import CaseRow, pair, render_compare

from .conftest import config_dict, config_entry, make_report, sweep_report

markdown_it = pytest.importorskip("markdown_it", reason="dev dependency markdown-it-py")

from .markdown_tables import tables, to_html  # noqa: E402


def compare_table() -> str:
    def row(case: str, tok_s: float | None, accept: float | None) -> CaseRow:
        return CaseRow(case, case, case, "DFLASH budget=8 window=2048", tok_s, accept, {})

    saved = [row("ctx60-c1-t128", 200.0, 3.0), row("ctx1024-c32-t128", 1500.0, 3.2)]
    now = [row("ctx60-c1-t128", 180.0, 3.1), row("ctx60-c8-t128", 800.0, None)]
    return render_compare(pair(saved, now), "saved", "now")


@pytest.fixture
def report() -> dict[str, Any]:
    data = sweep_report()
    data["gates"]["failed"] = [
        "DFLASH budget=16 window=2048: pass rate 50% < 80% (--dflash-min-pass-rate 0.8)",
        "ctx60-c1-t128: tok_s 200 -> 180 (-10.0%), beyond the allowed drop tok_s:5%",
    ]
    data["compare"] = {"baseline": "0001", "table": compare_table()}
    return data


def test_config_table_has_pass_rate_pass_at_k_accept_and_ready(report: dict[str, Any]) -> None:
    configs, _, _ = tables(render_markdown(report))
    assert configs[0] == ["config", "ready", "pass rate", "pass@1", "accept length"]
    rows = {row[0]: row for row in configs[1:]}
    assert list(rows) == [c["label"] for c in report["configs"]]
    for c in report["configs"]:
        rate = c["pass_rate"]
        accept = "-" if c["accept_length"] is None else f"{c['accept_length']:.2f}"
        assert rows[c["label"]] == [
            c["label"],
            f"{c['service']['ready_seconds']:.1f} s",
            f"{rate['passed']}/{rate['total']} ({rate['rate']:.0%})",
            f"{c['pass_at_k']['1']:.2f}",
            accept,
        ]


def test_throughput_table_rows_are_cases_and_columns_configs(report: dict[str, Any]) -> None:
    _, throughput, _ = tables(render_markdown(report))
    assert throughput[0] == ["case", *(c["label"] for c in report["configs"])]
    # Sorted by context, then concurrency, whatever order the report lists them in.
    assert [row[0] for row in throughput[1:]] == [
        f"ctx{ctx}-c{c}-t128" for ctx in (60, 1024) for c in (1, 8, 32)
    ]
    cells = {
        (row[0], label): cell
        for row in throughput[1:]
        for label, cell in zip(throughput[0][1:], row[1:], strict=True)
    }
    for c in report["configs"]:
        for t in c["throughput"]:
            m = t["metrics"]
            accept = "" if m["accept_length"] is None else f" ({m['accept_length']:.2f})"
            assert cells[(t["case"], c["label"])] == f"{figures.rate(m['tok_s'])}{accept}"


def test_comparison_becomes_a_table(report: dict[str, Any]) -> None:
    text = render_markdown(report)
    assert "### Compared with 0001" in text
    _, _, compare = tables(text)
    assert compare[0] == [
        "case",
        "tok/s saved",
        "tok/s now",
        "delta",
        "accept saved",
        "accept now",
        "delta",
    ]
    assert compare[1] == ["ctx60-c1-t128", "200", "180", "-10.0%", "3.00", "3.10", "+0.10"]
    assert compare[2] == ["ctx60-c8-t128", "-", "800", "-", "-", "-", "-"]
    assert compare[3] == ["ctx1024-c32-t128", "1,500", "-", "-", "3.20", "-", "-"]


def test_gates_and_the_simulator_note_render(report: dict[str, Any]) -> None:
    html = to_html(render_markdown(report))
    assert "<blockquote>" in html
    assert "simulated (not GPU):" in html
    assert "2 gates failed" in html
    # "<" in a gate line is text, not a tag.
    assert "<li>DFLASH budget=16 window=2048: pass rate 50% &lt; 80%" in html
    assert "beyond the allowed drop tok_s:5%</li>" in html
    assert "<li>problem_0 under DFLASH budget=16 window=2048: wrong-answer: " in html


def test_all_gates_passed_and_no_note_for_a_gpu_run() -> None:
    data = make_report([config_entry(config_dict("DFLASH", 8, 2048))], simulated=False)
    data["configs"][0]["service"]["simulated"] = False
    text = render_markdown(data)
    assert "all gates passed" in text
    assert SIM_NOTE not in text
    assert "Compared with" not in text
    assert "Coding failures" not in text
    configs, throughput = tables(text)
    assert configs[1][2] == "-", "no coding tests, no pass rate"
    assert len(throughput) == 7


def test_cells_with_markup_stay_one_cell() -> None:
    data = make_report([config_entry(config_dict("DFLASH", 8, 2048), problems=1)])
    data["configs"][0]["label"] = "DFLASH budget=8 | *odd* <b>label</b>"
    configs, throughput = tables(render_markdown(data))
    assert configs[1][0] == "DFLASH budget=8 | *odd* <b>label</b>"
    assert len(configs[1]) == len(configs[0])
    assert throughput[0][1] == "DFLASH budget=8 | *odd* <b>label</b>"


def test_lossless_column_when_a_config_checked_it() -> None:
    data = make_report(
        [
            config_entry(config_dict("NONE"), throughput=False),
            config_entry(config_dict("DFLASH", 8, 2048), throughput=False),
        ]
    )
    data["configs"][0]["lossless"] = {"t::base": {"passed": True, "detail": "baseline recorded"}}
    data["configs"][1]["lossless"] = {"t::check": {"passed": False, "detail": "differs"}}
    (configs,) = tables(render_markdown(data))
    assert [row[-1] for row in configs] == ["lossless", "pass", "FAILED (1/1)"]


def test_append_step_summary_appends_only_when_the_variable_is_set(
    tmp_path: Path, report: dict[str, Any]
) -> None:
    assert append_step_summary(report, environ={}) is False
    assert append_step_summary(report, environ={"GITHUB_STEP_SUMMARY": ""}) is False
    target = tmp_path / "step_summary.md"
    target.write_text("earlier step\n")
    env = {"GITHUB_STEP_SUMMARY": str(target)}
    assert append_step_summary(report, environ=env) is True
    assert append_step_summary(report, environ=env) is True
    text = target.read_text()
    assert text.startswith("earlier step\n")
    assert text.count(render_markdown(report)) == 2
    assert len(tables(text)) == 6
