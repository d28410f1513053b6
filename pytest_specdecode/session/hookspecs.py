"""Hooks that users implement in their ``conftest.py``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_specdecode.coding import Problem


@pytest.hookspec
def pytest_dflash_problems(config: pytest.Config) -> list[Problem] | None:
    """Return extra coding problems to run as ``test_coding[<name>]`` items.

    Implement it in a ``conftest.py`` (or a plugin). Every implementation's
    list is added to the built-in problems (or the dataset chosen with
    ``--dflash-dataset``) and to those of ``--dflash-problems`` files; names
    must be unique. Each problem is validated at collection (its reference must
    load and run on its own cases). Return None to add nothing. Example::

        from pytest_specdecode.coding import Problem, args_strategy

        def pytest_dflash_problems(config):
            return [
                Problem(
                    name="double",
                    prompt="Write a Python function `double(x: int) -> int` returning 2 * x.",
                    entry_point="double",
                    reference="def double(x):\n    return 2 * x\n",
                    cases=((1,), (0,)),
                    strategy=args_strategy("int"),
                )
            ]
    """
