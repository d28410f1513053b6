"""The package's parts and the direction of their imports.

Each part may import only parts of a lower layer, so there is no import
cycle between subpackages; the simulator imports nothing from the plugin
(as SGLang would not), only the neutral ``facts`` data package, which
imports nothing else; ``plugin.py`` stays thin.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pytest_specdecode

PACKAGE = Path(pytest_specdecode.__file__).parent

LAYERS: dict[str, float] = {
    "__init__": 0,
    "errors": 0,
    "limits": 0,  # size caps and whole deadlines shared by every HTTP path
    "wire": 0,  # reading a reply within those bounds (imports nothing of the plugin)
    "facts": 0,  # data read from SGLang's wheels, shared by the plugin and the simulator
    "statefiles": 0.5,  # files shared between workers and runs: atomic write, bounded read, wait
    "eventloop": 0,  # the event loop of the load client and of the simulator (uvloop)
    "records": 1,
    "redact": 1,
    "figures": 1,
    "children": 1,
    "lineage": 1,  # every process a launch started, by lineage and marker (child subreaper)
    "progress": 1,
    "client": 1,
    "config": 2,
    "server": 2.5,  # what the suites use of a verified server: below the service layer
    "service": 3,
    # leases, placement, scheduling, the xdist controller plugin and the worker side: above
    # the manager (which takes a lease and a placement as service/sharing.py's protocols)
    "distributed": 3.5,
    "replies": 3,  # a reply checked against what the server could have produced
    "coding": 4,
    "throughput": 4,
    "report": 5,
    "hookspecs": 6,
    "session": 6,
    "inert": 6,  # the plugin stays inert until a run uses it (starts the session then)
    "search": 6,  # --dflash-search: the run order of a search (registered by the plugin)
    "plugin": 7,
    "suite": 6,
}


def part_of(module: str) -> str:
    """``pytest_specdecode.service.manager`` -> ``service``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports(path: Path) -> list[tuple[int, str]]:
    """Every ``pytest_specdecode`` module a file imports, at any depth, with its line."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "pytest_specdecode":
                found += [
                    (node.lineno, f"pytest_specdecode.{a.name}")
                    for a in node.names
                    if (PACKAGE / f"{a.name}.py").exists() or (PACKAGE / a.name).is_dir()
                ]
            elif node.module.startswith("pytest_specdecode."):
                found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [
                (node.lineno, a.name) for a in node.names if a.name.startswith("pytest_specdecode")
            ]
    return found


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_part_has_a_layer() -> None:
    parts = {
        part_of(".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts)) for p in modules()
    }
    assert parts - {"sim"} <= set(LAYERS), parts - set(LAYERS)


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down(path: Path) -> None:
    here = part_of(".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts))
    wrong = []
    for line, target in imports(path):
        there = part_of(target)
        if here == "sim":
            if there not in ("sim", "facts", "eventloop"):
                wrong.append(f"line {line}: the simulator imports {target}")
        elif here == "facts" and there != "facts":
            wrong.append(f"line {line}: facts (neutral data) imports {target}")
        elif there == "sim" and here not in ("session", "plugin"):
            wrong.append(f"line {line}: {target} (the plugin only runs the simulator)")
        elif there != here and there != "__init__" and LAYERS.get(there, 99) >= LAYERS[here]:
            wrong.append(f"line {line}: {here} imports {target} ({there} is not below it)")
    assert not wrong, "\n".join(wrong)


def test_plugin_is_thin() -> None:
    tree = ast.parse((PACKAGE / "plugin.py").read_text())
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    long = {
        f.name: (f.end_lineno or f.lineno) - f.lineno + 1
        for f in functions
        if (f.end_lineno or f.lineno) - f.lineno + 1 > 30
    }
    assert not long, f"plugin.py functions over 30 lines (move the work out): {long}"
    assert not [n for n in tree.body if isinstance(n, ast.ClassDef)], "plugin.py defines classes"


# Names two plugin modules may share, because they mean the same thing in each part.
SHARED_NAMES = {
    "runner.py": "coding/runner.py and throughput/runner.py: the runner of that part's fixture",
}


def test_module_names_do_not_repeat_across_parts() -> None:
    # The simulator is a program of its own (it mirrors SGLang's modules): it is not counted.
    seen: dict[str, list[str]] = {}
    for path in modules():
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] == "sim" or path.name in ("__init__.py", "__main__.py"):
            continue
        seen.setdefault(path.name, []).append(str(rel))
    repeated = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert set(repeated) <= set(SHARED_NAMES), {
        n: p for n, p in repeated.items() if n not in SHARED_NAMES
    }


# Parts that take a server as :class:`pytest_specdecode.server.Server`, never the service layer.
SUITES = ("coding", "throughput")


@pytest.mark.parametrize(
    "path",
    [p for p in modules() if p.relative_to(PACKAGE).parts[0] in SUITES],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_suites_never_import_the_service_layer(path: Path) -> None:
    wrong = [
        f"line {line}: {target}" for line, target in imports(path) if part_of(target) == "service"
    ]
    assert not wrong, "\n".join(wrong)


# Plugins of pytest and xdist, looked up by the names they registered under; the
# plugin's own objects are found through ``config.stash`` (a typed key), never by name.
FOREIGN_PLUGINS = {"terminalreporter", "xdist"}
LOOKUPS = {"get_plugin", "getplugin", "hasplugin", "has_plugin"}


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_plugin_of_ours_is_looked_up_by_name(path: Path) -> None:
    wrong = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in LOOKUPS
        ):
            continue
        name = node.args[0] if node.args else None
        if not (isinstance(name, ast.Constant) and name.value in FOREIGN_PLUGINS):
            wrong.append(f"line {node.lineno}: {ast.unparse(node)} (use a pytest.StashKey)")
    assert not wrong, "\n".join(wrong)
