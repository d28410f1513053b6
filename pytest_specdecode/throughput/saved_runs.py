"""The saved runs beside a compared one: what the compare gate knows of noise across restarts.

pytest-benchmark keeps every ``--benchmark-save``/``--benchmark-autosave`` run
of a machine in one folder (``<storage>/<machine-id>/NNNN_<name>.json``); the
run a gate compares with is one of them. Each holds one server start's level
for each case, so the same config and case across those files show how far
runs differ from start to start, beyond any one run's rounds. This module
reads them into :data:`~pytest_specdecode.throughput.comparison.History`;
:func:`~pytest_specdecode.throughput.comparison.judge` turns them into the
between-run interval. Files that cannot be read are left out (an old or
hand-edited file must not stop a gate that has its own baseline), and so is
every run measured elsewhere (:mod:`~pytest_specdecode.throughput.fingerprint`);
the gate line counts them and says why.
"""

from __future__ import annotations

from pathlib import Path

from pytest_specdecode.throughput.comparison import CaseRow, CompareError, History, load_run

PATTERN = "[0-9][0-9][0-9][0-9]_*.json"


def saved_run_files(compared: Path) -> list[Path]:
    """The saved runs in the compared run's folder, the compared one included."""
    found = sorted(compared.parent.glob(PATTERN))
    if not any(p.resolve() == compared.resolve() for p in found):
        found.append(compared)  # a --dflash-compare PATH outside pytest-benchmark's storage
    return found


def history(files: list[Path]) -> History:
    """Rows by (pairing key, config), one per readable file that has the case; the
    files that cannot be read are counted (the gate line says how many it left out)."""
    out: dict[tuple[str, str], list[CaseRow]] = {}
    unreadable = 0
    for path in files:
        try:
            rows = load_run(path)
        except CompareError:
            unreadable += 1
            continue
        seen: set[tuple[str, str]] = set()
        for row in rows:
            key = (row.key, row.config)
            if key not in seen:  # a file holding a case twice counts as one run
                seen.add(key)
                out.setdefault(key, []).append(row)
    return History(out, unreadable)


def load_history(compared: Path) -> History:
    """:func:`history` of :func:`saved_run_files`."""
    return history(saved_run_files(compared))
