"""Hooks that users implement in their ``conftest.py``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_specdecode.coding import Problem


@pytest.hookspec
def pytest_dflash_problems(config: pytest.Config) -> list[Problem] | None:
    """Return extra coding problems to run as ``test_coding[<name>]`` items.

    Every implementation's list is added to the built-in problems (or the
    dataset chosen with ``--dflash-dataset``). Example::

        from pytest_specdecode.coding import Problem

        def pytest_dflash_problems(config):
            return [Problem(name="double", prompt="Write `double(x)` ...", ...)]
    """
