"""Running the sandbox as an ordinary user from a root test run.

Two things such a run needs: an interpreter the user may execute, and import
paths the user may read. The checkout and its virtualenv may sit under a
directory only root can enter (a CI clone in a ``mktemp -d`` directory, a
root home): then the packages the user's process imports are copied to a
directory of ``scratch`` that others can read.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# What the unprivileged scripts import, and what it imports (checked by running it).
IMPORTS = (
    "import pytest_specdecode.coding, pytest_specdecode.coding.check, "
    "pytest_specdecode.coding.parallel, pytest_specdecode.coding.sandbox, "
    "pytest_specdecode.coding.warm, hypothesis"
)


NOBODY = 65534


def user() -> tuple[int, str]:
    """(uid, interpreter) to run as: nobody when the tests run as root, else the test's own
    user; skips where that cannot be (no bubblewrap for root, no interpreter nobody may run)."""
    if os.geteuid() != 0:
        return os.geteuid(), sys.executable
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    python = interpreter(NOBODY)
    if python is None:
        pytest.skip(f"no Python {sys.version_info[:2]} that uid {NOBODY} can run")
    return NOBODY, python


def run_as(uid: int, python: str, script: str, args: Any, env: dict[str, str]) -> Any:
    """Run ``script`` (its argv[1]: ``args`` as JSON) as ``uid``; what it printed, as JSON."""
    switch = os.geteuid() == 0
    proc = subprocess.run(
        [python, "-c", script, json.dumps(args)],
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
        timeout=120,
        user=uid if switch else None,
        group=uid if switch else None,
        extra_groups=[] if switch else None,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def interpreter(uid: int) -> str | None:
    """An interpreter of this Python version that ``uid`` can run, or None."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    own = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    for candidate in [own, f"/usr/bin/python{version}"]:
        if not os.path.isfile(candidate):
            continue
        try:
            probe = subprocess.run(
                [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                capture_output=True,
                text=True,
                user=uid,
                group=uid,
                extra_groups=[],
                cwd="/",
            )
        except OSError:  # e.g. under a home the user cannot enter
            continue
        if probe.returncode == 0 and probe.stdout.strip() == version:
            return str(candidate)
    return None


def _others_can_enter(path: Path) -> bool:
    return all(p.stat().st_mode & stat.S_IXOTH for p in [path, *path.parents])


def _tops() -> list[Path]:
    """The top-level packages and modules :data:`IMPORTS` loads outside the standard library
    (a package as its directory)."""
    code = f"{IMPORTS}\nimport sys\n" + (
        "print('\\n'.join(getattr(m, '__file__', None) or '' "
        "for n, m in list(sys.modules.items()) if '.' not in n))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    stdlib = Path(sys.base_prefix).resolve()
    found = []
    for line in filter(None, out.stdout.splitlines()):
        path = Path(line).resolve()
        if "site-packages" in path.parts or not path.is_relative_to(stdlib):
            found.append(path.parent if path.name == "__init__.py" else path)
    return found


def import_path(scratch: Path) -> list[str]:
    """PYTHONPATH entries any user can import ``pytest_specdecode.coding`` and hypothesis
    from: the originals where others can enter them, else copies under ``scratch``."""
    tops = _tops()
    entries = list(dict.fromkeys(top.parent for top in tops))
    if all(_others_can_enter(e) for e in entries):
        return [str(e) for e in entries]
    if not _others_can_enter(scratch):
        raise RuntimeError(f"others cannot enter {scratch}: give a directory they can")
    target = scratch / "importable"
    target.mkdir()
    for top in tops:
        if top.is_dir():
            shutil.copytree(top, target / top.name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(top, target / top.name)
    for path in [target, *target.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return [str(target)]
