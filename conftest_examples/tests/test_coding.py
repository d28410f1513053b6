"""Coding correctness: every problem (built-in + conftest's) under the default config."""

from __future__ import annotations

import pytest


@pytest.mark.coding
def test_coding(dflash_problem, dflash_coding):
    dflash_coding.check(dflash_problem)
