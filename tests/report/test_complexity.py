"""No function of ``pytest_specdecode/report/`` above cyclomatic complexity 15 (radon's).

A renderer that grew past that does several jobs at once (issue 36): split it into
functions with one job each, or tables of data where it is a chain of cases.
"""

from __future__ import annotations

from pathlib import Path

from radon.complexity import cc_visit
from radon.visitors import Function

import pytest_specdecode.report

LIMIT = 15
REPORT = Path(pytest_specdecode.report.__file__).parent


def above_limit(source: str) -> list[tuple[str, int, int]]:
    """(name, line, complexity) of each function or method of ``source`` above :data:`LIMIT`."""
    return [
        (block.fullname, block.lineno, block.complexity)
        for block in cc_visit(source)
        if isinstance(block, Function) and block.complexity > LIMIT
    ]


def _branches(count: int) -> str:
    """A function of complexity ``count + 1``: ``count`` ifs in a row."""
    body = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(count))
    return f"def f(x):\n{body}    return -1\n"


def test_the_check_reports_a_function_above_the_limit_and_not_one_at_it() -> None:
    assert above_limit(_branches(LIMIT - 1)) == []
    assert above_limit(_branches(LIMIT)) == [("f", 1, LIMIT + 1)]
    method = "class C:\n" + "".join(f"    {line}\n" for line in _branches(LIMIT).splitlines())
    assert above_limit(method) == [("C.f", 2, LIMIT + 1)]


def test_no_function_of_the_report_is_above_complexity_15() -> None:
    modules = sorted(REPORT.rglob("*.py"))
    assert len(modules) > 10, f"the report's modules were not found under {REPORT}"
    found = [
        f"{path.relative_to(REPORT)}:{line} {name} ({score})"
        for path in modules
        for name, line, score in above_limit(path.read_text(encoding="utf-8"))
    ]
    assert not found, (
        f"{len(found)} function(s) of pytest_specdecode/report/ above complexity {LIMIT} "
        "(radon cc); split each into functions with one job: " + "; ".join(found)
    )
