"""Speculative decoding must not change greedy output."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.lossless


@pytest.mark.dflash(algorithm="NONE")
def test_lossless_baseline(dflash_lossless):
    dflash_lossless.check()


def test_lossless(dflash_lossless):
    dflash_lossless.check()
