"""Packaging facts that a build would only reveal on an old setuptools or in CI.

.ci/run builds the sdist and the wheel and checks them for real; these fast
checks keep the declarations consistent in the default test run.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    not (ROOT / "pyproject.toml").exists(), reason="not run from a source tree"
)


def pyproject() -> dict[str, object]:
    data: dict[str, object] = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return data


def test_an_spdx_license_needs_a_setuptools_that_reads_it() -> None:
    data = pyproject()
    project, build = data["project"], data["build-system"]
    assert isinstance(project, dict)
    assert isinstance(build, dict)
    assert isinstance(project["license"], str), "license is an SPDX expression"
    (floor,) = [r for r in build["requires"] if r.startswith("setuptools")]
    found = re.fullmatch(r"setuptools>=(\d+)(\.\d+)*", floor)
    assert found, floor
    # setuptools < 77 rejects `license = "MIT"` (70 fails to build the sdist).
    assert int(found[1]) >= 77, floor


def test_the_license_file_is_declared_and_is_the_mit_text() -> None:
    project = pyproject()["project"]
    assert isinstance(project, dict)
    assert project["license"] == "MIT"
    assert project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License")
    assert 'THE SOFTWARE IS PROVIDED "AS IS"' in text


def test_the_sdist_carries_the_tests_and_the_type_marker() -> None:
    manifest = (ROOT / "MANIFEST.in").read_text(encoding="utf-8").split()
    for folder in ("tests", "benchmarks", "conftest_examples"):
        assert folder in manifest
    assert (ROOT / "pytest_specdecode" / "py.typed").exists()
    data = pyproject()["tool"]
    assert isinstance(data, dict)
    assert "py.typed" in data["setuptools"]["package-data"]["pytest_specdecode"]


def _name(requirement: str) -> str:
    """The distribution a requirement names: ``"plotly>=5.20,<8"`` -> ``"plotly"``."""
    found = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert found, requirement
    return found[0].lower().replace("_", "-")


def test_every_extra_is_in_all_and_dev_and_none_is_a_runtime_dependency() -> None:
    # Dependencies by use (README.md): a pass-rate gate installs nothing it does not
    # use; `all` is every feature extra, and `make test` / `make demo` (dev) use them all.
    project = pyproject()["project"]
    assert isinstance(project, dict)
    extras: dict[str, list[str]] = project["optional-dependencies"]
    runtime = {_name(r) for r in project["dependencies"]}
    features = {k: v for k, v in extras.items() if k not in ("all", "dev")}
    assert {"search", "html", "plot", "humaneval"} <= set(features)
    assert {_name(r) for r in features["search"]} == {"optuna"}
    assert {_name(r) for r in features["html"]} == {"plotly"}
    wanted = sorted(r for v in features.values() for r in v)
    assert sorted(extras["all"]) == wanted
    assert set(wanted) <= set(extras["dev"])
    assert runtime.isdisjoint(_name(r) for r in wanted)
