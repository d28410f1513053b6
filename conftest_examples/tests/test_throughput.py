"""Throughput cases under three draft budgets: a list value runs one config each."""

from __future__ import annotations

import pytest


@pytest.mark.throughput
@pytest.mark.dflash(budget=[4, 8, 16], window=2048)
def test_throughput(dflash_case, dflash_throughput, benchmark):
    dflash_throughput.run(dflash_case, benchmark)
