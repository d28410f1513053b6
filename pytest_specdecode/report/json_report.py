"""The JSON run report: written atomically, refreshed after every test.

An interrupted run keeps everything it measured up to the last finished
test: each write goes to a temporary file in the same directory and replaces
the report at once (:mod:`pytest_specdecode.statefiles`), so a reader never sees
half a file.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import json
import os
import platform
import re
import secrets
import subprocess
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import msgspec
import pytest

from pytest_specdecode import __version__, statefiles
from pytest_specdecode.config.load_options import slo_text
from pytest_specdecode.config.settings import Settings
from pytest_specdecode.report.model import FORMAT, Report

# What load() reads; a format-1 file (spaced setting names, dicts keyed by label) is upgraded.
READ_FORMATS = (1, FORMAT)


def metadata(settings: Settings, started: str, cwd: str | os.PathLike[str]) -> dict[str, Any]:
    """Run metadata: versions, start time, target, control mode, dialect, git commit (of
    ``cwd``)."""
    return {
        "format": FORMAT,
        "plugin": __version__,
        "pytest": pytest.__version__,
        "python": platform.python_version(),
        "started": started,
        "hosts": [str(h) for h in settings.hosts] or ["localhost"],
        "control": settings.control,
        "dialect": settings.dialect,
        "launch": settings.launch,
        "simulated": settings.uses_simulator,
        "simulator_defaults": list(settings.sim_defaults),
        "git_commit": git_commit(cwd),
        "settings": result_settings(settings),
    }


def result_settings(settings: Settings) -> dict[str, Any]:
    """The settings that change what a run measures (``--dflash-resume`` compares them):
    how flags are spelled and the server started (the simulator's knobs too), the
    throughput cases and the load they run under, and the coding questions (with a digest
    of each problem file's content; the whole problem set is :func:`problem_set`)."""
    s = settings
    return {
        "dialect": s.dialect,
        "sglang_version": s.sglang_version,
        "launch_line": s.launch if s.control in ("local", "systemd") else None,
        "restart_command": s.restart_cmd,
        "flag_templates": [s.args_template, s.env_template],
        "draft_model": s.draft_model,
        "simulator_arguments": list(s.sim_args),
        "cases": {
            "contexts": list(s.contexts),
            "concurrency": list(s.concurrency),
            "output_tokens": s.output_tokens,
            "rounds": s.rounds,
            "domains": list(s.domains),
            "request_rates": list(s.request_rates),
            "max_concurrency": s.max_concurrency,
            "rate_requests": s.rate_requests,
            "slo": slo_text(s.slo),
        },
        "problems": {
            "dataset": s.dataset,
            "files": [{"path": path, "digest": _digest(path)} for path in s.problem_files],
            "samples": s.samples,
            "temperature": s.temperature,
            "max_tokens": s.max_tokens,
            "api": s.api,
            "system_prompt": s.system_prompt,
            "prompt_template": s.prompt_template,
            "answer_timeout": s.answer_timeout,
        },
    }


def problem_set(problems: Iterable[Any]) -> dict[str, str]:
    """Each coding problem's name and a digest of its definition, whatever its source
    (built in, a dataset, a TOML file, a ``pytest_dflash_problems`` hook): the prompt,
    entry point, reference, cases, strategy, check and preamble; not where it came from."""
    found: dict[str, str] = {}
    for problem in problems:
        parts = [
            problem.prompt,
            problem.entry_point,
            _source(problem.reference),
            repr(problem.cases),
            repr(problem.strategy),
            repr(problem.check),
            problem.preamble,
            problem.completion_prompt,
        ]
        text = _ADDRESS.sub("", "\x00".join(map(str, parts)))
        found[str(problem.name)] = hashlib.sha256(text.encode()).hexdigest()[:16]
    return dict(sorted(found.items()))


def problem_records(found: Mapping[str, str]) -> list[dict[str, str]]:
    """:func:`problem_set` as the report holds it: a list of ``{"name", "digest"}``."""
    return [{"name": name, "digest": value} for name, value in found.items()]


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")  # object addresses differ from run to run


def _source(reference: Any) -> str:
    if isinstance(reference, str):
        return reference
    try:
        return inspect.getsource(reference)
    except (OSError, TypeError):
        return f"{getattr(reference, '__module__', '')}.{getattr(reference, '__qualname__', '')}"


def _digest(path: str) -> str:
    try:
        return hashlib.sha256(statefiles.load_bytes(path)).hexdigest()[:16]
    except statefiles.FileRefused:
        return "unreadable"


def git_commit(cwd: str | os.PathLike[str] = ".") -> str | None:
    """The checked-out commit of ``cwd``'s repository, if there is one."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def stamp(when: datetime) -> str:
    """A run's start time as it goes into file names: ``20261201T121314Z`` (UTC)."""
    return when.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def unique_part() -> str:
    """What no other run can take in a file name: this process's id and a random part."""
    return f"{os.getpid()}-{secrets.token_hex(4)}"


def run_paths(template: str, root: Path, started: datetime) -> tuple[Path, Path | None]:
    """Where this run's report goes: ``(path, copy)``.

    A ``template`` with ``{now}`` (the start time) or ``{n}`` (the next number with
    no file yet, ``0001``) names each run's own file, and there is no copy. Any
    other path is the latest run's report, and the copy beside it is named after
    the start time and a part no other run can take
    (``report-20261201T121314Z-4242-9f3a1c07.json``), so no run overwrites another's.
    These are candidates: :func:`write_new` claims them (two runs may pick one ``{n}``).
    """
    if "{now}" in template or "{n}" in template:
        named = template.replace("{now}", stamp(started))
        for number in itertools.count(1):
            path = root / named.replace("{n}", f"{number:04d}")
            if "{n}" not in named or not path.exists():
                return path, None
    path = root / template
    copy = path.with_name(f"{path.stem}-{stamp(started)}-{unique_part()}{path.suffix or '.json'}")
    return path, copy


def claim_paths(
    template: str, root: Path, started: datetime, data: Report
) -> tuple[Path, Path | None]:
    """:func:`run_paths`, each run's own file claimed by writing ``data`` to it only if
    no other run did first: the next number for ``{n}``, a unique part after ``{now}``
    when another run started in the same second. The latest-report path (no
    placeholder) is not claimed: every run replaces it (atomically)."""
    while True:
        path, copy = run_paths(template, root, started)
        if copy is not None:
            if write_new(copy, data):
                return path, copy
            continue  # pragma: no cover - a random part taken twice
        if write_new(path, data):
            return path, None
        if "{n}" not in template:  # {now}: another run of the same second has it
            unique = path.with_name(f"{path.stem}-{unique_part()}{path.suffix}")
            if write_new(unique, data):
                return unique, None


def write_atomic(path: str | os.PathLike[str], data: Report) -> None:
    """Write ``data`` as JSON to ``path`` so that readers never see a partial file.

    The file gets the usual permissions (0666 less the umask, like any file the
    user writes), not a temporary file's 0600.
    """
    statefiles.write_text(path, _dump(data))


def _dump(data: Report) -> str:
    return json.dumps(data.to_dict(), indent=2, sort_keys=False, default=str) + "\n"


def write_new(path: str | os.PathLike[str], data: Report) -> bool:
    """Write ``data`` to ``path`` as :func:`write_atomic` does, but only if no file has
    that name yet (False then): the whole file appears at once, and of two runs
    choosing one name only one gets it (a hard link never replaces a file)."""
    return statefiles.write_new(path, _dump(data).encode("utf-8"))


def load(path: str | os.PathLike[str]) -> Report:
    """Read a saved report (format 1 read as format 2); ``ValueError`` with a one-line reason
    if it is not one."""
    try:
        data = statefiles.load_json(path)
    except statefiles.FileRefused as exc:
        raise ValueError(f"cannot read report {exc}") from None
    if not isinstance(data, dict) or data.get("format") not in READ_FORMATS:
        raise ValueError(f"{str(path)!r} is not a pytest-specdecode report (format 1 or {FORMAT})")
    # Imported here: only a reader of saved reports needs it.
    from pytest_specdecode.report.upgrade import upgrade

    try:
        return Report.from_dict(upgrade(data))
    except msgspec.ValidationError as exc:
        raise ValueError(f"{str(path)!r} is not a valid pytest-specdecode report: {exc}") from None
