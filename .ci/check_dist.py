"""Check the built sdist and wheel hold what a user needs; exit 1 naming what is missing.

Usage: python .ci/check_dist.py DIST_DIR  (after `python -m build --outdir DIST_DIR`).
"""

from __future__ import annotations

import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

SDIST_NEEDS = (
    "PKG-INFO",
    "README.md",
    "CONTRIBUTING.md",
    "docs/index.md",
    "LICENSE",
    "pyproject.toml",
    "MANIFEST.in",
    "Makefile",
    "pytest_specdecode/py.typed",
    "pytest_specdecode/plugin.py",
    "pytest_specdecode/sim/__main__.py",
    "pytest_specdecode/suite/__init__.py",
    "tests/conftest.py",
    "benchmarks/sim_throughput.py",
    "conftest_examples/pytest.ini",
)
WHEEL_NEEDS = (
    "pytest_specdecode/py.typed",
    "pytest_specdecode/throughput/prompt_set/chat.toml",
    "pytest_specdecode/throughput/prompt_set/README.md",
    "pytest_specdecode/plugin.py",
    "pytest_specdecode/sim/__main__.py",
    "pytest_specdecode/suite/__init__.py",
)
JUNK = ("__pycache__", ".pyc", ".venv/", ".pytest_cache", ".dflash/", ".benchmarks/")


def problems(dist: Path) -> list[str]:
    found: list[str] = []
    sdists, wheels = sorted(dist.glob("*.tar.gz")), sorted(dist.glob("*.whl"))
    if len(sdists) != 1 or len(wheels) != 1:
        return [f"expected one sdist and one wheel in {dist}, found {sdists + wheels}"]
    with tarfile.open(sdists[0]) as tar:
        top = tar.getnames()[0].split("/")[0]
        names = {n.removeprefix(f"{top}/") for n in tar.getnames()}
    found += [f"sdist lacks {n}" for n in SDIST_NEEDS if n not in names]
    found += [f"sdist holds junk: {n}" for n in sorted(names) if any(j in n for j in JUNK)]
    with zipfile.ZipFile(wheels[0]) as whl:
        names = set(whl.namelist())
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        meta = Parser().parsestr(whl.read(f"{info}/METADATA").decode())
        entry_points = whl.read(f"{info}/entry_points.txt").decode()
    found += [f"wheel lacks {n}" for n in WHEEL_NEEDS if n not in names]
    if f"{info}/licenses/LICENSE" not in names:
        found.append("wheel lacks its LICENSE under .dist-info/licenses/")
    found += [f"wheel holds {n}" for n in sorted(names) if n.startswith(("tests/", "benchmarks/"))]
    if meta.get("License-Expression") != "MIT":
        found.append(f"wheel metadata License-Expression is {meta.get('License-Expression')!r}")
    if "specdecode = pytest_specdecode.plugin" not in entry_points:
        found.append("wheel has no pytest11 entry point 'specdecode = pytest_specdecode.plugin'")
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    found = problems(Path(argv[0]))
    for line in found:
        print(f"check_dist: {line}", file=sys.stderr)
    if not found:
        print(f"check_dist: sdist and wheel in {argv[0]} hold what a user needs")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
