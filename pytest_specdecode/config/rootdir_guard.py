"""A plugin option's value that pytest took for a test path when it chose its rootdir.

pytest picks its rootdir and ini file from the command line's paths before any
plugin is loaded, so before it knows this plugin's options: in
``--dflash-draft-model /models/d`` the value is a word of its own that names an
existing path, and pytest counts it among the test paths. The rootdir becomes an
ancestor of it and the project's ini file (every ``dflash_*`` key in it) is not
read at all; reports, caches and node ids follow the wrong rootdir. A plugin cannot
move pytest's rootdir afterwards, so the run stops before anything starts, with one
line naming the word and the spelling pytest reads right (``--flag=value``). A
value inside the invocation directory is left alone: the search for the ini file
walks up from it through that directory, as it does from the test paths.
"""

from __future__ import annotations

import itertools
import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from pytest_specdecode.config.options import OPTIONS


def valued_flags() -> frozenset[str]:
    """Every spelling of this plugin's options that takes a value (the next word)."""
    return frozenset(
        flag
        for option in OPTIONS
        if option.flag is not None and option.kind != "switch"
        for flag in (option.flag, *option.aliases)
    )


def command_words(args: Sequence[str], environ: Mapping[str, str]) -> list[str]:
    """The words pytest reads for its rootdir: ``PYTEST_ADDOPTS``, then the arguments."""
    try:
        extra = shlex.split(environ.get("PYTEST_ADDOPTS", ""))
    except ValueError:  # pytest itself refuses such a PYTEST_ADDOPTS
        extra = []
    return [*extra, *args]


def misread(
    words: Sequence[str],
    invocation_dir: Path,
    *,
    exists: Callable[[Path], bool] = os.path.exists,
) -> list[tuple[str, str]]:
    """``(flag, value)`` for each value of ours pytest counted as a test path outside the
    invocation directory (a word of its own after the flag, naming an existing path)."""
    valued = valued_flags()
    here = invocation_dir.resolve()
    found = []
    for flag, value in itertools.pairwise(words):
        if flag == "--":  # what follows is test paths only
            break
        if flag not in valued or value.startswith("-"):
            continue
        path = (invocation_dir / value).resolve()
        if exists(path) and here != path and here not in path.parents:
            found.append((flag, value))
    return found


def refusal(found: Sequence[tuple[str, str]], rootdir: Path) -> str | None:
    """The one line for a run whose rootdir such a value moved (None: none did)."""
    if not found:
        return None
    flag, value = found[0]
    more = f" (and {len(found) - 1} more such value(s))" if len(found) > 1 else ""
    return (
        f"pytest read {flag} {value!r}{more} as a test path when it chose its rootdir "
        f"({str(rootdir)!r}) and ini file, before this plugin's options were known, so "
        f"the project's ini file may not have been read: write {flag}={shlex.quote(value)} "
        "(one word), or give --rootdir and -c"
    )


def check(config: pytest.Config, environ: Mapping[str, str] | None = None) -> str | None:
    """The refusal for this run, or None (also when ``--rootdir`` and ``-c`` fix both)."""
    if config.getoption("rootdir", None) and config.getoption("inifilename", None):
        return None
    params = config.invocation_params
    words = command_words(params.args, os.environ if environ is None else environ)
    return refusal(misread(words, params.dir), config.rootpath)
