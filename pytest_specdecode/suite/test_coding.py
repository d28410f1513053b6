"""Coding correctness: one item per problem, ``test_coding[<problem>]``."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.coding


def test_coding(dflash_problem: Any, dflash_coding: Any) -> None:
    """Ask the model the problem; the sandboxed answer must match the reference."""
    dflash_coding.check(dflash_problem)
