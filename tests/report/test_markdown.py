"""The Markdown summary renders as GFM tables holding the report's figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_specdecode.output import figures
from pytest_specdecode.report.markdown import SIM_NOTE, append_step_summary, render_markdown
from pytest_specdecode.report.model import Compare, Metrics, Report
from pytest_specdecode.throughput.comparison import CaseRow, pair, render_compare

from .conftest import config_dict, config_entry, judged, make_report, sweep_report, typed

markdown_it = pytest.importorskip("markdown_it", reason="dev dependency markdown-it-py")

from .markdown_tables import tables, to_html  # noqa: E402


def compare_table() -> str:
    def row(case: str, tok_s: float | None, accept: float | None) -> CaseRow:
        return CaseRow(case, case, case, "DFLASH budget=8 window=2048", tok_s, accept, {})

    saved = [row("ctx60-c1-t128", 200.0, 3.0), row("ctx1024-c32-t128", 1500.0, 3.2)]
    now = [row("ctx60-c1-t128", 180.0, 3.1), row("ctx60-c8-t128", 800.0, None)]
    return render_compare(pair(saved, now), "saved", "now")


@pytest.fixture
def report() -> Report:
    data = judged(sweep_report())
    data.gates.failed = [
        "DFLASH budget=16 window=2048: pass rate 50% < 80% (--dflash-min-pass-rate 0.8)",
        "ctx60-c1-t128: tok_s 200 -> 180 (-10.0%), beyond the allowed drop tok_s:5%",
    ]
    data.compare = Compare(baseline="0001", table=compare_table())
    return data


def table(text: str, *header: str) -> list[list[str]]:
    """The one table whose header starts with ``header``."""
    (found,) = [t for t in tables(text) if t[0][: len(header)] == list(header)]
    return found


def test_config_table_has_pass_rate_pass_at_k_accept_and_ready(report: Report) -> None:
    configs = tables(render_markdown(report))[0]
    assert configs[0] == ["config", "ready", "pass rate", "pass@1", "accept length", "restarted"]
    rows = {row[0]: row for row in configs[1:]}
    assert list(rows) == [c.label for c in report.configs]
    for c in report.configs:
        rate = c.pass_rate
        assert rate is not None
        accept = "-" if c.accept_length is None else f"{c.accept_length:.2f}"
        assert rows[c.label] == [
            c.label,
            f"{c.service['ready_seconds']:.1f} s",
            f"{rate.passed}/{rate.total} ({rate.rate:.0%})",
            f"{c.pass_at_k[0].value:.2f}",
            accept,
            "yes",
        ]


def test_throughput_table_has_a_row_per_case_and_config_with_intervals_and_speedup(
    report: Report,
) -> None:
    rows = table(render_markdown(report), "case", "config", "tok/s")
    assert rows[0] == ["case", "config", "tok/s", "TPOT ms", "accept", "speedup", "tok/s ratio"]
    # Sorted by context, then concurrency, whatever order the report lists them in.
    cases = [f"ctx{ctx}-c{c}-t128-chat" for ctx in (60, 1024) for c in (1, 8, 32)]
    assert list(dict.fromkeys(row[0] for row in rows[1:])) == cases
    assert len(rows) == 1 + len(cases) * len(report.configs)
    cells = {(row[0], row[1]): row for row in rows[1:]}
    base = {t.case: t.metrics for t in report.configs[0].throughput}

    def tpot(m: Metrics) -> float:
        found = m.interval("tpot_ms")
        assert found is not None
        assert found.mean is not None
        return found.mean

    for c in report.configs[1:]:
        short = f"budget={c.config.budget} window={c.config.window}"
        for t in c.throughput:
            row, m = cells[(t.case, short)], t.metrics
            assert row[2] == f"{figures.rate(m.tok_s)} ±2.5%"  # 4.303 x 1% / sqrt(3)
            speedup = tpot(base[t.case]) / tpot(m)
            assert row[5].startswith(f"{speedup:.2f}x (")
            base_tok_s, tok_s = base[t.case].tok_s, m.tok_s
            assert base_tok_s is not None
            assert tok_s is not None
            assert row[6] == f"{tok_s / base_tok_s:.2f}x"
    assert cells[(cases[0], "NONE")][5:] == ["1.00x (baseline)", "1.00x"]


def test_verdict_ranks_by_tok_s_without_a_baseline() -> None:
    data = judged(make_report([config_entry(config_dict("DFLASH", b, 2048)) for b in (4, 8)]))
    verdict = table(render_markdown(data), "load", "domain", "best config")
    assert verdict[0][3] == "tok/s"
    assert all(row[3].replace(",", "").replace(".", "").isdigit() for row in verdict[1:])


def test_verdict_and_pareto_front_tables(report: Report) -> None:
    text = render_markdown(report)
    verdict = table(text, "load", "domain", "best config")
    assert verdict[0] == [
        "load", "domain", "best config", "speedup", "over contexts", "runner-up", "correctness"
    ]  # fmt: skip
    assert [row[:2] for row in verdict[1:]] == [["c1", "chat"], ["c8", "chat"], ["c32", "chat"]]
    assert all(row[3].endswith("x") for row in verdict[1:])
    assert all(
        row[2].startswith(("clear: budget=", "tie within noise: budget=")) for row in verdict[1:]
    )
    front = table(text, "context", "domain", "config", "load")
    assert front[0][4:] == ["per-request tok/s", "aggregate tok/s"]
    assert {row[0] for row in front[1:]} == {"60", "1024"}


def test_comparison_becomes_a_table(report: Report) -> None:
    text = render_markdown(report)
    assert "### Compared with 0001" in text
    compare = table(text, "case", "config", "tok/s saved")
    assert compare[0] == [
        "case",
        "config",
        "tok/s saved",
        "tok/s now",
        "change",
        "95% interval",
        "accept saved",
        "accept now",
        "change",
    ]
    b8 = "DFLASH budget=8 window=2048"
    assert compare[1] == ["ctx60-c1-t128", b8, "200", "180", "-10.0%", "-", "3.00", "3.10", "+0.10"]
    assert compare[2] == ["ctx60-c8-t128", b8, "-", "800", "-", "-", "-", "-", "-"]
    assert compare[3] == ["ctx1024-c32-t128", "-", "1,500", "-", "-", "-", "3.20", "-", "-"]


def test_gates_and_the_simulator_note_render(report: Report) -> None:
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
    text = render_markdown(judged(data))
    assert "all gates passed" in text
    assert SIM_NOTE not in text
    assert "Compared with" not in text
    assert "Coding failures" not in text
    configs, throughput, acceptance = tables(text)
    assert configs[1][2] == "-", "no coding tests, no pass rate"
    assert len(throughput) == 7
    assert acceptance[1][:2] == ["DFLASH budget=8 window=2048", "chat"]
    assert "no non-speculative baseline" in text, "says how to get a speedup"
    assert "Verdict" not in text, "one config is no choice to make"


def test_cells_with_markup_stay_one_cell() -> None:
    data = make_report([config_entry(config_dict("DFLASH", 8, 2048), problems=1)])
    data["configs"][0]["label"] = "DFLASH budget=8 | *odd* <b>label</b>"
    configs, throughput, *_ = tables(render_markdown(judged(data)))
    assert configs[1][0] == "DFLASH budget=8 | *odd* <b>label</b>"
    assert len(configs[1]) == len(configs[0])
    assert throughput[1][1] == "DFLASH budget=8 | *odd* <b>label</b>"
    assert len(throughput[1]) == len(throughput[0])


def test_lossless_column_when_a_config_checked_it() -> None:
    data = make_report(
        [
            config_entry(config_dict("NONE"), throughput=False),
            config_entry(config_dict("DFLASH", 8, 2048), throughput=False),
        ]
    )
    data["configs"][0]["lossless"] = [
        {"nodeid": "t::base", "passed": True, "detail": "baseline recorded"}
    ]
    data["configs"][1]["lossless"] = [{"nodeid": "t::check", "passed": False, "detail": "differs"}]
    (configs,) = tables(render_markdown(typed(data)))
    assert [row[-1] for row in configs] == ["lossless", "pass", "FAILED (1/1)"]


def test_append_step_summary_appends_only_when_the_variable_is_set(
    tmp_path: Path, report: Report
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
    assert len(tables(text)) == 2 * len(tables(render_markdown(report)))
