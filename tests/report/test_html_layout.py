"""The page read in a window 800 px wide, in headless Chromium with the network off: the
answer is its first section, nothing makes the page scroll sideways (a table wider than
the window scrolls in its own box), and no script error or console error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_specdecode.report import html

from .chromium import errors_box, layout, parse
from .conftest import typed
from .test_html import full_report

NARROW = 800
LONG = "Drafter_Checkpoint_" * 8  # one word (no break opportunity), wider than the window


def long_named_report() -> dict[str, Any]:
    """The sweep (seven configs, six loads: a matrix far wider than 800 px), one config's
    label and the host each a single word wider than the window."""
    report = full_report()
    old = report["configs"][1]["label"]
    for config in report["configs"]:
        if config["label"] == old:
            config["label"] = f"{old} draft={LONG}"
    for record in report["break_even"]:
        if record["config"] == old:
            record["config"] = f"{old} draft={LONG}"
            record["line"] = str(record["line"]).replace(old, f"{old} draft={LONG}")
    report["hosts"] = [f"gpu-{LONG}"]
    return report


@pytest.mark.slow
def test_the_page_reads_at_800_px_with_the_answer_first(tmp_path: Path) -> None:
    page = tmp_path / "narrow.html"
    page.write_text(html.render(typed(long_named_report())))
    found = layout(page, tmp_path, width=NARROW)
    assert found.viewport == NARROW, "the window is not the width asked for"
    assert found.rendered.console == [], found.rendered.console
    assert errors_box(found.rendered.dom) == "", "the page recorded a script error"
    assert parse(found.rendered.dom).classes.get("js-plotly-plot", 0) >= 5, "charts not drawn"
    assert found.first_section == "answer"
    assert found.overflowing == [], found.overflowing
    assert found.page <= NARROW, f"the page scrolls sideways: {found.page} px wide"
    # The matrix is wider than the window: it scrolls inside its own box.
    matrices = [box for box in found.scrolls if str(box["id"]).startswith("matrix-")]
    assert matrices, found.scrolls
    assert all(box["width"] > NARROW > box["shown"] for box in matrices), matrices
    # The screenshot stays in tmp_path (never in git); a person looks at it when in doubt.
    assert found.rendered.screenshot.stat().st_size > 10_000
