"""Markdown rendered as GitHub does (GFM tables), read back as table cells."""

from __future__ import annotations

from html.parser import HTMLParser

import markdown_it


class Tables(HTMLParser):
    """Collects every <table> of an HTML document as rows of cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def to_html(text: str) -> str:
    return str(markdown_it.MarkdownIt("commonmark").enable("table").render(text))


def tables(text: str) -> list[list[list[str]]]:
    parser = Tables()
    parser.feed(to_html(text))
    return parser.tables


def render(text: str) -> tuple[str, list[list[list[str]]]]:
    """The HTML of ``text`` and its tables."""
    html = to_html(text)
    return html, tables(text)
