"""A coding problem: what the model is asked and how its answer is judged.

Users add problems from Python (e.g. in conftest) by constructing
:class:`Problem` directly; ``reference`` may be a function or source text::

    from pytest_specdecode.coding import Problem, args_strategy

    def add(a, b):
        return a + b

    ADD = Problem(
        name="add",
        prompt="Write a Python function `add(a, b)` that returns the sum of two integers.",
        entry_point="add",
        reference=add,                 # or "def add(a, b):\\n    return a + b\\n"
        cases=((1, 2), (0, 0)),        # fixed argument tuples
        strategy=args_strategy("int", "int"),   # or any hypothesis strategy of tuples
    )

The reference runs in the test process (it is trusted); the candidate runs in
the sandbox. Expected values always come from the reference, so ``cases``
hold arguments only.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis.strategies import SearchStrategy

from pytest_specdecode.errors import SpecDecodeError

ArgsStrategy = SearchStrategy[tuple[Any, ...]]


@dataclass(frozen=True, eq=False)
class Problem:
    """One coding problem.

    - ``name``: test id part (``test_coding[gcd]``); unique in a suite.
    - ``prompt``: the task text shown to a chat model; names ``entry_point`` and its signature.
    - ``entry_point``: the function the answer must define.
    - ``reference``: a correct solution, as a callable or Python source defining ``entry_point``.
    - ``cases``: fixed argument tuples, checked before the generated ones.
    - ``strategy``: hypothesis strategy producing argument tuples, or None (fixed cases only).
    - ``check``: HumanEval-style source defining ``check(candidate)``; runs in the
      test process with ``candidate`` forwarding each call to the sandbox.
    - ``preamble``: source run in the sandbox before the answer (HumanEval: the
      prompt's imports and helper functions).
    - ``completion_prompt``: text for plain-completion endpoints; the answer to
      check is then ``completion_prompt + completion``.
    - ``source``: ``"builtin"``, ``"humaneval"``, a TOML path or ``"python"``.
    """

    name: str
    prompt: str
    entry_point: str
    reference: str | Callable[..., Any]
    cases: tuple[tuple[Any, ...], ...] = ()
    strategy: ArgsStrategy | None = None
    check: str | None = None
    preamble: str = ""
    completion_prompt: str = ""
    source: str = "python"

    def reference_function(self) -> Callable[..., Any]:
        """The reference as a callable (source is executed once and cached)."""
        if callable(self.reference):
            return self.reference
        return _compile_reference(self.preamble + "\n" + self.reference, self.entry_point)


class BadReference(SpecDecodeError, ValueError):
    """The reference source does not define its entry point."""


@functools.lru_cache(maxsize=512)
def _compile_reference(source: str, entry_point: str) -> Callable[..., Any]:
    namespace: dict[str, Any] = {"__name__": f"reference_{entry_point}"}
    exec(compile(source, f"<reference {entry_point}>", "exec"), namespace)
    func = namespace.get(entry_point)
    if not callable(func):
        raise BadReference(f"the reference does not define a function {entry_point!r}")
    return func  # type: ignore[no-any-return]
