"""Every import path the docs give users still imports.

Conftests copy what README.md, docs/*.md and conftest_examples/ show:
``from pytest_specdecode.coding import Problem``, a backticked
``pytest_specdecode.coding.Problem``, the README's "Import paths for
conftests" list, ``python -m pytest_specdecode.sim``, ``--pyargs
pytest_specdecode.suite`` and the ``pytest_dflash_*`` hooks. The paths are
read from those files, so moving a module or renaming a class without
updating the docs (or keeping the old path) fails here.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from pathlib import Path

import pytest

from pytest_specdecode.session import hookspecs

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
EXAMPLES = sorted((ROOT / "conftest_examples").rglob("*.py"))

_MODULE = r"pytest_specdecode(?:\.\w+)*"
# `pytest_specdecode.coding` (`Problem`, `builtin_problems`, ...), or a bare `pytest_specdecode.x.Y`
_BACKTICKED = re.compile(rf"`({_MODULE})`(?:\s*\(([^)]*)\))?")
_COMMAND = re.compile(rf"(?:python -m|--pyargs|-p)\s+({_MODULE})")
_PROGRAM = re.compile(rf"python -m\s+({_MODULE})")
_HOOK = re.compile(r"\b(pytest_dflash_\w+)\b")
_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)


def _code_imports(source: str) -> set[tuple[str, str]]:
    """``(module, name)`` for every ``from pytest_specdecode... import name``; name "" for
    ``import pytest_specdecode...``. Blocks that are not Python are skipped line by line."""
    found: set[tuple[str, str]] = set()
    for line in source.splitlines():
        if "pytest_specdecode" not in line or not line.lstrip().startswith(("from ", "import ")):
            continue
        for node in ast.walk(ast.parse(line.strip())):
            if isinstance(node, ast.ImportFrom) and node.module:
                found |= {(node.module, a.name) for a in node.names}
            elif isinstance(node, ast.Import):
                found |= {(a.name, "") for a in node.names}
    return found


def documented() -> dict[tuple[str, str], str]:
    """``(module or dotted name, attribute)`` -> where it is documented."""
    paths: dict[tuple[str, str], str] = {}
    for doc in DOCS:
        text = doc.read_text()
        where = str(doc.relative_to(ROOT))
        for block in _FENCE.findall(text):
            for path in _code_imports(block):
                paths.setdefault(path, where)
        prose = _FENCE.sub("", text)
        for dotted, names in _BACKTICKED.findall(prose):
            paths.setdefault((dotted, ""), where)
            for name in re.findall(r"`(\w+)`", names):
                paths.setdefault((dotted, name), where)
        for dotted in _COMMAND.findall(text):
            paths.setdefault((dotted, ""), where)
    for example in EXAMPLES:
        for path in _code_imports(example.read_text()):
            paths.setdefault(path, str(example.relative_to(ROOT)))
    return paths


def resolve(dotted: str, name: str) -> object:
    """The module ``dotted`` (or the attribute it names), then its attribute ``name``."""
    try:
        obj: object = importlib.import_module(dotted)
    except ModuleNotFoundError:
        parent, _, attr = dotted.rpartition(".")
        obj = getattr(importlib.import_module(parent), attr)
    return getattr(obj, name) if name else obj


def test_the_docs_yield_the_paths_users_write() -> None:
    paths = documented()
    # The extraction must find what is known to be documented, or the test below is vacuous.
    for known in [
        ("pytest_specdecode.coding", "Problem"),
        ("pytest_specdecode.coding", "args_strategy"),
        ("pytest_specdecode.config", "SpecConfig"),
        ("pytest_specdecode.client", "SGLangClient"),
        ("pytest_specdecode.coding.Problem", ""),
        ("pytest_specdecode.sim", ""),
        ("pytest_specdecode.suite", ""),
    ]:
        assert known in paths, f"{known} not found in the docs (the extraction broke?)"


_DOCUMENTED = sorted(documented().items())


@pytest.mark.parametrize(
    ("path", "where"),
    _DOCUMENTED,
    ids=[f"{where}:{'.'.join(p for p in path if p)}" for path, where in _DOCUMENTED],
)
def test_a_documented_path_imports(path: tuple[str, str], where: str) -> None:
    dotted, name = path
    try:
        resolve(dotted, name)
    except (ImportError, AttributeError) as exc:
        shown = f"from {dotted} import {name}" if name else dotted
        pytest.fail(f"{where} documents {shown!r}, which fails: {exc}")


def test_documented_programs_can_run() -> None:
    # `python -m X` needs X/__main__.py or a main guard in X.py.
    programs = {m for doc in DOCS for m in _PROGRAM.findall(doc.read_text())}
    assert "pytest_specdecode.sim" in programs
    for dotted in sorted(programs):
        spec = importlib.util.find_spec(dotted)
        assert spec is not None, dotted
        assert spec.origin is not None, dotted
        if spec.submodule_search_locations:
            assert importlib.util.find_spec(f"{dotted}.__main__") is not None, dotted
        else:
            assert "__main__" in Path(spec.origin).read_text(), dotted


def test_documented_hooks_exist() -> None:
    hooks = {h for doc in DOCS for h in _HOOK.findall(doc.read_text())}
    hooks |= {h for ex in EXAMPLES for h in _HOOK.findall(ex.read_text())}
    assert "pytest_dflash_problems" in hooks
    missing = sorted(h for h in hooks if not hasattr(hookspecs, h))
    assert not missing, f"hooks documented but not in hookspecs.py: {missing}"
