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

import copy
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis.strategies import SearchStrategy

from pytest_specdecode.coding.values import show_call
from pytest_specdecode.coding.worker import describe
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


class BadProblem(SpecDecodeError, ValueError):
    """A problem that cannot judge answers; the message is one line naming it."""


# Exceptions no reference raises on purpose: the reference itself is broken.
_BROKEN = (NameError, ImportError, SyntaxError, AttributeError, RecursionError)
_SAMPLES = 5


def validate_problem(problem: Problem) -> None:
    """Refuse a problem that cannot tell a right answer from a wrong one.

    - It needs fixed cases, a strategy or check code: with none, every answer
      would pass ("passed 0 cases").
    - Its reference must load and produce its own fixed cases (without fixed
      cases, a few generated inputs): a reference that raises on all of them,
      or raises NameError/ImportError/AttributeError on any (a typo), would
      pass garbage and fail correct answers.

    Raises :class:`BadProblem` (a ValueError) with one line naming the problem.
    """
    where = f"coding problem {problem.name!r} ({problem.source})"
    if not problem.cases and problem.strategy is None and problem.check is None:
        raise BadProblem(
            f"{where} has nothing to judge an answer by: give it cases, a strategy or check code"
        )
    try:
        reference = problem.reference_function()
    except Exception as exc:
        raise BadProblem(f"{where}: the reference does not load: {describe(exc)}") from None
    inputs = [tuple(c) for c in problem.cases]
    if not inputs and problem.strategy is not None:
        from pytest_specdecode.coding.check import generate_inputs  # hypothesis: loaded late

        inputs = generate_inputs(problem.strategy, _SAMPLES)
    failures: list[str] = []
    for args in inputs:
        try:
            reference(*copy.deepcopy(args))
        except Exception as exc:
            call = show_call(problem.entry_point, args)
            if isinstance(exc, _BROKEN):
                raise BadProblem(
                    f"{where}: its reference fails on {call}: {describe(exc)}; fix the reference"
                ) from None
            failures.append(f"{call} raised {describe(exc)}")
    if inputs and len(failures) == len(inputs):
        raise BadProblem(
            f"{where}: its reference raises on all {len(inputs)} of its inputs "
            f"(first: {failures[0]}); fix the reference"
        )
