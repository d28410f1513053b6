"""Build SGLang's own launch parser from an unpacked wheel, without torch.

Used by :mod:`pytest_specdecode.facts.regenerate` (to write the option table)
and by the real-parser test (to compare the simulator with SGLang). It runs in
a subprocess of its own: it installs stand-in modules for GPU-only packages
(torch, triton, ...) in ``sys.modules``, which must never happen in a pytest
or plugin process.

The method: make ``sglang`` importable without running its ``__init__``
(a bare package object whose ``__path__`` is the wheel's folder), give every
GPU-only import a permissive stand-in so that import-time code runs, then call
``ServerArgs.add_cli_args`` on a plain ``argparse.ArgumentParser``, as
``prepare_server_args`` does. Only ``msgspec`` and ``orjson`` (plus this
project's own dependencies) need to be installed.

Command line (JSON on stdout)::

    python -m pytest_specdecode.facts.realparser SGLANG_DIR parse < cases.json
    python -m pytest_specdecode.facts.realparser SGLANG_DIR dump OUT.json
"""

from __future__ import annotations

import abc
import argparse
import contextlib
import importlib
import importlib.abc
import importlib.machinery
import io
import json
import sys
import types
from collections.abc import Iterator, Sequence
from typing import Any

from pytest_specdecode.facts.regenerate import jsonable, table_from

# Packages SGLang imports at module level that need a GPU, a compiler or a
# large download; none of them decides an option's spelling, type or choices.
STAND_IN_ROOTS = frozenset(
    {
        "torch", "torchvision", "torchaudio", "torchao", "triton", "sgl_kernel",
        "flashinfer", "vllm", "deep_gemm", "flash_attn", "cuda", "nvidia", "pynvml",
        "cutlass", "tvm_ffi", "aiter", "mooncake", "xgrammar", "outlines", "llguidance",
        "compressed_tensors", "safetensors", "dill", "IPython", "pybase64", "psutil",
        "zmq", "pydantic_core", "PIL", "numpy",
    }
)  # fmt: skip
# Attributes a stand-in must NOT have: SGLang probes them to pick a platform.
ABSENT = frozenset({"npu", "musa", "hpu", "mlu"})
PROG = "sglang serve"  # prepare_server_args' parser name, shown in usage and errors


class _Inert:
    """What a stand-in and its class both are: empty, falsy, zero, never ordered,
    and themselves when or-ed (``torch.dtype | None``)."""

    def __iter__(self) -> Iterator[Any]:
        return iter(())

    def __bool__(self) -> bool:
        return False

    def __int__(self) -> int:
        return 0

    __index__ = __int__

    def __float__(self) -> float:
        return 0.0

    def __lt__(self, other: Any) -> bool:
        return False

    __le__ = __gt__ = __ge__ = __lt__

    def _same(self, other: Any) -> Any:
        return self

    __or__ = __ror__ = _same


class _AnyMeta(_Inert, abc.ABCMeta):
    """Class-level behaviour of a stand-in: every attribute exists, nothing is true."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return stand_in(name)

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        # ``@torch.compile`` / ``@torch.no_grad()``-style decorators keep the function.
        if len(args) == 1 and not kwargs and isinstance(args[0], types.FunctionType):
            return args[0]
        return super().__call__(*args, **kwargs)

    def __getitem__(cls, item: Any) -> Any:
        return cls

    def __mro_entries__(cls, bases: tuple[Any, ...]) -> tuple[type, ...]:
        return (cls,)


class _Anything(_Inert, metaclass=_AnyMeta):
    """An instance-level stand-in: callable, indexable, falsy, zero, a context manager."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __init_subclass__(cls, **kwargs: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return stand_in(name)()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and isinstance(args[0], types.FunctionType):
            return args[0]
        return _Anything()

    def __getitem__(self, item: Any) -> Any:
        return _Anything()

    def __len__(self) -> int:
        return 0

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _Inert._same
    __truediv__ = __floordiv__ = __mod__ = __pow__ = __and__ = _Inert._same


def stand_in(name: str) -> type:
    """A fresh stand-in class called ``name``."""
    return _AnyMeta(str(name), (_Anything,), {})


class _StandInModule(types.ModuleType):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.__path__: list[str] = []
        self.__file__ = f"<stand-in for {name}>"
        self.__version__ = "2.9.0"
        self.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)

    def __getattr__(self, name: str) -> Any:
        if (name.startswith("__") and name.endswith("__")) or name in ABSENT:
            raise AttributeError(name)
        value = stand_in(name)
        setattr(self, name, value)
        return value


class _StandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, roots: frozenset[str]) -> None:
        self.roots = roots

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname.partition(".")[0] in self.roots:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _StandInModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def import_server_args(sglang_dir: str) -> Any:
    """``sglang.srt.server_args`` from the unpacked wheel folder ``sglang_dir``."""
    sys.meta_path.insert(0, _StandInFinder(STAND_IN_ROOTS))
    package = types.ModuleType("sglang")
    package.__path__ = [sglang_dir]
    package.__package__ = "sglang"
    sys.modules["sglang"] = package
    return importlib.import_module("sglang.srt.server_args")


def build_parser(server_args: Any) -> argparse.ArgumentParser:
    """SGLang's launch parser, built as ``prepare_server_args`` builds it."""
    parser = argparse.ArgumentParser(prog=PROG)
    server_args.ServerArgs.add_cli_args(parser)
    return parser


def parse_case(parser: argparse.ArgumentParser, argv: Sequence[str]) -> dict[str, Any]:
    """Parse ``argv``: exit status (0 = accepted), the error line, the values given."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            ns = parser.parse_args(list(argv))
    except SystemExit as exc:
        lines = [line for line in err.getvalue().splitlines() if f"{PROG}: error:" in line]
        return {"status": int(exc.code or 0), "error": lines[-1] if lines else ""}
    defaults = {a.dest: a.default for a in parser._actions}
    changed = {k: jsonable(v) for k, v in vars(ns).items() if v != defaults.get(k)}
    return {"status": 0, "error": "", "values": changed}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or args[1] not in ("parse", "dump"):
        print(__doc__, file=sys.stderr)
        return 2
    server_args = import_server_args(args[0])
    parser = build_parser(server_args)
    if args[1] == "parse":
        cases = json.load(sys.stdin)
        json.dump([parse_case(parser, case) for case in cases], sys.stdout)
        return 0
    table = table_from(parser, server_args)
    with open(args[2], "w", encoding="utf-8") as fh:
        json.dump(table, fh, indent=1)
        fh.write("\n")
    print(f"{len(table['options'])} options, {len(table['fields'])} fields -> {args[2]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
