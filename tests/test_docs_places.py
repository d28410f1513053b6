"""The docs stay in their places and point only at what the repository holds.

README.md is the short page (what it is, install, the two commands, how it is
used, links); the reference lives in docs/, development in CONTRIBUTING.md.
Every relative link of those pages reaches a file (and a heading, when it
names one), every Markdown file the package or the docs name exists, and the
README's test command is the one CI runs.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 200
# Where the package's and the docs' words are: what a reader or a maintainer follows.
SOURCES = [
    *PAGES,
    *sorted((ROOT / "pytest_specdecode").rglob("*.py")),
    *sorted((ROOT / "pytest_specdecode").rglob("*.md")),
    *sorted((ROOT / "pytest_specdecode").rglob("*.toml")),
    *sorted((ROOT / "conftest_examples").rglob("*.*")),
    *sorted((ROOT / "benchmarks").rglob("*.py")),
    ROOT / "Makefile",
    ROOT / "pyproject.toml",
]
# Spelled in two parts so this file does not name it itself.
DESIGN = "DESIGN" + ".md"
_MD_NAME = re.compile(r"[\w./-]*\w\.md\b")


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def _words(path: Path) -> str:
    """The file's text; for a Markdown page its prose only (fenced blocks are
    commands and output, whose file names are the reader's own files)."""
    text = _text(path)
    if path.suffix == ".md":
        fence = re.compile(r"^(```+|~~~+)[^\n]*\n.*?^\1[ \t]*$", re.S | re.M)
        text = fence.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return text


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_the_readme_fits_on_a_screen() -> None:
    lines = len(_text(ROOT / "README.md").splitlines())
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines (at most {README_MAX_LINES}): move reference to docs/"
    )


def test_nothing_names_a_design_file_outside_the_repository() -> None:
    assert not (ROOT / DESIGN).exists()  # if it ever is committed, this test goes
    naming = [
        f"{_rel(path)}:{n}"
        for path in SOURCES
        if path.is_file()
        for n, line in enumerate(_text(path).splitlines(), 1)
        if DESIGN.lower() in line.lower()
    ]
    assert not naming, f"these lines name {DESIGN}, which is not in the repository: {naming}"


def test_every_markdown_file_named_exists() -> None:
    # A name resolves beside the file naming it, from the repository root, or
    # (a bare README.md of a data directory) as any Markdown file of that name.
    known = {p.name for p in ROOT.rglob("*.md") if ".venv" not in p.parts and ".git" not in p.parts}
    missing = []
    for path in SOURCES:
        if not path.is_file():
            continue
        for n, line in enumerate(_words(path).splitlines(), 1):
            for name in _MD_NAME.findall(line):
                here = [path.parent / name, ROOT / name, ROOT / "pytest_specdecode" / name]
                if any(p.is_file() for p in here):
                    continue
                if "/" not in name and name in known:
                    continue
                missing.append(f"{_rel(path)}:{n}: {name}")
    assert not missing, f"Markdown files named but not in the repository: {missing}"


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as ``-``."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _links_and_anchors(path: Path) -> tuple[list[str], set[str]]:
    markdown_it = pytest.importorskip("markdown_it", reason="dev dependency markdown-it-py")
    tokens = markdown_it.MarkdownIt("commonmark").parse(_text(path))
    links: list[str] = []
    anchors: set[str] = set()
    for i, token in enumerate(tokens):
        if token.type == "heading_open":
            inline = tokens[i + 1]
            words = "".join(c.content for c in inline.children or [] if c.content)
            anchors.add(_slug(words))
        for child in token.children or []:
            if child.type == "link_open":
                links.append(str(child.attrs.get("href", "")))
    return links, anchors


def test_every_relative_link_points_to_an_existing_file() -> None:
    anchors = {path: _links_and_anchors(path)[1] for path in PAGES}
    broken = []
    checked = 0
    for page in PAGES:
        for href in _links_and_anchors(page)[0]:
            if re.match(r"^[a-z][a-z0-9+.-]*:", href):
                continue  # https:, mailto: ...: not a file of the repository
            target, _, anchor = href.partition("#")
            dest = (page.parent / target).resolve() if target else page
            checked += 1
            if not dest.exists():
                broken.append(f"{_rel(page)}: {href} (no {target})")
            elif anchor and dest.suffix == ".md":
                have = anchors.get(dest) or _links_and_anchors(dest)[1]
                if anchor not in have:
                    broken.append(f"{_rel(page)}: {href} (no heading #{anchor} in {target})")
    assert checked > 20, "the link extraction found almost no links: broken?"
    assert not broken, f"links to nothing: {broken}"


def test_the_two_commands_are_real_and_ci_runs_the_test_command() -> None:
    readme = _text(ROOT / "README.md")
    commands = {
        line.split("#", 1)[0].strip()
        for block in re.findall(r"^```sh\n(.*?)^```", readme, re.S | re.M)
        for line in block.splitlines()
        if line.strip().startswith("make ")
    }
    assert {"make demo", "make test"} <= commands, commands
    targets = set(re.findall(r"^([\w-]+):", _text(ROOT / "Makefile"), re.M))
    assert {c.split()[1] for c in commands} <= targets, (commands, targets)


def test_ci_runs_the_readmes_test_command() -> None:
    run = ROOT / ".ci" / "run"
    if not run.is_file():
        pytest.skip("no .ci/ here (an sdist holds none)")
    ci = [line.strip() for line in _text(run).splitlines()]
    assert "make test" in ci, ".ci/run must run the README's test command, `make test`"
