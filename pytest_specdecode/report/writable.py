"""Output paths checked before any test runs, so a bad one is a usage error, not a lost run.

A run that writes its report into a path that cannot be created (a parent that
is a file, a read-only directory) would otherwise find out after hours of
measuring. What can be known up front is checked here; what fails later (the
disk fills, a directory is removed) is one warning line in the summary
(:class:`~pytest_specdecode.report.outputs.RunOutputs`), never an internal error.
"""

from __future__ import annotations

import os
from pathlib import Path

from pytest_specdecode.config.spec import ConfigError


def _existing_ancestor(path: Path) -> Path:
    current = path
    while not current.exists() and current != current.parent:
        current = current.parent
    return current


def check_dir(option: str, path: Path, *, target: Path | None = None) -> None:
    """:class:`ConfigError` unless ``path`` is a directory that exists or can be made,
    and files can be created in it (``target``: the file meant to go there)."""
    shown = str(target or path)
    found = _existing_ancestor(path)
    if not found.is_dir():
        raise ConfigError(
            f"{option}: cannot create {shown!r}: {str(found)!r} is a file, not a directory"
        )
    if not os.access(found, os.W_OK | os.X_OK):
        raise ConfigError(
            f"{option}: cannot create {shown!r}: no permission to write in {str(found)!r}"
        )


def check_file(option: str, path: Path) -> None:
    """:class:`ConfigError` unless a file can be written at ``path`` (replaced if it exists)."""
    if path.is_dir():
        raise ConfigError(f"{option}: {str(path)!r} is a directory; give a file path")
    check_dir(option, path.parent, target=path)
