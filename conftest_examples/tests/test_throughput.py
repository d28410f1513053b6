"""Throughput under three draft budgets and the non-speculative baseline.

A list value runs one config each; algorithm NONE is the baseline every
speculative config's speedup is measured against (baseline TPOT / config
TPOT, same case and domain), and the verdict picks the best config per load
and domain among those that passed every gate.
"""

from __future__ import annotations

import pytest


@pytest.mark.throughput
@pytest.mark.dflash(algorithm=["NONE", "DFLASH"], budget=[4, 8, 16], window=2048)
def test_throughput(dflash_case, dflash_throughput, benchmark):
    dflash_throughput.run(dflash_case, benchmark)
