"""Lossless: greedy output under each config matches the NONE baseline's, up to numerics."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_specdecode.throughput.runner import LosslessChecker

pytestmark = pytest.mark.lossless


@pytest.mark.dflash(algorithm="NONE")
def test_lossless_baseline(dflash_lossless: LosslessChecker) -> None:
    """Record greedy outputs without speculative decoding (runs first)."""
    dflash_lossless.check()


def test_lossless(dflash_lossless: LosslessChecker) -> None:
    """Greedy outputs under the config must match the baseline's: a first divergence
    at a near tie is engine numerics, any other is a defect and fails."""
    dflash_lossless.check()
