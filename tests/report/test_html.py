"""The HTML report: sections in order, tables from the shared table builders, chart data
from the report, every value escaped, old reports, failures as one line."""

from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Iterator, Mapping
from html.parser import HTMLParser
from pathlib import Path
from types import FrameType
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_specdecode.config.settings import Settings
from pytest_specdecode.report import (
    cli,
    html,
    html_charts,
    html_sections,
    outputs,
    tables,
    upgrade,
)
from pytest_specdecode.report.model import BreakEven, Compare, Finding, Gates, Report
from pytest_specdecode.report.outputs import RunOutputs
from pytest_specdecode.report.results import RunResults

from .chromium import loaded_sources, parse
from .conftest import judged, sweep_report, typed
from .feed import B8, coding, throughput

# A stand-in for Plotly's bundle: the unit tests check the page, not Plotly.
FAKE_JS = "window.Plotly = {newPlot: function () {}};"


def page(report: Report) -> str:
    return html.render(report, js=FAKE_JS)


def chart_specs(text: str) -> list[dict[str, Any]]:
    match = re.search(r'<script type="application/json" id="dflash-charts">(.*?)</script>', text)
    assert match is not None
    found: list[dict[str, Any]] = json.loads(match[1])
    return found


class Structure(HTMLParser):
    """The page's element structure (tags and attribute names) and its script bodies."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        # A number's cell is classed "num": the class may differ, the structure may not.
        names = sorted(a for a, _ in attrs if a != "class")
        self.tags.append(f"<{tag} {' '.join(names)}>")
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append("")

    def handle_endtag(self, tag: str) -> None:
        self.tags.append(f"</{tag}>")
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data

    def handle_comment(self, data: str) -> None:
        self.tags.append("<!--comment-->")


def structure(text: str) -> Structure:
    found = Structure()
    found.feed(text)
    found.close()
    return found


@pytest.fixture
def report() -> Report:
    return judged(sweep_report())


def full_report() -> dict[str, Any]:
    """The sweep with everything a page can show: repetition and break-even records too
    (judged as RunOutputs judges the dict; :func:`typed` makes it the report a page takes)."""
    report = sweep_report()
    for config in report["configs"]:
        for case in config["throughput"]:
            case["metrics"]["repetition"] = 0.1
    found = typed(report)
    outputs.judge(found, 0.5)
    return found.to_dict()


def test_sections_come_in_the_order_a_reader_asks() -> None:
    text = page(typed(full_report()))
    sections = re.findall(r'<section id="([^"]+)">', text)
    # The answer first, then the figures it rests on, then the rest.
    assert sections == ["answer", "matrix", "latency", "warnings", "repetition", "break-even",
                        "configs", "throughput", "pareto", "acceptance", "coding", "provenance",
                        "about"]  # fmt: skip
    assert text.index('id="simulated"') < text.index('id="status"') < text.index('id="answer"')
    assert text.index("Simulated, not a GPU result") < text.index("<h1>")
    answer = text.split('<section id="answer">')[1].split("</section>")[0]
    assert 'id="verdict-table"' in answer
    assert 'id="policy-table"' in answer
    assert "search" not in parse(text).ids, "no search ran: no search section"
    nav = re.search(r'<nav id="contents">(.*?)</nav>', text)
    assert nav is not None
    assert re.findall(r'href="#([^"]+)"', nav[1]) == sections[:-1]


def test_tables_hold_the_shared_table_builders_cells(report: Report) -> None:
    text = page(report)
    for ident, (header, rows) in {
        "verdict-table": tables.verdict(report),
        "throughput-table": tables.throughput(report),
        "pareto-table": tables.pareto(report),
        "acceptance-table": tables.acceptance(report),
    }.items():
        body = re.search(rf'<table id="{ident}">(.*?)</table>', text, re.DOTALL)
        assert body is not None, ident
        cells = re.findall(r"<t[hd](?: [^>]*)?>(.*?)</t[hd]>", body[1])
        assert cells == [html_sections.esc(c) for c in [*header, *(c for r in rows for c in r)]]
    for config in report.configs:
        assert f'<h3 class="config-label">{html_sections.esc(config.label)}</h3>' in text


def test_each_config_shows_readiness_verification_and_its_gates(report: Report) -> None:
    report.gates = Gates(
        failed=["pass rate: DFLASH budget=4 window=1024: 3/4 = 75% < 80%"],
        summary=[
            "pass-rate gate FAILED: DFLASH budget=4 window=1024: 3/4 = 75% < 80%",
            "pass-rate gate passed: DFLASH budget=16 window=2048: 4/4 = 100% >= 80%",
        ],
    )
    text = page(report)
    card = text.split('<h3 class="config-label">DFLASH budget=4 window=1024</h3>')[1]
    card = card.split("</article>")[0]
    assert "<td>readiness</td><td>passed</td>" in card
    assert "loading -&gt; warming up -&gt; verified; ready in 1.90 s" in card
    assert "<td>pass-rate</td><td>FAILED</td><td>DFLASH budget=4 window=1024: 3/4" in card
    assert "budget=16" not in card, "a gate line of another config"
    assert card.count("FAILED") == 1, "the failed line and its summary are one gate"
    other = text.split('<h3 class="config-label">DFLASH budget=16 window=2048</h3>')[1]
    assert "<td>pass-rate</td><td>passed</td>" in other.split("</article>")[0]


def test_charts_take_their_figures_from_the_report(report: Report) -> None:
    specs = {c["id"]: c for c in chart_specs(page(report))}
    assert {"chart-readiness", "chart-tok-s", "chart-speedup", "chart-acceptance",
            "chart-histogram", "chart-pass-rate"} <= set(specs)  # fmt: skip
    assert any(i.startswith("chart-pareto-") for i in specs)
    config = report.configs[3]
    case = config.throughput[0]
    bars = next(t for t in specs["chart-tok-s"]["data"] if t["name"] == "budget=8 window=1024")
    at = bars["x"].index(case.case)
    found = case.metrics.interval("tok_s")
    assert found is not None
    assert found.mean is not None
    assert found.low is not None
    assert found.high is not None
    assert bars["y"][at] == pytest.approx(found.mean)
    assert bars["error_y"]["array"][at] == pytest.approx(found.high - found.mean)
    assert bars["error_y"]["arrayminus"][at] == pytest.approx(found.mean - found.low)
    speed = next(t for t in specs["chart-speedup"]["data"] if t["name"] == "budget=8 window=1024")
    assert case.speedup is not None
    assert case.speedup.tpot is not None
    assert speed["y"][speed["x"].index(case.case)] == case.speedup.tpot.value
    assert all("(simulated)" in c["layout"]["title"]["text"] for c in specs.values())


def test_the_page_loads_nothing_from_anywhere(report: Report) -> None:
    text = html.render(report)  # with Plotly's own bundle
    assert loaded_sources(text) == []
    assert text.count("<script") == 4, "the error recorder, Plotly once, the data, the drawing"
    assert "default-src 'none'" in text


# Strings a config label, a failure's cause or a launch line might hold.
HOSTILE = st.one_of(
    st.text(min_size=1, max_size=40),
    st.sampled_from(["</script><script>alert(1)</script>", "<!--", "-->", "<b onmouseover=x>",
                     "]]></x>", "&lt;", "\u2028\u2029", '"\'><img src=x>', "<a href='//e'>"]),
)  # fmt: skip


def hostile_report(text: str) -> Report:
    report = judged(sweep_report()).to_dict()
    config = report["configs"][1]
    old = config["label"]
    config["label"] = text
    config["coding"][0].update(problem=text, status=text, reason=text)
    config["service"].update(identity=text, launch_command=text, unverified=[text])
    config["lossless"] = [{"nodeid": text, "passed": False, "detail": text}]
    judged_text = json.dumps(report["verdict"]).replace(json.dumps(old), json.dumps(text))
    report["verdict"] = json.loads(judged_text)
    report["gates"] = {"failed": [f"pass rate: {text}: {text}"], "summary": [text]}
    report["hosts"] = [text]
    report["search"] = {f"key {text}": text, "trials": [{f"key {text}": text, "value": 1.5}]}
    table = "case  config\n----  ------\nc1    b8\n"
    report["compare"] = {"baseline": text, "table": table, "findings": [{"case": "c1",
                         "status": text, "line": text}], "baseline_configs": [text]}  # fmt: skip
    return typed(report)


@functools.cache
def plain_structure() -> Structure:
    """The structure of the hostile report's page with a harmless value (built once:
    it is the same for every example)."""
    return structure(page(hostile_report("x")))


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=HOSTILE)
def test_no_value_becomes_markup(text: str) -> None:
    hostile = page(hostile_report(text))
    found, expected = structure(hostile), plain_structure()
    assert found.tags == expected.tags, "a value opened or closed an element"
    for body in found.scripts:
        assert "</script" not in body.lower()
        assert "<!--" not in body
    readiness = next(c for c in chart_specs(hostile) if c["id"] == "chart-readiness")
    assert html_charts.label(text) in readiness["data"][0]["y"]


def test_script_json_cannot_close_the_script_and_reads_back() -> None:
    value = {"a</script>": ["<!--", "&", "\u2028", float("nan"), float("inf"), 1.5]}
    text = html.script_json(value)
    assert not set("<>&") & set(text)
    assert "\u2028" not in text
    assert json.loads(text) == {"a</script>": ["<!--", "&", "\u2028", None, None, 1.5]}


class Box(Mapping[str, Any]):
    """A Mapping that is no dict: plain JSON has no form for it until it is copied."""

    def __init__(self, inner: dict[str, Any]) -> None:
        self.inner = inner

    def __getitem__(self, key: str) -> Any:
        return self.inner[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.inner)

    def __len__(self) -> int:
        return len(self.inner)


LEAVES = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4)
VALUES = st.recursive(
    LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=3), inner, max_size=3)
        | st.dictionaries(st.text(max_size=3), inner, max_size=3).map(Box)
    ),
    max_leaves=12,
)


@given(VALUES)
def test_script_json_is_the_finite_copy_written_as_json(value: Any) -> None:
    # The copy with NaN and infinities as null and every Mapping a dict, as the
    # one-pass encoder writes it when it can and the walk when it cannot.
    expected = json.dumps(html._finite(value), default=str, allow_nan=False)
    assert json.loads(html.script_json(value)) == json.loads(expected)


def test_the_chart_data_is_written_without_a_python_call_per_value() -> None:
    specs = [{"id": f"chart-{i}", "data": [{"x": list(range(50)), "y": [0.5] * 50}]}
             for i in range(200)]  # fmt: skip
    count = 0

    def hook(frame: FrameType, event: str, arg: object) -> None:
        nonlocal count
        count += event in ("call", "c_call")

    sys.setprofile(hook)
    try:
        text = html.script_json(specs)
    finally:
        sys.setprofile(None)
    assert json.loads(text) == specs
    # 20,000 values: a copy walked in Python to look for NaN makes a call for each.
    assert count < 100, count


def test_non_finite_figures_are_gaps_not_invalid_json(report: Report) -> None:
    found = report.configs[1].throughput[0].metrics.interval("tok_s")
    assert found is not None
    found.mean, found.low = float("nan"), float("-inf")
    specs = chart_specs(page(report))  # json.loads refuses NaN only with a hook: check text
    assert "NaN" not in json.dumps(specs)
    assert "Infinity" not in json.dumps(specs)


def old_report() -> dict[str, Any]:
    """A report as written before domains, intervals, speedups, the verdict and phases."""

    def case(name: str, tok_s: float, accept: float | None) -> dict[str, Any]:
        metrics = {"case": name, "tok_s": tok_s, "accept_length": accept, "rounds": 1}
        return {"case": name, "metrics": metrics}

    def config(label: str, algorithm: str, budget: int | None, tok_s: float) -> dict[str, Any]:
        accept = None if algorithm == "NONE" else 3.0
        return {
            "label": label,
            "config": {"algorithm": algorithm, "budget": budget, "window": 2048},
            "service": {"restarted": True, "ready_seconds": 1.2},
            "pass_rate": {"rate": 0.5, "passed": 1, "total": 2},
            "coding": [{"problem": "gcd", "passed": False, "status": "failed",
                        "reason": "gcd(4, 6) returned 0, expected 2"},
                       {"problem": "fib", "passed": True, "status": "passed", "reason": ""}],
            "throughput": [case("ctx1024-c1", tok_s, accept),
                           case("ctx1024-c8", tok_s * 5, accept)],
            "lossless": {},
            "errors": [],
        }  # fmt: skip

    return {
        "format": 1,
        "plugin": "0.0.9",
        "started": "2026-06-01T10:00:00+00:00",
        "hosts": ["gpu1"],
        "simulated": True,
        "configs": [config("NONE", "NONE", None, 40.0),
                    config("DFLASH budget=8", "DFLASH", 8, 90.0)],
        "gates": {"failed": []},
        "compare": None,
    }  # fmt: skip


def test_an_old_report_renders_what_it_has() -> None:
    text = page(typed(upgrade.upgrade(old_report())))
    assert "No verdict: this report has none (written by an older version)" in text
    found = parse(text)
    assert {"simulated", "configs", "throughput", "coding", "provenance"} <= found.ids
    assert "DFLASH budget=8" in found.text
    assert "gcd(4, 6) returned 0, expected 2" in found.text
    specs = {c["id"] for c in chart_specs(text)}
    assert {"chart-tok-s", "chart-pass-rate"} <= specs
    assert "chart-speedup" not in specs
    assert "chart-readiness" not in specs


def test_without_plotly_the_tables_stay_and_the_page_says_why(
    report: Report, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(html, "plotly_js", lambda: None)
    text = html.render(report)
    assert html_sections.esc(html.NO_PLOTLY) in text
    assert 'id="verdict-table"' in text
    assert "dflash-charts" not in text
    assert text.count("<script") == 1


def test_a_search_section_shows_whatever_the_search_recorded(report: Report) -> None:
    report.search = {
        "sampler": "TPE",
        "trials": [{"number": 0, "config": "budget=4", "value": 1.25},
                   {"number": 1, "config": "budget=8", "value": None}],
        "stopped": {"reason": "no unvisited config can win"},
    }  # fmt: skip
    text = page(report)
    body = text.split('<section id="search">')[1].split("</section>")[0]
    assert "<dt>sampler</dt><dd>TPE</dd>" in body
    assert '<th scope="col">value</th>' in body
    assert "<td>budget=8</td>" in body
    assert "no unvisited config can win" in body
    assert text.index('id="search"') < text.index('id="provenance"')


def test_a_comparison_shows_both_values_the_interval_and_the_gates_word(
    report: Report,
) -> None:
    report.compare = Compare(
        baseline="0001_b8.json",
        baseline_configs=["DFLASH budget=8"],
        table="case      config  tok/s saved  tok/s now  change  95% interval\n"
        "--------  ------  -----------  ---------  ------  ------------\n"
        "ctx60-c1  b8      100          90         -10.0%  -12.0..-8.0%\n",
        findings=[Finding(case="ctx60-c1", spec="tok_s:5%", status="fail",
                          line="ctx60-c1: tok/s -10.0% beyond -5%")],
    )  # fmt: skip
    body = page(report).split('<table id="compare-table">')[1].split("</table>")[0]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", body)
    assert cells == ["ctx60-c1", "b8", "100", "90", "-10.0%", "-12.0..-8.0%",
                     "fail: ctx60-c1: tok/s -10.0% beyond -5%"]  # fmt: skip


# --- where the page is written -------------------------------------------------------


def finished(tmp_path: Path, **kw: Any) -> RunOutputs:
    results = RunResults()
    throughput(results, B8, "ctx60-c1", {"tok_s": 100.0, "accept_length": 3.0})
    coding(results, B8, "gcd", passed=False)
    return RunOutputs(Settings(report="out/r.json", **kw), results, tmp_path)


def test_the_page_is_written_beside_the_json_report(tmp_path: Path) -> None:
    outputs = finished(tmp_path, html="out/r.html")
    assert outputs.finish(1) == 1
    text = (tmp_path / "out/r.html").read_text()
    assert "DFLASH budget=8 window=2048" in text
    assert any(n.startswith("dflash html report: ") and n.endswith(" MB)") for n in outputs.notes)


def test_no_page_with_html_none(tmp_path: Path) -> None:
    outputs = finished(tmp_path, html=None)
    outputs.finish(0)
    assert not list(tmp_path.rglob("*.html"))


def test_a_page_that_cannot_be_written_is_one_line_and_keeps_the_status(tmp_path: Path) -> None:
    (tmp_path / "taken.html").mkdir()  # a directory where the page should go
    outputs = finished(tmp_path, html="taken.html")
    assert outputs.finish(1) == 1
    assert outputs.finish(0) == 0
    lines = [n for n in outputs.notes if "HTML" in n]
    assert lines
    assert all("\n" not in n for n in lines)
    where = str(tmp_path / "taken.html")
    assert lines[0].startswith(f"dflash warning: could not write the HTML report {where!r}: ")
    assert (tmp_path / "out/r.json").exists()


def test_a_rendering_bug_is_one_line_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(report: Any, **kw: Any) -> str:
        raise KeyError("configs")

    monkeypatch.setattr(html, "render", broken)
    outputs = finished(tmp_path)
    assert outputs.finish(0) == 0
    assert [n for n in outputs.notes if "HTML" in n] == [
        f"dflash warning: could not write the HTML report "
        f"{str(tmp_path / '.dflash/report.html')!r}: KeyError: 'configs'"
    ]


@pytest.mark.parametrize("value", ["report.txt", "out/"])
def test_a_bad_html_path_is_a_one_line_usage_error(pytester: pytest.Pytester, value: str) -> None:
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider", f"--dflash-html={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*Invalid value {value!r} from --dflash-html: expected a file path ending in .html*"]
    )
    assert "Traceback" not in result.stderr.str()


# --- pytest-specdecode report --html ----------------------------------------------------


def test_the_cli_writes_the_same_page_from_a_saved_report(
    tmp_path: Path, report: Report, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = tmp_path / "report.json"
    saved.write_bytes(report.to_json())
    out = tmp_path / "pages" / "out.html"
    assert cli.main(["report", "--html", str(out), str(saved)]) == 0
    assert f"html: {out}" in capsys.readouterr().err
    assert out.read_text() == html.render(typed(json.loads(saved.read_text())))


def test_the_cli_reads_an_old_report(tmp_path: Path) -> None:
    saved = tmp_path / "old.json"
    saved.write_text(json.dumps(old_report()))
    assert cli.main(["report", "--html", str(tmp_path / "old.html"), str(saved)]) == 0
    assert "gcd(4, 6) returned 0, expected 2" in (tmp_path / "old.html").read_text()


def test_the_cli_cannot_write_the_page_in_one_line(
    tmp_path: Path, report: Report, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = tmp_path / "report.json"
    saved.write_bytes(report.to_json())
    (tmp_path / "dir.html").mkdir()
    assert cli.main(["report", "--html", str(tmp_path / "dir.html"), str(saved)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("pytest-specdecode: error: cannot write the HTML report to ")
    assert err.count("\n") == 1


def test_the_break_even_chart_draws_the_records_and_their_crossings(report: Report) -> None:
    crossing = BreakEven(
        config="DFLASH budget=8 window=2048",
        domain="chat",
        load_kind="concurrency",
        loads=[1, 8, 32],
        speedups=[2.0, 1.2, 0.8],
        lows=[1.8, 1.0, 0.7],
        highs=[2.2, 1.3, 0.9],
        status="crosses",
        break_even=16.0,
        low=9.0,
        high=25.0,
        line="crosses at c~16",
    )
    ragged = msgspec.structs.replace(
        crossing, config="DFLASH budget=4 window=2048", lows=[1.0], status="above",
        break_even=None, line="above 1.0 up to c=32")  # fmt: skip
    report.break_even = [crossing, ragged]
    text = page(report)
    chart = next(c for c in chart_specs(text) if c["id"] == "chart-break-even")
    curve, mark, other = chart["data"]
    assert (curve["x"], curve["y"]) == ([1, 8, 32], [2.0, 1.2, 0.8])
    assert curve["error_y"]["array"] == pytest.approx([0.2, 0.1, 0.1])
    assert curve["error_y"]["arrayminus"] == pytest.approx([0.2, 0.2, 0.1])
    assert (mark["x"], mark["y"], mark["name"]) == ([16.0], [1.0], curve["name"])
    assert mark["error_x"]["arrayminus"] == [7.0]
    assert mark["error_x"]["array"] == [9.0]
    assert other["error_y"] is None, "bounds that do not match the loads are left out"
    assert chart["layout"]["xaxis"]["tickvals"] == [1, 8, 32]
    section = text.split('<section id="break-even">')[1].split("</section>")[0]
    assert 'id="chart-break-even"' in section
    assert "<li>crosses at c~16</li><li>above 1.0 up to c=32</li>" in section
