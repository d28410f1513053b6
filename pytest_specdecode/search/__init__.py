"""``--dflash-search``: choose the next config from the results so far (Optuna ask/tell).

The tests of every config of the space are collected as a sweep's are; at run
time :mod:`.loop` starts the configs the optimiser (:mod:`.optimizer`) asks
for, feeds back each config's objective (:mod:`.objective`) and skips the
configs it never visits.
"""

from __future__ import annotations

import importlib.util

INSTALL_HINT = "pip install 'pytest-specdecode[search]'"


def missing_optuna() -> str | None:
    """The one line for a search asked for without Optuna (an extra), None with it.

    Looked up, not imported: the check costs nothing and a run that never
    searches never loads Optuna.
    """
    if importlib.util.find_spec("optuna") is not None:
        return None
    return f"--dflash-search needs Optuna, which is not installed: {INSTALL_HINT}"
