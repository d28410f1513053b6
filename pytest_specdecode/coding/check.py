"""The verdict on one answer: differential testing against the reference.

The parent decides everything. The sandboxed worker only evaluates
``entry_point(*args)`` for argument tuples sent to it and returns plain data;
the parent runs the (trusted) reference on the same arguments and compares.
Exit codes, stdout and anything the candidate does to the worker cannot turn a
wrong answer into a pass: to pass, the answers must be right.

Order: fixed cases, then ``examples`` hypothesis-generated inputs (derandomized,
no database, no deadline), sent as one batch. On the first mismatch among the
generated inputs, hypothesis re-runs with round trips to the same worker and
shrinks, so the report is ``gcd(0, 0) returned 1, expected 0``. HumanEval-style
``check(candidate)`` code then runs in the parent with ``candidate`` forwarding
calls to the worker.
"""

from __future__ import annotations

import builtins
import contextlib
import copy
import os
import random
import threading
import time
import traceback
import types
import warnings
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from hypothesis import HealthCheck, Phase, Verbosity, given, settings

from pytest_specdecode.coding.extract import ExtractionTimeout, extract_code
from pytest_specdecode.coding.problem import ArgsStrategy, Problem
from pytest_specdecode.coding.sandbox import Limits, Sandbox, SandboxError, SandboxTimeout
from pytest_specdecode.coding.values import (
    difference,
    normalize,
    one_line,
    same,
    show,
    show_call,
)
from pytest_specdecode.coding.warm import SandboxPool
from pytest_specdecode.coding.worker import describe

Status = Literal["passed", "failed", "timeout", "no-code", "error"]


@dataclass(frozen=True)
class Verdict:
    """The outcome for one answer; ``reason`` is one printable line.

    Reason and counterexample carry text the answer wrote (exception messages,
    reprs): they are made printable here, so no verdict can carry an escape
    sequence to a terminal or a report.
    """

    passed: bool
    status: Status
    reason: str
    counterexample: str | None = None
    duration: float = 0.0
    cases: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "reason", one_line(self.reason, 600))
        if self.counterexample is not None:
            object.__setattr__(self, "counterexample", one_line(self.counterexample, 600))


@dataclass(frozen=True)
class _Outcome:
    """What a call did: returned ``value`` or raised (``error`` = "Type: message")."""

    value: Any = None
    error: str | None = None

    def show(self) -> str:
        return f"raised {self.error}" if self.error is not None else f"returned {show(self.value)}"

    def expectation(self) -> str:
        if self.error is not None:
            return f"expected it to raise {self.error.split(':')[0]}"
        return f"expected {show(self.value)}"


class _Mismatch(Exception):
    pass


class _Stop(BaseException):
    """The sandbox timed out or broke; not catchable by ``except Exception`` in check code."""

    def __init__(self, error: SandboxError, call: str | None) -> None:
        super().__init__(str(error))
        self.error = error
        self.call = call  # None while loading the code


def _reference(func: Callable[..., Any], args: tuple[Any, ...]) -> _Outcome:
    try:
        return _Outcome(normalize(func(*copy.deepcopy(args))))
    except Exception as exc:
        return _Outcome(error=f"{type(exc).__name__}: {exc}")


def _candidate(ok: bool, payload: Any) -> _Outcome:
    return _Outcome(payload) if ok else _Outcome(error=payload)


def _agree(expected: _Outcome, actual: _Outcome) -> bool:
    if expected.error is not None or actual.error is not None:
        return (
            expected.error is not None
            and actual.error is not None
            and expected.error.split(":")[0] == actual.error.split(":")[0]
        )
    return same(expected.value, actual.value)


def _settings(examples: int, phases: Sequence[Phase]) -> settings:
    return settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        phases=phases,
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
        report_multiple_bugs=False,
        print_blob=False,
    )


# Hypothesis runs and warnings.catch_warnings() are process-wide: one at a time
# when answers are judged in parallel threads.
_HYPOTHESIS = threading.RLock()


def _run_hypothesis(
    strategy: ArgsStrategy, examples: int, phases: Sequence[Phase], body: Callable[[Any], None]
) -> None:
    # One test function for generating and for shrinking, so derandomized runs
    # draw the same inputs in the same order.
    def run(args: Any) -> None:
        body(args)

    with _HYPOTHESIS, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _settings(examples, phases)(given(strategy)(run))()


# Derandomized generation gives the same inputs every time: one run per
# strategy (with pass@k the k answers to a problem share it; it costs more than
# checking a warm answer), and the reference's outcomes on them once per problem.
_INPUTS: dict[tuple[int, int], tuple[ArgsStrategy, list[tuple[Any, ...]]]] = {}
_EXPECTED: weakref.WeakKeyDictionary[Problem, dict[int, list[_Outcome]]] = (
    weakref.WeakKeyDictionary()
)


def generate_inputs(strategy: ArgsStrategy, examples: int) -> list[tuple[Any, ...]]:
    """The derandomized inputs hypothesis draws for ``strategy`` (reproducible; cached)."""
    with _HYPOTHESIS:
        cached = _INPUTS.get((id(strategy), examples))
        if cached is None or cached[0] is not strategy:
            out: list[tuple[Any, ...]] = []
            _run_hypothesis(strategy, examples, [Phase.generate], lambda a: out.append(tuple(a)))
            cached = _INPUTS[id(strategy), examples] = (strategy, out)
        return list(cached[1])


def _expected(problem: Problem, examples: int, inputs: list[tuple[Any, ...]]) -> list[_Outcome]:
    """The reference's outcomes on ``inputs`` (the problem's for ``examples``), once."""
    with _HYPOTHESIS:
        known = _EXPECTED.setdefault(problem, {})
        if examples not in known or len(known[examples]) != len(inputs):
            reference = problem.reference_function()
            known[examples] = [_reference(reference, args) for args in inputs]
        return known[examples]


def _shrink(
    problem: Problem,
    sandbox: Sandbox,
    reference: Callable[..., Any],
    examples: int,
) -> tuple[tuple[Any, ...], _Outcome, _Outcome] | None:
    """Smallest failing input hypothesis finds with round trips, or None."""
    assert problem.strategy is not None
    found: list[tuple[tuple[Any, ...], _Outcome, _Outcome]] = []
    broken = False

    def body(raw: Any) -> None:
        nonlocal broken
        args = tuple(raw)
        if broken:
            return
        expected = _reference(reference, args)
        try:
            actual = _candidate(*sandbox.call(args))
        except SandboxError:
            broken = True  # keep what was found; the deadline or a crash ends shrinking
            return
        if not _agree(expected, actual):
            found.append((args, expected, actual))
            raise _Mismatch

    with contextlib.suppress(Exception):
        _run_hypothesis(problem.strategy, examples, [Phase.generate, Phase.shrink], body)
    return found[-1] if found else None


def _differential(problem: Problem, sandbox: Sandbox, examples: int) -> tuple[Verdict | None, int]:
    fixed = [tuple(c) for c in problem.cases]
    strategy = problem.strategy if examples > 0 else None
    generated = generate_inputs(strategy, examples) if strategy is not None else []
    inputs = fixed + generated
    expected = _expected(problem, examples, inputs)
    if not inputs:
        return None, 0
    try:
        ids = [sandbox.submit(args) for args in inputs]
    except SandboxError as exc:  # defensive: submit only writes, but the pipe may be gone
        raise _Stop(exc, show_call(problem.entry_point, inputs[0])) from None
    for index, (args, call_id) in enumerate(zip(inputs, ids, strict=True)):
        call = show_call(problem.entry_point, args)
        try:
            actual = _candidate(*sandbox.result(call_id))
        except SandboxError as exc:
            raise _Stop(exc, call) from None
        if _agree(expected[index], actual):
            continue
        bad, want, got = args, expected[index], actual
        if index >= len(fixed):
            try:
                sandbox.drain()
            except SandboxError as exc:
                raise _Stop(exc, call) from None
            shrunk = _shrink(problem, sandbox, problem.reference_function(), examples)
            if shrunk is not None:
                bad, want, got = shrunk
        shown = show_call(problem.entry_point, bad)
        hint = difference(want.value, got.value) if want.error is None and got.error is None else ""
        reason = f"{shown} {got.show()}, {want.expectation()}{hint}"
        return Verdict(False, "failed", reason, shown), index + 1
    return None, len(inputs)


def _failure_line(exc: BaseException, source: str) -> str:
    lines = source.splitlines()
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename == "<check>" and frame.lineno and frame.lineno <= len(lines):
            return " ".join(lines[frame.lineno - 1].split())[:160]
    return ""


def _run_check(problem: Problem, sandbox: Sandbox) -> Verdict | None:
    assert problem.check is not None
    last: list[str] = []

    def candidate(*args: Any) -> Any:
        call = show_call(problem.entry_point, args)
        try:
            ok, payload = sandbox.call(args)
        except SandboxError as exc:
            raise _Stop(exc, call) from None
        outcome = _candidate(ok, payload)
        last[:] = [f"{call} {outcome.show()}"]
        if not ok:
            raise RuntimeError(f"{call} raised {payload}")
        return payload

    # Some dataset checks draw from the global `random`: theirs is seeded for
    # reproducible runs and private, so checks in parallel threads neither race
    # nor touch the test process's own.
    namespace: dict[str, Any] = {"__name__": "__check__", "__builtins__": _check_builtins()}
    exec(compile(problem.preamble, "<preamble>", "exec"), namespace)
    # Some checks call the function by name (HumanEval/33): that is the candidate too.
    namespace[problem.entry_point] = candidate
    exec(compile(problem.check, "<check>", "exec"), namespace)
    try:
        namespace["check"](candidate)
    except _Stop:
        raise
    except Exception as exc:
        where = _failure_line(exc, problem.check)
        what = f"`{where}`" if where else type(exc).__name__
        detail = f" ({last[0]})" if last else ""
        return Verdict(
            False, "failed", f"check failed at {what}{detail}", last[0] if last else None
        )
    return None


def _seeded_random() -> types.ModuleType:
    """A ``random`` module whose functions draw from a private ``Random(0)``."""
    private = random.Random(0)
    module = types.ModuleType("random", random.__doc__)
    for name, value in vars(random).items():
        shared = isinstance(value, types.MethodType) and value.__self__ is random._inst
        setattr(module, name, getattr(private, name) if shared else value)
    return module


def _check_builtins() -> dict[str, Any]:
    """Builtins whose ``import random`` gives a fresh :func:`_seeded_random`."""
    own = _seeded_random()
    real_import = builtins.__import__

    def importer(name: str, *args: Any, **kwargs: Any) -> Any:
        return own if name == "random" else real_import(name, *args, **kwargs)

    return {**vars(builtins), "__import__": importer}


def check_answer(
    problem: Problem,
    code: str,
    *,
    examples: int = 200,
    timeout: float = 10.0,
    limits: Limits | None = None,
    mode: str = "auto",
    hide: Sequence[str] = (),
    clock: Callable[[], float] = time.monotonic,
    deadline: float | None = None,
    warm: bool | SandboxPool = True,
) -> Verdict:
    """Run ``code`` in a sandbox and judge it against ``problem``; never raises.

    ``timeout`` is the wall-clock budget for the whole answer (start, every
    call, shrinking), ending at ``deadline`` (on ``clock``) when given;
    ``limits`` overrides memory/disk/process limits (its timeout is replaced by
    ``timeout``); ``mode`` is ``"auto"``, ``"bwrap"`` or ``"fallback"``;
    ``hide`` adds paths the candidate must not see; ``warm`` (bubblewrap only)
    forks the answer from a warm sandbox of the default pool or of the pool
    given, ``False`` starts a fresh sandbox for it.

    Whatever goes wrong while judging, showing or cleaning up (an exception in
    the harness itself included) is a failed verdict with ``status="error"``:
    no answer can turn itself into a missing result.
    """
    start = clock()
    if deadline is None:
        deadline = start + timeout
    base = limits or Limits()
    limits = Limits(**{**base.__dict__, "timeout": timeout})
    try:
        verdict = _judge(problem, code, examples, limits, mode, hide, clock, deadline, warm)
    except Exception as exc:
        verdict = Verdict(False, "error", f"judging the answer failed: {describe(exc)}")
    return replace(verdict, duration=clock() - start)


def _judge(
    problem: Problem,
    code: str,
    examples: int,
    limits: Limits,
    mode: str,
    hide: Sequence[str],
    clock: Callable[[], float],
    deadline: float,
    warm: bool | SandboxPool,
) -> Verdict:
    timeout = limits.timeout
    checked = 0

    def verdict(status: Status, reason: str, counterexample: str | None = None) -> Verdict:
        return Verdict(status == "passed", status, reason, counterexample, 0.0, checked)

    if problem.source not in ("builtin", "humaneval", "python") and os.path.exists(problem.source):
        hide = [*hide, os.path.abspath(problem.source)]  # the TOML file holds the reference
    sandbox = Sandbox(
        code,
        problem.entry_point,
        preamble=problem.preamble,
        limits=limits,
        mode=mode,
        hide=hide,
        deadline=deadline,
        clock=clock,
        warm=warm,
    )
    # Closing (killing the answer's processes, removing its files) is part of
    # judging: when it fails, the exception replaces any verdict reached.
    with sandbox:
        try:
            try:
                error = sandbox.ready()
            except SandboxError as exc:
                raise _Stop(exc, None) from None
            if error is not None:
                return verdict("error", error)
            failed, checked = _differential(problem, sandbox, examples)
            if failed is not None:
                return verdict(failed.status, failed.reason, failed.counterexample)
            if problem.check is not None:
                failed = _run_check(problem, sandbox)
                if failed is not None:
                    return verdict(failed.status, failed.reason, failed.counterexample)
        except _Stop as stop:
            what = "loading the code" if stop.call is None else f"computing {stop.call}"
            if isinstance(stop.error, SandboxTimeout):
                limit = f"the {timeout:g} s limit"
                if stop.call is None:
                    return verdict("timeout", f"loading the code did not finish within {limit}")
                return verdict("timeout", f"{stop.call} did not return within {limit}", stop.call)
            return verdict("error", f"{stop.error} while {what}", stop.call)
    what = f"{checked} cases" + (" and the check code" if problem.check else "")
    return verdict("passed", f"passed {what}")


def check_reply(
    problem: Problem,
    reply: str,
    *,
    timeout: float = 10.0,
    clock: Callable[[], float] = time.monotonic,
    **kwargs: Any,
) -> Verdict:
    """Extract the code from a model's whole reply, then :func:`check_answer` it.

    Extraction is part of the answer's ``timeout``; like :func:`check_answer`
    this never raises.
    """
    start = clock()
    deadline = start + timeout
    try:
        code = extract_code(reply, problem.entry_point, deadline=deadline, clock=clock)
    except ExtractionTimeout:
        reason = f"extracting the code did not finish within the {timeout:g} s limit"
        return Verdict(False, "timeout", reason, duration=clock() - start)
    except Exception as exc:
        reason = f"extracting the code failed: {describe(exc)}"
        return Verdict(False, "error", reason, duration=clock() - start)
    if code is None:
        reason = f"no code found in the reply ({len(reply)} characters)"
        return Verdict(False, "no-code", reason, duration=clock() - start)
    verdict = check_answer(problem, code, timeout=timeout, clock=clock, deadline=deadline, **kwargs)
    return replace(verdict, duration=clock() - start)
