"""The package's parts and the direction of their imports.

Each part may import only parts of a lower layer, so there is no import
cycle between subpackages; the simulator imports nothing from the plugin
(as SGLang would not), only the neutral ``facts`` data package, which
imports nothing else; ``plugin.py`` stays thin.
"""

from __future__ import annotations

import ast
import difflib
import re
import textwrap
from pathlib import Path
from typing import NamedTuple

import pytest

import pytest_specdecode

PACKAGE = Path(pytest_specdecode.__file__).parent


class Part(NamedTuple):
    """A part's layer (None: apart, the simulator) and what it holds, as CONTRIBUTING shows it."""

    layer: float | None
    says: str


# The parts from the bottom; CONTRIBUTING.md's layout block is generated from this table
# (``python tests/test_layout.py`` rewrites it; test_contributing_shows_the_layout checks it).
PARTS: dict[str, Part] = {
    "__init__": Part(0, "the version"),
    "errors": Part(0, "the one error root: reason, phase, log tail, config"),
    "eventloop": Part(0, "the event loop of the load client and of the simulator (uvloop)"),
    "facts": Part(0, "SGLang's option tables, read from its wheels (shared with the simulator)"),
    "statefiles": Part(
        0.5,
        "every file the plugin reads, bounded (regular files, size and depth caps, one "
        "FileRefused line), and files shared by workers and runs: written whole, waited for",
    ),
    "records": Part(1, "user_properties keys shared by runners and the report"),
    "client": Part(
        1,
        "the SGLang HTTP client: sglang.py (SGLangClient, exported by the package), "
        "limits.py (size caps and whole deadlines for every reply read from a server), "
        "wire.py (reading a reply off the socket within those bounds)",
    ),
    "processes": Part(
        1,
        "children.py (child processes whose pid stays ours until the very end), lineage.py "
        "(every process a launch started, by lineage and marker: a child subreaper)",
    ),
    "output": Part(
        1,
        "what people read: figures.py (30,572 tok/s, 2.31, 1,234.5 ms), progress.py (the "
        "live progress line on the terminal), redact.py (API keys and Authorization headers "
        "masked in every output)",
    ),
    "config": Part(
        2,
        "options, settings, hosts, SpecConfig (spec.py), dialects, collection, "
        "script_template.py (where a script placeholder may sit)",
    ),
    "server": Part(2.5, "what coding/ and throughput/ use of a verified server (below service/)"),
    "service": Part(
        3,
        "controllers (local, systemd, script, external, ssh) and their construction "
        '(base.py: the base with the "unknown" answers; remote.py: the SSH connection '
        "systemd and script share), launch_command.py (endpoint, launch rendering), the "
        "probe, the readiness gate, checks.py (probe, gate, external mode and joins for the "
        "manager), the manager, the handle tests get, switch.py (a shared server's switch), "
        "sharing.py (the lease and placement the manager takes, as protocols; the placement "
        "without workers), retry.py (start retries), dryrun.py, ownership.py (every server "
        "started, recorded and reaped), start_phases.py (what each start cost, from the "
        "server's log lines), weight_cache.py (--dflash-weight-cache: the daemon and its "
        "clients)",
    ),
    "replies": Part(3, "a reply checked against what the server could have produced"),
    # Above the manager, which takes a lease and a placement as service/sharing.py's protocols.
    "distributed": Part(
        3.5,
        "pytest-xdist: run.py (whether workers run; the controller through config.stash), "
        "controller.py (the one controller plugin, registered only with workers), "
        "worker_side.py (a worker's host, lease and placement), lease.py and lease_state.py "
        "(one shared server per host), placement.py (lost hosts), schedule.py and "
        "scheduling.py (one config per host at a time), dispatch.py (ours or xdist's "
        "scheduler), shared_files.py",
    ),
    "coding": Part(
        4,
        "problems, extraction, sandbox (sandbox_base.py: limits, errors and command lines; "
        "layout, cgroup, reaper; warm.py and template.py: the warm sandbox; inflight.py: "
        "stopped at once on an interrupt), verdicts, parallel.py (checks at once), pass@k, "
        "runner.py",
    ),
    "throughput": Part(4, "cases and prompts, load, metrics, comparison, lossless, runner.py"),
    "report": Part(
        5,
        "results, gates, outputs, JSON report, summary, Markdown, plots, cli, resume.py "
        "(--dflash-resume), sweep_progress.py (configs done, time left)",
    ),
    "session": Part(
        6,
        "the registered session object (core.py), composed of parts with one job each: "
        "target.py (hosts, lease, xdist plugin, header), collect.py (parametrisation, order), "
        "collected.py (what the collection tells the terminal, the dry run's plan), "
        "resume_state.py, running.py (each test's guard), sweep.py (progress), calibrate.py, "
        "notices.py, finish.py (exit status, summary), items.py (an item's config and kind); "
        "hookspecs.py (the hooks users implement in their conftest.py) and inert.py (the "
        "plugin stays inert until a run uses it), both light",
    ),
    "search": Part(
        6,
        "--dflash-search: the next config from the results so far (Optuna); distributed.py: "
        "its side under xdist (the scheduler's chooser, a layer above distributed/: it is "
        "the search's own state)",
    ),
    "suite": Part(6, "the built-in tests"),
    "plugin": Part(7, "options, markers, hooks, fixtures (thin)"),
    "sim": Part(
        None,
        "the SGLang-compatible simulator (imports nothing from the plugin but facts/ and "
        "eventloop; a program of its own, so its cli/options/domains/metrics/launch modules "
        "may share a name with a plugin module)",
    ),
}
LAYERS: dict[str, float] = {name: p.layer for name, p in PARTS.items() if p.layer is not None}
# What a layer's heading adds to its number.
LAYER_NOTES: dict[float, str] = {0: "import nothing above them", 0.5: "errors.py only"}
# The most modules the top of the package may hold (issue 36: it had grown from 11 to 19).
TOP_MODULES = 11
CONTRIBUTING = PACKAGE.parent / "CONTRIBUTING.md"
_BLOCK = re.compile(r"^```text\npytest_specdecode/\n.*?^```\n", re.S | re.M)
_NAME_WIDTH = 17
_WIDTH = 92


def layout_block() -> str:
    """CONTRIBUTING.md's layout block, from :data:`PARTS`."""
    lines = ["```text", "pytest_specdecode/"]
    layers = sorted({p.layer for p in PARTS.values() if p.layer is not None})
    for layer in [*layers, None]:
        if layer is None:
            lines.append("  # apart")
        else:
            note = LAYER_NOTES.get(layer)
            lines.append(f"  # layer {layer:g}" + (f": {note}" if note else ""))
        for name, part in PARTS.items():
            if part.layer != layer:
                continue
            shown = f"{name}/" if (PACKAGE / name).is_dir() else f"{name}.py"
            wrapped = textwrap.wrap(
                part.says,
                _WIDTH - 2 - _NAME_WIDTH,
                break_long_words=False,
                break_on_hyphens=False,
            )
            lines.append(f"  {shown:<{_NAME_WIDTH}}{wrapped[0]}")
            lines += [" " * (2 + _NAME_WIDTH) + more for more in wrapped[1:]]
    return "\n".join([*lines, "```"]) + "\n"


def contributing_with_layout(text: str) -> str:
    """``text`` (CONTRIBUTING.md) with its layout block replaced by :func:`layout_block`."""
    found = _BLOCK.search(text)
    if found is None:
        raise SystemExit("CONTRIBUTING.md has no ```text block starting pytest_specdecode/")
    return text[: found.start()] + layout_block() + text[found.end() :]


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


# The session is composed of parts with one job each: no part grows into a second
# session object, and the session's hooks only hand their call to a part.
SESSION_MODULE_LINES = 300
SESSION_FUNCTION_LINES = 45
SESSION_HOOK_LINES = 15


def _length(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    return (node.end_lineno or node.lineno) - node.lineno + 1


def test_the_session_is_built_from_small_parts() -> None:
    parts = PACKAGE / "session"
    assert (parts / "__init__.py").is_file(), "the session is a subpackage of parts (session/)"
    big: dict[str, int] = {}
    for path in sorted(parts.glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        if (lines := len(path.read_text().splitlines())) > SESSION_MODULE_LINES:
            big[path.name] = lines
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                hook = path.name == "core.py" and node.name.startswith("pytest_")
                bound = SESSION_HOOK_LINES if hook else SESSION_FUNCTION_LINES
                if _length(node) > bound:
                    big[f"{path.name}:{node.name}"] = _length(node)
    assert not big, f"session/ parts over their size (move the job into a part): {big}"


def test_parts_are_what_the_package_holds() -> None:
    # Every part listed exists, so the layout CONTRIBUTING shows is the package's.
    gone = [n for n in PARTS if not (PACKAGE / n).is_dir() and not (PACKAGE / f"{n}.py").is_file()]
    assert not gone, f"PARTS lists parts the package no longer holds: {gone}"


def test_contributing_shows_the_layout() -> None:
    text = CONTRIBUTING.read_text()
    wanted = contributing_with_layout(text)
    diff = "\n".join(difflib.unified_diff(text.splitlines(), wanted.splitlines(), lineterm=""))
    assert text == wanted, (
        "CONTRIBUTING.md's layout block is not the one PARTS in tests/test_layout.py gives; "
        f"run `.venv/bin/python tests/test_layout.py` to rewrite it:\n{diff}"
    )


def test_the_top_of_the_package_stays_small() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= TOP_MODULES, (
        f"pytest_specdecode/ holds {len(top)} modules at its top (at most {TOP_MODULES}): "
        f"move one into the subpackage of its concept (or make one): {top}"
    )


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


if __name__ == "__main__":
    CONTRIBUTING.write_text(contributing_with_layout(CONTRIBUTING.read_text()))
    print(f"rewrote the layout block of {CONTRIBUTING}")
