"""Open a page in headless Chromium with the network off: its DOM after scripts, its console.

Debian's ``chromium`` (``.ci/run`` installs it) runs under ``unshare -n``: a
network namespace with no interface but a down loopback, so the page can reach
nothing. That needs root (CI runs as root); elsewhere the tests skip, saying why.
One launch dumps the DOM once the page's scripts are done
(``--virtual-time-budget``) and takes the screenshot.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

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
    "--window-size=1280,2000",
)
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


def render(page: Path, tmp: Path) -> Rendered:
    """``page`` rendered offline: the DOM after its scripts, its console, a screenshot."""
    require_offline_chromium()
    shot = tmp / "screenshot.png"
    argv = [
        "unshare",
        "-n",
        str(_chromium()),
        *FLAGS,
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
