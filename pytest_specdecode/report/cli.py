"""``pytest-specdecode report PATH``: render a saved run report again, without a server.

Prints the plugin's terminal summary from the JSON report (or, with
``--markdown``, the Markdown summary CI uses, so it can be appended to a
file), writes the plots with ``--plot DIR`` and the self-contained HTML page
with ``--html OUT``. Errors are one line: exit 2 for bad usage, 1 for a
report, plot directory or page that cannot be used.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TextIO

from pytest_specdecode import __version__
from pytest_specdecode.errors import SpecDecodeError

if TYPE_CHECKING:
    from pytest_specdecode.report.model import Report

PROG = "pytest-specdecode"


class UsageError(SpecDecodeError):
    """Bad command line; the message is one line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # argparse prints the usage block and exits; one line and our exit code instead.
        raise UsageError(f"{message} (see '{self.prog} --help')")


def build_parser() -> argparse.ArgumentParser:
    """The command line: ``report PATH [--plot DIR] [--html OUT] [--markdown]``."""
    parser = _Parser(prog=PROG, description="Tools for pytest-specdecode run reports.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    report = commands.add_parser(
        "report",
        help="print the summary of a saved JSON report; optionally write plots",
        description="Render a JSON report written with --dflash-report again: the "
        "terminal summary, the Markdown CI summary or the PNG plots.",
    )
    report.add_argument("path", metavar="PATH", type=Path, help="the JSON report file")
    report.add_argument(
        "--plot",
        metavar="DIR",
        type=Path,
        help="write the PNG plots into DIR (needs pytest-specdecode[plot]). Default: no plots",
    )
    report.add_argument(
        "--html",
        metavar="OUT",
        type=Path,
        help="write the self-contained HTML report (the page a run writes with --dflash-html) "
        "to OUT. Default: no page",
    )
    report.add_argument(
        "--markdown",
        action="store_true",
        help="print the GitHub-flavoured Markdown summary instead of the terminal one",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status."""
    return run(sys.argv[1:] if argv is None else list(argv), sys.stdout, sys.stderr)


def run(argv: list[str], out: TextIO, err: TextIO) -> int:
    """:func:`main` with its streams given, for tests and embedding."""
    try:
        args = build_parser().parse_args(argv)
        if args.command is None:
            raise UsageError(f"give a command, e.g. '{PROG} report PATH' (see '{PROG} --help')")
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=err)
        return 2
    try:
        return _report(args, out, err)
    except _Failure as exc:
        print(f"{PROG}: error: {exc}", file=err)
        return 1


class _Failure(SpecDecodeError):
    """The command could not do its work; the message is one line."""


_MALFORMED = (KeyError, TypeError, AttributeError, ValueError, IndexError)
"""What rendering a report whose shape is not the one expected raises."""


def _report(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from pytest_specdecode.report import json_report as report_file

    path: Path = args.path
    try:
        data = report_file.load(path)  # typed: format 1 read as format 2, its shape checked
    except ValueError as exc:
        raise _Failure(str(exc)) from None
    try:
        text = _render(data, args.markdown)
    except _MALFORMED as exc:
        raise _Failure(
            f"report {str(path)!r} is malformed ({type(exc).__name__}: {exc}); "
            "was it written by this version of pytest-specdecode?"
        ) from None
    print(text or f"report {str(path)!r} holds no measured config", file=out)
    if args.plot is not None:
        for written in _plots(data, args.plot, path):
            print(f"plot: {written}", file=err)
    if args.html is not None:
        print(f"html: {_html(data, args.html, path)}", file=err)
    return 0


def _html(data: Report, html_out: Path, path: Path) -> Path:
    from pytest_specdecode.report import html

    try:
        return html.write(data, html_out)
    except OSError as exc:
        raise _Failure(
            f"cannot write the HTML report to {str(html_out)!r}: {exc.strerror or exc}; "
            "pass a writable path to --html"
        ) from None
    except _MALFORMED as exc:
        raise _Failure(
            f"cannot render report {str(path)!r} as HTML ({type(exc).__name__}: {exc})"
        ) from None


def _render(data: Report, markdown: bool) -> str:
    if markdown:
        from pytest_specdecode.report.markdown import render_markdown

        return render_markdown(data).rstrip("\n")
    from pytest_specdecode.report import summary

    return "\n".join(summary.render(data, data.gates.failed))


def _plots(data: Report, plot_dir: Path, path: Path) -> list[Path]:
    from pytest_specdecode.report import plots

    try:
        written = plots.write_plots(data, plot_dir)
    except plots.PlotsUnavailable as exc:
        raise _Failure(str(exc)) from None
    except OSError as exc:
        raise _Failure(
            f"cannot write plots to {str(plot_dir)!r}: {exc.strerror or exc}; "
            "pass a writable directory to --plot"
        ) from None
    except _MALFORMED as exc:
        raise _Failure(f"cannot plot report {str(path)!r} ({type(exc).__name__}: {exc})") from None
    if not written:
        raise _Failure(f"report {str(path)!r} has nothing to plot (no throughput or coding)")
    return written
