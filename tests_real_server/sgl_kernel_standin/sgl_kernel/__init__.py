"""The project's stand-in for ``sgl_kernel`` (SGLang's CUDA/CPU kernel package).

SGLang 0.5.23 imports ``sgl_kernel`` (and names from it and its submodules)
at start-up even on its CPU path, but for an fp32 Llama served with
``--device cpu --attention-backend torch_native`` on a CPU without AMX it
calls none of them. The real package is a GPU build of several hundred MB;
this one lets the imports succeed and makes any call fail loudly, naming the
kernel, so a code path that does need a real kernel says so instead of
computing something wrong.

Every attribute of this package and of any ``sgl_kernel.<sub>`` module is a
:class:`Missing` placeholder: attribute access and subscripting give further
placeholders (``scalar_types.uint4b8`` at import time works), calling one
raises :class:`StandInKernelCalled`.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Sequence
from typing import Any

__version__ = "0.0.0+specdecode.standin"
STANDIN = True


class StandInKernelCalled(RuntimeError):
    """A kernel of the stand-in ``sgl_kernel`` was called: this path needs the real package."""


class Missing:
    """A name of ``sgl_kernel`` that exists only to be imported."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return f"<sgl_kernel stand-in {self._name}>"

    def __getattr__(self, attr: str) -> Missing:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return Missing(f"{self._name}.{attr}")

    def __getitem__(self, key: object) -> Missing:
        return Missing(f"{self._name}[{key!r}]")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise StandInKernelCalled(
            f"{self._name} was called, but sgl_kernel here is pytest-specdecode's stand-in "
            "(tests_real_server/sgl_kernel_standin), which has no kernels: this model or "
            "option needs the real sglang-kernel package"
        )

    def __bool__(self) -> bool:
        # `if some_kernel_available:` checks must read "not available".
        return False


def _placeholder_module(name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__path__ = []  # a package, so deeper submodules import too

    def __getattr__(attr: str) -> Missing:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return Missing(f"{name}.{attr}")

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    return module


class _Submodules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds every ``sgl_kernel.<anything>`` as a placeholder module."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.startswith(__name__ + "."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _placeholder_module(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def __getattr__(attr: str) -> Missing:
    if attr.startswith("__") and attr.endswith("__"):
        raise AttributeError(attr)
    return Missing(f"sgl_kernel.{attr}")


if not any(isinstance(f, _Submodules) for f in sys.meta_path):
    sys.meta_path.insert(0, _Submodules())
