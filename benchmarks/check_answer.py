"""Wall time of checking one answer: sandbox start, fixed + 200 generated cases, verdict.

Uses each built-in's reference solution as the answer (every one must pass).
Prints the median per problem and the overall median; exits 1 if any answer
fails or the overall median exceeds --budget seconds.

    .venv/bin/python benchmarks/check_answer.py [--repeat 5] [--examples 200] [--humaneval]

``--humaneval`` also runs all 164 HumanEval problems with the canonical
solution (must all pass) and with the prompt alone (must all fail).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from pytest_specdecode.coding import (
    builtin_problems,
    check_answer,
    check_reply,
    load_humaneval,
    sandbox_mode,
    sandbox_warning,
)


def builtins(repeat: int, examples: int) -> tuple[list[float], list[str]]:
    medians: list[float] = []
    failures: list[str] = []
    for problem in builtin_problems():
        assert isinstance(problem.reference, str)
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            verdict = check_answer(problem, problem.reference, examples=examples)
            times.append(time.perf_counter() - start)
            if not verdict.passed:
                failures.append(f"{problem.name}: {verdict.reason}")
        medians.append(statistics.median(times))
        print(f"{problem.name:24} median {medians[-1] * 1000:7.1f} ms  ({verdict.cases} cases)")
    return medians, failures


def humaneval() -> list[str]:
    failures = []
    problems = load_humaneval()
    start = time.perf_counter()
    passed = sum(check_reply(p, str(p.reference)).passed for p in problems)
    canonical = time.perf_counter() - start
    start = time.perf_counter()
    prompt_only = sum(check_reply(p, p.completion_prompt).passed for p in problems)
    alone = time.perf_counter() - start
    print(f"HumanEval canonical solutions: {passed}/{len(problems)} passed in {canonical:.1f} s")
    print(f"HumanEval prompt alone:        {prompt_only}/{len(problems)} passed in {alone:.1f} s")
    if passed != len(problems):
        failures.append(f"HumanEval canonical: only {passed}/{len(problems)} passed")
    if prompt_only:
        failures.append(f"HumanEval prompt alone: {prompt_only} passed, expected none")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="checks per problem. Default: 3")
    parser.add_argument("--examples", type=int, default=200, help="generated inputs. Default: 200")
    parser.add_argument("--budget", type=float, default=1.5, help="seconds. Default: 1.5")
    parser.add_argument("--humaneval", action="store_true", help="also run all 164 HumanEval")
    args = parser.parse_args(argv)

    print(f"sandbox: {sandbox_mode()}" + (f" ({sandbox_warning()})" if sandbox_warning() else ""))
    medians, failures = builtins(args.repeat, args.examples)
    overall = statistics.median(medians)
    print(
        f"overall median {overall * 1000:.1f} ms, slowest {max(medians) * 1000:.1f} ms "
        f"(requirement: median <= {args.budget * 1000:.0f} ms)"
    )
    if overall > args.budget:
        failures.append(f"overall median {overall:.2f} s exceeds the {args.budget} s budget")
    if args.humaneval:
        failures += humaneval()
    for failure in failures:
        print(f"FAIL {failure}", file=sys.stderr)
    print("FAIL" if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
