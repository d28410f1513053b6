"""Plots from typed reports: which are drawn, what they show, the simulator note."""

from __future__ import annotations

import copy
import hashlib
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_specdecode.report import plots

from .conftest import config_dict, config_entry, judged, make_report, sweep_report, typed

matplotlib = pytest.importorskip("matplotlib")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def figures() -> dict[str, Any]:
    # Building figures costs about half a second each: once for the module.
    return plots.build_figures(judged(sweep_report()))


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return plots.write_plots(judged(sweep_report()), tmp_path_factory.mktemp("plots") / "out")


def panels(figure: Any) -> list[Any]:
    """Plot axes, without colorbars (which matplotlib also lists as axes)."""
    return [ax for ax in figure.axes if ax.get_label() != "<colorbar>"]


@pytest.mark.slow
def test_a_sweep_writes_seven_distinct_pngs(written: list[Path]) -> None:
    assert [p.name for p in written] == [
        "throughput_vs_concurrency.png",
        "accept_length.png",
        "pass_rate.png",
        "heatmap_tok_s_dflash.png",
        "speedup.png",
        "pareto.png",
        "accept_histogram.png",
    ]
    digests = set()
    for path in written:
        data = path.read_bytes()
        assert data.startswith(PNG_MAGIC)
        assert len(data) > 10_000, f"{path.name} is suspiciously small"
        digests.add(hashlib.sha256(data).hexdigest())
    assert len(digests) == 7
    assert len({p.stat().st_size for p in written}) == 7


def test_throughput_panels_per_context_with_a_line_per_config(figures: dict[str, Any]) -> None:
    report = sweep_report()
    axes = panels(figures["throughput_vs_concurrency"])
    assert [ax.get_title() for ax in axes] == ["context 60 tokens", "context 1024 tokens"]
    for ax, context in zip(axes, (60, 1024), strict=True):
        assert ax.get_xlabel() == "concurrent requests"
        assert "tok/s" in ax.get_ylabel()
        lines = {line.get_label(): line for line in ax.get_lines()}
        assert list(lines) == [c["label"] for c in report["configs"]]
        for config in report["configs"]:
            expected = sorted(
                (t["metrics"]["concurrency"], t["metrics"]["tok_s"])
                for t in config["throughput"]
                if t["metrics"]["context"] == context
            )
            line = lines[config["label"]]
            assert list(line.get_xdata()) == [x for x, _ in expected]
            assert list(line.get_ydata()) == pytest.approx([y for _, y in expected])
    legend = figures["throughput_vs_concurrency"].legends[0]
    assert [t.get_text() for t in legend.get_texts()] == [c["label"] for c in report["configs"]]


def test_accept_length_bars_per_config_and_context(figures: dict[str, Any]) -> None:
    report = sweep_report()
    (ax,) = panels(figures["accept_length"])
    assert ax.get_xlabel() == "context (prompt tokens)"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["60", "1024"]
    speculative = [c for c in report["configs"] if c["accept_length"] is not None]
    assert len(ax.containers) == len(speculative), "the NONE baseline has no accept length"
    for bars, config in zip(ax.containers, speculative, strict=True):
        assert bars.get_label() == config["label"]
        heights = [bar.get_height() for bar in bars]
        # Every case of a config has the same accept length in the fixture.
        assert heights == pytest.approx([config["accept_length"]] * 2)


def test_pass_rate_bars_carry_passed_over_total(figures: dict[str, Any]) -> None:
    report = sweep_report()
    (ax,) = panels(figures["pass_rate"])
    (bars,) = ax.containers
    rates = [c["pass_rate"] for c in report["configs"]]
    assert [b.get_height() for b in bars] == pytest.approx([r["rate"] * 100 for r in rates])
    labels = [t.get_text() for t in ax.texts]
    assert labels == [f"{r['passed']}/{r['total']} ({r['rate']:.0%})" for r in rates]
    assert "%" in ax.get_ylabel()


def test_heatmap_shows_tok_s_at_the_highest_concurrency(figures: dict[str, Any]) -> None:
    report = sweep_report()
    figure = figures["heatmap_tok_s_dflash"]
    assert "highest concurrency" in figure.get_suptitle()
    axes = panels(figure)
    assert [ax.get_title() for ax in axes] == [
        "context 60 tokens, concurrency 32",
        "context 1024 tokens, concurrency 32",
    ]
    for ax, context in zip(axes, (60, 1024), strict=True):
        assert (ax.get_ylabel(), ax.get_xlabel()) == ("budget", "window")
        assert [t.get_text() for t in ax.get_yticklabels()] == ["4", "8", "16"]
        assert [t.get_text() for t in ax.get_xticklabels()] == ["1024", "2048"]
        grid = ax.images[0].get_array()
        for config in report["configs"][1:]:
            row = [4, 8, 16].index(config["config"]["budget"])
            col = [1024, 2048].index(config["config"]["window"])
            (tok_s,) = (
                t["metrics"]["tok_s"]
                for t in config["throughput"]
                if t["metrics"]["context"] == context and t["metrics"]["concurrency"] == 32
            )
            assert grid[row][col] == pytest.approx(tok_s)


def test_every_figure_says_simulated_when_the_report_does(figures: dict[str, Any]) -> None:
    for name, figure in figures.items():
        assert plots.SIM_NOTE in figure.get_suptitle(), name


def test_a_gpu_report_has_no_simulator_note() -> None:
    report = make_report(
        [config_entry(config_dict("DFLASH", 8, 2048), throughput=False, problems=2)],
        simulated=False,
    )
    report["configs"][0]["service"]["simulated"] = False
    (figure,) = plots.build_figures(typed(report)).values()
    assert plots.SIM_NOTE not in figure.get_suptitle()
    assert figure.get_suptitle().startswith("Coding pass rate per config")


def test_plots_without_data_are_skipped(tmp_path: Path) -> None:
    coding_only = make_report(
        [config_entry(config_dict("DFLASH", 8, 2048), throughput=False, problems=3, failing=1)]
    )
    assert list(plots.build_figures(typed(coding_only))) == ["pass_rate"]
    assert plots.write_plots(typed(make_report([])), tmp_path / "empty") == []
    assert list((tmp_path / "empty").iterdir()) == []


def test_one_config_measuring_throughput_gets_no_heatmap() -> None:
    report = typed(make_report([config_entry(config_dict("DFLASH", 8, 2048))]))
    assert plots.sweeps(report) == []
    assert "heatmap_tok_s_dflash" not in plots.build_figures(report)


def test_sweeps_need_exactly_two_varying_keys_per_algorithm() -> None:
    report = sweep_report()
    (sweep,) = plots.sweeps(typed(report))
    assert (sweep.algorithm, sweep.row_key, sweep.col_key) == ("DFLASH", "budget", "window")
    assert sweep.cells["DFLASH budget=16 window=1024"] == (16, 1024)
    one_key = make_report([config_entry(config_dict("DFLASH", b, 2048)) for b in (4, 8)])
    assert plots.sweeps(typed(one_key)) == []
    three = copy.deepcopy(report)
    three["configs"][1]["config"]["topk"] = 4
    assert plots.sweeps(typed(three)) == []
    # An extra flag is a key like any other.
    extra = make_report([config_entry(config_dict("DFLASH", 8, 2048)) for _ in range(4)])
    for entry, (b, mem) in zip(
        extra["configs"], [(4, "0.7"), (4, "0.8"), (8, "0.7"), (8, "0.8")], strict=True
    ):
        entry["config"]["budget"] = b
        entry["config"]["extra"] = [["mem-fraction-static", mem]]
        entry["label"] = f"DFLASH budget={b} mem-fraction-static={mem}"
    (sweep,) = plots.sweeps(typed(extra))
    assert (sweep.row_key, sweep.col_key) == ("budget", "mem-fraction-static")


def test_case_shape_falls_back_to_the_case_id() -> None:
    report = make_report([config_entry(config_dict("DFLASH", 8, 2048))])
    for case in report["configs"][0]["throughput"]:
        del case["metrics"]["context"], case["metrics"]["concurrency"]
    shapes = {(p.context, p.concurrency) for p in plots.throughput_points(typed(report))}
    assert shapes == {(60, 1), (60, 8), (60, 32), (1024, 1), (1024, 8), (1024, 32)}


def test_missing_matplotlib_is_one_line_saying_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(plots.PlotsUnavailable) as info:
        plots.write_plots(typed(sweep_report()), tmp_path)
    message = str(info.value)
    assert "\n" not in message
    assert "pip install 'pytest-specdecode[plot]'" in message


def test_require_matplotlib_checks_early(monkeypatch: pytest.MonkeyPatch) -> None:
    plots.require_matplotlib()
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(plots.PlotsUnavailable, match=r"pytest-specdecode\[plot\]"):
        plots.require_matplotlib()


def test_decision_plots_show_speedup_the_pareto_front_and_the_histogram(
    figures: dict[str, Any],
) -> None:
    report = judged(sweep_report())
    speedup = panels(figures["speedup"])
    assert [ax.get_title() for ax in speedup] == ["context 60 tokens", "context 1024 tokens"]
    lines = {
        line.get_label(): line for line in speedup[0].get_lines() if line.get_label()[0] != "_"
    }
    assert "NONE" not in lines, "the baseline is the reference, not a line"
    b8 = next(c for c in report.configs if c.label == "DFLASH budget=8 window=2048")
    expected = [
        t.speedup.tpot.value
        for t in b8.throughput
        if t.metrics.context == 60 and t.speedup and t.speedup.tpot
    ]
    assert len(expected) == 3, "a speedup at each concurrency of the context"
    assert list(lines["DFLASH budget=8 window=2048"].get_ydata()) == pytest.approx(expected)
    pareto = panels(figures["pareto"])
    assert pareto[0].get_xlabel().startswith("per-request tok/s")
    front = [line for line in pareto[0].get_lines() if line.get_label() == "Pareto front"]
    assert len(front) == 1
    assert report.verdict is not None
    (group,) = [g for g in report.verdict.pareto if g.context == 60]
    on_front = sorted(p.req_tok_s for p in group.points if p.front and p.req_tok_s is not None)
    assert len(on_front) == len([p for p in group.points if p.front])
    assert list(front[0].get_xdata()) == pytest.approx(on_front)
    top, bottom = panels(figures["accept_histogram"])
    assert top.get_title() == "chat: verify steps by correct drafts"
    assert bottom.get_title() == "chat: acceptance rate per draft position"
    assert len(top.containers) == len(report.configs) - 1, "one bar group per speculative config"


def test_break_even_plot_marks_each_crossing_on_the_one_line() -> None:
    from pytest_specdecode.report import break_even

    report = judged(sweep_report())
    report.break_even = break_even.records(report)
    assert report.break_even, "the sweep report has a baseline and several loads"
    figure = plots.build_figures(report)["break_even"]
    [ax] = panels(figure)
    assert ax.get_xscale() == "log"
    assert any(list(line.get_ydata()) == [1.0, 1.0] for line in ax.get_lines())  # the 1.0 line
    crossing = [r for r in report.break_even if r.break_even is not None]
    assert crossing
    marks = [line for line in ax.get_lines() if line.get_marker() == "X"]
    assert len(marks) == len(crossing)
    assert "crosses 1.0" in figure.get_suptitle()
