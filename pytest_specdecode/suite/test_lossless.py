"""Lossless: greedy output under each config equals the non-speculative baseline."""

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
    """Greedy outputs under the config must equal the baseline's, token for token."""
    dflash_lossless.check()
