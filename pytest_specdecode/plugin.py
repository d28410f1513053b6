"""pytest entry point: options, markers, hooks and fixtures only.

The work lives in plain modules that tests can call without pytest.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("specdecode", "speculative-decoding server benchmarks (pytest-specdecode)")
    group.addoption(
        "--dflash-host",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="Server host to control over SSH; repeat for several hosts. "
        "Without it, the bundled simulator runs on localhost. Default: none",
    )
