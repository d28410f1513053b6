"""Open a page in headless Chromium with the network off: its DOM after scripts, its console.

Debian's ``chromium`` (``.ci/run`` installs it) runs under ``unshare -n``: a
network namespace with no interface but a down loopback, so the page can reach
nothing. That needs root (CI runs as root); elsewhere the tests skip, saying why.
One launch dumps the DOM once the page's scripts are done
(``--virtual-time-budget``) and takes the screenshot.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--enable-logging=stderr",
    "--v=0",
    "--virtual-time-budget=10000",
)
WIDTH = 1280
HEIGHT = 2000
# A console line of Chromium's log: [pid:tid:date:INFO:CONSOLE:line] "text", source: URL (line)
_CONSOLE = re.compile(r':CONSOLE(?::\d+)?\] "(?P<text>.*)", source: (?P<source>\S*)')


def require_offline_chromium() -> None:
    """Skip (with the reason) unless Chromium can run here in a namespace without network."""
    if _chromium() is None:
        pytest.skip("Chromium is not installed (apt-get install chromium; .ci/run installs it)")
    if os.geteuid() != 0:
        pytest.skip("the browser test runs Chromium under 'unshare -n' (network off): needs root")
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=30, check=False)
    if probe.returncode != 0:
        pytest.skip(f"'unshare -n' is refused here: {probe.stderr.decode(errors='replace')[:200]}")


def _chromium() -> str | None:
    return shutil.which("chromium") or (CHROMIUM if Path(CHROMIUM).exists() else None)


@dataclass
class Rendered:
    dom: str
    console: list[str]  # every console message of the page itself
    screenshot: Path


def render(page: Path, tmp: Path, *, width: int = WIDTH, height: int = HEIGHT) -> Rendered:
    """``page`` rendered offline in a window ``width`` px wide: the DOM after its scripts,
    its console, a screenshot."""
    require_offline_chromium()
    shot = tmp / "screenshot.png"
    argv = [
        "unshare",
        "-n",
        str(_chromium()),
        *FLAGS,
        f"--window-size={width},{height}",
        f"--user-data-dir={tmp / 'chromium-profile'}",
        f"--screenshot={shot}",
        "--dump-dom",
        page.resolve().as_uri(),
    ]
    done = subprocess.run(argv, capture_output=True, timeout=120, check=False)
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, stderr[-2000:]
    url = page.resolve().as_uri()
    # Chromium's own pages (chrome://...) log too; only the page's messages count.
    console = [
        m["text"]
        for m in (_CONSOLE.search(line) for line in stderr.splitlines())
        if m is not None and m["source"].startswith(url)
    ]
    console += [line for line in stderr.splitlines() if "Uncaught" in line]
    return Rendered(done.stdout.decode(errors="replace"), console, shot)


# Measures the laid-out page once its charts are drawn (the page sets data-charts-drawn;
# a page without charts at load) and writes the figures into <pre id="layout-probe">.
_PROBE = """<script>
(function () {
  function measure() {
    var root = document.documentElement, wide = [], boxes = [];
    // Inside a box that scrolls or clips (a .scroll, a chart's <svg>) nothing widens the page.
    function clipped(e) {
      for (var up = e.parentElement; up && up !== document.body; up = up.parentElement) {
        if (getComputedStyle(up).overflowX !== "visible" || up.tagName === "svg") { return true; }
      }
      return false;
    }
    document.querySelectorAll("body *").forEach(function (e) {
      if (clipped(e)) { return; }
      var box = e.getBoundingClientRect(), right = box.right;
      if (getComputedStyle(e).overflowX === "visible") {
        right = Math.max(right, box.left + e.scrollWidth);  // its text may run past its box
      }
      if (right > root.clientWidth + 0.5) {
        wide.push(e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + " to " + right);
      }
    });
    document.querySelectorAll(".scroll").forEach(function (e) {
      var inner = e.firstElementChild;
      boxes.push({id: inner ? inner.id : "", width: e.scrollWidth, shown: e.clientWidth});
    });
    var first = document.querySelector("main section");
    var out = document.createElement("pre");
    out.id = "layout-probe";
    out.textContent = JSON.stringify({
      viewport: root.clientWidth, page: root.scrollWidth, body: document.body.scrollWidth,
      overflowing: wide.slice(0, 20), scrolls: boxes, first_section: first ? first.id : null
    });
    document.body.appendChild(out);
  }
  function ready() {
    var charts = document.getElementById("dflash-charts");
    return !charts || document.body.hasAttribute("data-charts-drawn");
  }
  window.addEventListener("load", function () {
    if (ready()) { measure(); return; }
    new MutationObserver(function (changes, seen) {
      if (ready()) { seen.disconnect(); measure(); }
    }).observe(document.body, {attributes: true});
  });
})();
</script>"""


@dataclass
class Layout:
    viewport: int  # the window's inner width, as the page sees it
    page: int  # the document's scroll width: above the viewport, the page scrolls sideways
    overflowing: list[str]  # elements (outside a .scroll box) whose right edge passes the viewport
    scrolls: list[dict[str, Any]]  # each .scroll box: its table's id, content and shown widths
    first_section: str | None
    rendered: Rendered


def layout(page: Path, tmp: Path, *, width: int) -> Layout:
    """``page`` laid out in a window ``width`` px wide, measured after its charts are drawn."""
    probed = tmp / f"{page.stem}-probed.html"
    text = page.read_text()
    at = text.rindex("</body>")
    probed.write_text(text[:at] + _PROBE + text[at:])
    shown = render(probed, tmp, width=width)
    match = re.search(r'<pre id="layout-probe">(.*?)</pre>', shown.dom, re.DOTALL)
    assert match is not None, "the layout probe did not run: " + "; ".join(shown.console)
    found = json.loads(html.unescape(match[1]))
    return Layout(
        found["viewport"],
        max(found["page"], found["body"]),
        found["overflowing"],
        found["scrolls"],
        found["first_section"],
        shown,
    )


class Elements(HTMLParser):
    """Counts of elements by class, the ids and the text of a DOM dump."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.classes: dict[str, int] = {}
        self.ids: set[str] = set()
        self.tags: dict[str, int] = {}
        self.chunks: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.tags[tag] = self.tags.get(tag, 0) + 1
        for name in (found.get("class") or "").split():
            self.classes[name] = self.classes.get(name, 0) + 1
        if found.get("id"):
            self.ids.add(str(found["id"]))

    def handle_data(self, data: str) -> None:
        self.chunks.append(data)

    @property
    def text(self) -> str:
        return " ".join(" ".join(self.chunks).split())


def parse(dom: str) -> Elements:
    found = Elements()
    found.feed(dom)
    return found


def errors_box(dom: str) -> str:
    """What the page's own error recorder (``#dflash-errors``) holds."""
    match = re.search(r'<pre id="dflash-errors"[^>]*>(.*?)</pre>', dom, re.DOTALL)
    assert match is not None, "the page has no #dflash-errors recorder"
    return match[1]


class _Sources(HTMLParser):
    """Every URL a page would load by itself: script, stylesheet, font, image, frame sources."""

    ATTRS = ("src", "href", "srcset", "data", "poster", "xlink:href")

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.urls: list[str] = []
        self._style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value and (name in self.ATTRS and not (tag == "a" and name == "href")):
                self.urls.append(f"<{tag} {name}={value[:80]!r}>")
            if value and name == "style":
                self.urls += _css_urls(value)
        self._style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self._style = False

    def handle_data(self, data: str) -> None:
        if self._style:
            self.urls += _css_urls(data)


def _css_urls(css: str) -> list[str]:
    return re.findall(r"(?:url\(|@import)\s*['\"]?[^'\")\s]*", css)


def loaded_sources(page: str) -> list[str]:
    """What ``page`` would fetch (beyond inline data): empty for a self-contained page.
    Links a reader follows (``<a href>``) do not count; in-page anchors never fetch."""
    found = _Sources()
    found.feed(page)
    return [u for u in found.urls if not re.search(r"=['\"]?#|url\(\s*['\"]?(data:|#)", u)]
