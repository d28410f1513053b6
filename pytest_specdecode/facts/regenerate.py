"""Write the option table of one SGLang release from its own wheel.

    python -m pytest_specdecode.facts.regenerate 0.5.23 [--cache DIR]

Downloads ``sglang==VERSION`` without dependencies (``pip download``), unzips
it into the cache, builds its launch parser without torch
(:mod:`pytest_specdecode.facts.realparser`, in a subprocess) and writes
``pytest_specdecode/facts/sglang-VERSION.json``: every option (spellings,
``dest``, action, ``nargs``, type, choices, default, metavar), every
``ServerArgs`` field with its declared default (what ``/server_info`` reports
before resolution), and the keys ``--cuda-graph-config`` allows. Add the new
version to :data:`pytest_specdecode.facts.VERSIONS` afterwards. The data are
facts read from SGLang; the code here is this project's own.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# One wheel for every interpreter: only its Python source is read.
WHEEL_TAGS = ("--python-version", "3.11", "--platform", "manylinux_2_34_x86_64")


def download_wheel(version: str, cache: Path, *, timeout: float = 300.0) -> Path:
    """The unpacked ``sglang/`` folder of ``sglang==version`` (cached)."""
    unpacked = cache / f"sglang-{version}" / "sglang"
    if (unpacked / "srt" / "server_args.py").is_file():
        return unpacked
    wheels = cache / "wheels"
    subprocess.run(
        [
            sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
            "--no-deps", "--only-binary=:all:", *WHEEL_TAGS, "--dest", str(wheels),
            f"sglang=={version}",
        ],
        check=True,
        timeout=timeout,
    )  # fmt: skip
    wheel = next(wheels.glob(f"sglang-{version}-*.whl"))
    target = unpacked.parent
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(target, [n for n in zf.namelist() if n.startswith("sglang/")])
    return unpacked


def jsonable(value: Any) -> Any:
    """``value`` as JSON holds it: a set as a sorted list, anything else as its repr."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [jsonable(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, (set, frozenset)) else items
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    return repr(value)


def option_entry(action: argparse.Action) -> dict[str, Any]:
    """One option of the table, as argparse holds it."""
    kind = type(action).__name__
    entry: dict[str, Any] = {
        "flags": list(action.option_strings),
        "dest": action.dest,
        "action": kind,
        "nargs": action.nargs
        if action.nargs is None or isinstance(action.nargs, (int, str))
        else str(action.nargs),
        "type": getattr(action.type, "__name__", None) if action.type else None,
        "choices": None if action.choices is None else jsonable(list(action.choices)),
        "default": jsonable(action.default),
        "metavar": jsonable(action.metavar),
        "required": bool(action.required),
        "help": (action.help or "")[:160],
    }
    for extra in ("const", "const_value", "new_flag"):
        if getattr(action, extra, None) is not None:
            entry[extra] = jsonable(getattr(action, extra))
    return entry


def table_from(parser: argparse.ArgumentParser, server_args: Any) -> dict[str, Any]:
    """The JSON table of the parser SGLang built (see the module docstring)."""
    import msgspec

    options = [
        option_entry(a)
        for a in parser._actions
        if a.option_strings and not isinstance(a, argparse._HelpAction)
    ]
    fields: dict[str, Any] = {}
    for f in msgspec.structs.fields(server_args.ServerArgs):
        if f.default is not msgspec.NODEFAULT:
            fields[f.name] = jsonable(f.default)
        elif f.default_factory is not msgspec.NODEFAULT:
            fields[f.name] = jsonable(f.default_factory())
        else:
            fields[f.name] = None
    graphs = sys.modules["sglang.srt.model_executor.cuda_graph_config"]
    version = sys.modules["sglang.srt.server_args"].__dict__.get("__version__")
    if version is None:
        version_module = __import__("sglang.version", fromlist=["__version__"])
        version = version_module.__version__
    return {
        "sglang_version": version,
        "source": f"sglang-{version} wheel: ServerArgs.add_cli_args and its fields",
        "prog": parser.prog,
        "options": options,
        "fields": fields,
        "cuda_graph_config_keys": {k: list(v) for k, v in graphs.ALLOWED_KEYS_PER_PHASE.items()},
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("version", help="SGLang release, e.g. 0.5.23")
    p.add_argument("--cache", default=".cache/sglang", help="download and unpack here")
    args = p.parse_args(argv)
    sglang_dir = download_wheel(args.version, Path(args.cache))
    out = HERE / f"sglang-{args.version}.json"
    subprocess.run(
        [sys.executable, "-m", "pytest_specdecode.facts.realparser", str(sglang_dir), "dump",
         str(out)],
        check=True,
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
