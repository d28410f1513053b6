"""Throughput: one item per context x concurrency case, ``test_throughput[ctx1024-c8]``."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.throughput


def test_throughput(dflash_case: Any, dflash_throughput: Any, benchmark: Any) -> None:
    """Stream the case's requests in rounds through pytest-benchmark."""
    dflash_throughput.run(dflash_case, benchmark)
