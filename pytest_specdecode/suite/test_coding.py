"""Coding correctness: one item per problem, ``test_coding[<problem>]``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_specdecode.coding import Problem
    from pytest_specdecode.coding.runner import CodingRunner

pytestmark = pytest.mark.coding


def test_coding(dflash_problem: Problem, dflash_coding: CodingRunner) -> None:
    """Ask the model the problem; the sandboxed answer must match the reference."""
    dflash_coding.check(dflash_problem)
