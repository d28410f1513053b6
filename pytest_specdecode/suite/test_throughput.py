"""Throughput: one item per context x concurrency case, ``test_throughput[ctx1024-c8]``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_specdecode.throughput.load import BenchmarkLike
    from pytest_specdecode.throughput.runner import ThroughputRunner
    from pytest_specdecode.throughput.workload import ThroughputCase

pytestmark = pytest.mark.throughput


def test_throughput(
    dflash_case: ThroughputCase, dflash_throughput: ThroughputRunner, benchmark: BenchmarkLike
) -> None:
    """Stream the case's requests in rounds through pytest-benchmark."""
    dflash_throughput.run(dflash_case, benchmark)
