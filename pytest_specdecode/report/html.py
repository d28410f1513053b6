"""One self-contained HTML page per run: verdict, configs, figures with intervals, provenance.

The page is a single file with its styles, Plotly's JavaScript and the chart
data inlined: opened from disk it asks no network for anything. Tables are
plain HTML (:mod:`~pytest_specdecode.report.html_sections`) and read without
JavaScript; the charts (:mod:`~pytest_specdecode.report.html_charts`) are
drawn from the report's own figures, not from the PNG plots.

Nothing from the run becomes markup: text is escaped where it is placed, and
the JSON in ``<script>`` elements has ``<``, ``>`` and ``&`` written as
``\\u003c`` etc., so no value can close the script or open a comment.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

from pytest_specdecode import statefiles
from pytest_specdecode.errors import SpecDecodeError
from pytest_specdecode.report import html_answer, html_charts, html_sections, tables
from pytest_specdecode.report.html_sections import esc
from pytest_specdecode.report.model import Report

TITLE = "pytest-specdecode run"
NO_PLOTLY = (
    "Charts left out: they need plotly, which is not installed "
    "(pip install 'pytest-specdecode[html]'); the tables hold every figure."
)


def plotly_js() -> str | None:
    """Plotly's bundled JavaScript, or None when the package is missing."""
    try:
        from plotly.offline import get_plotlyjs
    except ImportError:
        return None
    return str(get_plotlyjs())


class _Unusual(SpecDecodeError, TypeError):
    """A value plain JSON does not hold as it is (a Mapping that is no dict, a set...)."""


def _refuse(value: Any) -> Any:
    raise _Unusual(type(value).__name__)


def script_json(value: Any) -> str:
    """``value`` as JSON that is safe inside ``<script>``: no ``<``, ``>`` or ``&``
    (so no ``</script>`` and no ``<!--``), no line separators; NaN and infinities as null.

    Written by the C encoder in one pass; only a value it refuses (a non-finite float,
    a key or object plain JSON has no form for) is walked in Python first, so the
    charts of a page of many configs are not copied value by value to be checked."""
    dump = partial(json.dumps, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    try:
        text = dump(value, default=_refuse)
    except (ValueError, TypeError):
        text = dump(_finite(value), default=str)
    for char, code in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, code)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def render(report: Report, *, js: str | None = None) -> str:
    """The whole page for ``report`` (the run report the JSON report holds).

    ``js`` is Plotly's JavaScript (default: :func:`plotly_js`); without it the
    page has its tables and says why the charts are missing.
    """
    js = plotly_js() if js is None else js
    charts = html_charts.charts(report) if js else []
    placed: list[str] = []

    def slot(prefix: str) -> str:
        out = []
        for index, chart in enumerate(charts):
            if chart["id"].startswith(prefix) and chart["id"] not in placed:
                placed.append(chart["id"])
                out.append(
                    f'<figure class="chart-box"><div class="chart" id="{esc(chart["id"])}" '
                    f'data-chart="{index}"></div>'
                    f"<figcaption>{esc(chart.get('note') or '')}</figcaption></figure>"
                )
        return "\n".join(out)

    s = html_sections
    body = [
        s.banner(report),
        f"<h1>{esc(TITLE)}</h1>",
        html_sections.para(_subtitle(report), "muted"),
        "" if js else html_sections.para(NO_PLOTLY, "note bad"),
        s.status(report),
        # The answer first, then what it rests on, then the rest.
        html_answer.answer(report, slot),
        html_answer.load_matrix(report, slot),
        s.latency(report, slot),
        s.warnings(report, slot),
        s.repetition(report, slot),
        s.break_even(report, slot),
        s.configs(report, slot),
        s.throughput(report, slot),
        s.pareto(report, slot),
        s.acceptance(report, slot),
        s.coding(report, slot),
        s.compare(report),
        s.search(report),
        s.provenance(report),
        s.section("about", "About this page", html_sections.para(
            "Written by pytest-specdecode from the run's JSON report; self-contained (no "
            "network needed). The JSON report beside it holds every figure.", "muted")),
    ]  # fmt: skip
    body.insert(5, _contents(body))
    title = TITLE + (" (simulated)" if tables.simulated(report) else "")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # The page may run only its own inline code and load nothing from anywhere.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; "
        'img-src data: blob:; font-src data:">',
        f"<title>{esc(title)}</title>",
        f"<style>{_CSS}</style>",
        f"<script>{_ERRORS_JS}</script>",
        "</head><body>",
        '<pre id="dflash-errors" hidden></pre>',
        "<main>",
        *[b for b in body if b],
        "</main>",
    ]
    if js:
        specs = [{"id": c["id"], "data": c["data"], "layout": c["layout"]} for c in charts]
        parts += [
            f"<script>{js}</script>",
            f'<script type="application/json" id="dflash-charts">{script_json(specs)}</script>',
            f"<script>{_DRAW_JS}</script>",
        ]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _subtitle(report: Report) -> str:
    count = len(report.configs)
    facts = [
        f"{count} config{'s' if count != 1 else ''}",
        f"started {report.started}" if report.started else "",
        f"hosts {', '.join(report.hosts)}" if report.hosts else "",
        f"pytest-specdecode {report.plugin}" if report.plugin else "",
    ]
    return " · ".join(f for f in facts if f)


def _contents(body: list[str]) -> str:
    present = {b.split('"', 2)[1] for b in body if b.startswith('<section id="')}
    links = [
        ("answer", "Answer"),
        ("matrix", "Configs x loads"),
        ("latency", "Latency"),
        ("warnings", "Warnings"),
        ("repetition", "Repetition"),
        ("break-even", "Break-even"),
        ("configs", "Configs"),
        ("throughput", "Speedup and tok/s"),
        ("pareto", "Pareto front"),
        ("acceptance", "Acceptance"),
        ("coding", "Coding"),
        ("compare", "Comparison"),
        ("search", "Search"),
        ("provenance", "Provenance"),
    ]
    shown = [f'<a href="#{a}">{t}</a>' for a, t in links if a in present]
    return '<nav id="contents">' + " · ".join(shown) + "</nav>"


def write(report: Report, path: str | os.PathLike[str]) -> Path:
    """Write the page to ``path`` atomically (readers never see half a page)."""
    target = Path(path)
    statefiles.write_text(target, render(report))
    return target


# Records every script error and console.error into #dflash-errors (hidden while empty):
# the browser test reads it, and a reader sees what went wrong instead of a blank chart.
_ERRORS_JS = """
(function () {
  var seen = [];
  function note(text) {
    seen.push(String(text));
    var box = document.getElementById("dflash-errors");
    if (box) { box.textContent = seen.join("\\n"); box.hidden = false; }
  }
  window.addEventListener("error", function (e) {
    var where = e.filename ? " at " + e.filename + ":" + e.lineno : "";
    note("error: " + (e.message || e.type) + where);
  });
  window.addEventListener("unhandledrejection", function (e) { note("rejection: " + e.reason); });
  var original = console.error;
  console.error = function () {
    note("console.error: " + Array.prototype.join.call(arguments, " "));
    return original.apply(console, arguments);
  };
})();
"""

_DRAW_JS = """
(function () {
  var specs = JSON.parse(document.getElementById("dflash-charts").textContent);
  var config = {responsive: true, displaylogo: false, scrollZoom: false};
  var drawing = [];
  specs.forEach(function (spec) {
    var box = document.getElementById(spec.id);
    if (box) { drawing.push(Plotly.newPlot(box, spec.data, spec.layout, config)); }
  });
  // Set once every chart is drawn (newPlot's promises): what a reader of the layout waits for.
  Promise.all(drawing).then(function () {
    document.body.setAttribute("data-charts-drawn", String(specs.length));
  });
})();
"""

_CSS = """
:root { --fg: #1b1f24; --muted: #59636e; --line: #d0d7de; --bad: #b42318; --good: #1a7f37;
        --warn-bg: #fff4ce; --warn-line: #d4a72c; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); font: 14px/1.45 system-ui, -apple-system, "Segoe UI",
       Roboto, sans-serif; background: #fff; }
main { max-width: 1200px; margin: 0 auto; padding: 12px 20px 40px; overflow-wrap: break-word; }
h1 { font-size: 24px; margin: 12px 0 2px; }
h2 { font-size: 19px; margin: 28px 0 8px; padding-bottom: 4px;
     border-bottom: 1px solid var(--line); }
h3 { font-size: 16px; margin: 0 0 4px; }
h4 { font-size: 13px; margin: 10px 0 4px; color: var(--muted); }
.banner { background: var(--warn-bg); border-bottom: 2px solid var(--warn-line); padding: 10px 20px;
          font-weight: 600; text-align: center; }
.muted { color: var(--muted); margin: 2px 0; }
.note { color: var(--muted); font-size: 13px; }
.status { font-weight: 600; font-size: 15px; }
.good { color: var(--good); } .bad { color: var(--bad); }
nav { margin: 8px 0; font-size: 13px; } nav a { color: #0969da; text-decoration: none; }
.scroll { overflow-x: auto; max-width: 100%; margin: 8px 0 12px; }
table { border-collapse: collapse; font-size: 13px; }
caption { text-align: left; font-weight: 600; color: var(--muted); padding: 2px 0; }
th, td { border: 1px solid var(--line); padding: 3px 8px; vertical-align: top; text-align: left; }
th { background: #f6f8fa; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
tbody tr:nth-child(even) { background: #fbfcfd; }
#verdict-table td:nth-child(3), #policy-table td:nth-child(2) { font-weight: 600; }
#answer h3 { margin-top: 12px; } #matrix td { white-space: nowrap; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(360px, 100%), 1fr));
         gap: 12px; }
.config { border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px; overflow-x: auto; }
dl.pairs { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: 2px 12px;
           margin: 4px 0; }
dl.pairs dt { color: var(--muted); } dl.pairs dd { margin: 0; word-break: break-word; }
figure.chart-box { margin: 8px 0 16px; } figcaption { color: var(--muted); font-size: 12px; }
.chart { width: 100%; min-height: 220px; }
pre { white-space: pre-wrap; word-break: break-word; }
#dflash-errors { background: #ffebe9; color: var(--bad); padding: 8px 20px; margin: 0; }
"""
