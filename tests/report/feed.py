"""Feed :class:`RunResults` the way the session does: reports with user_properties.

Synthetic data, no pytest run: a report is (nodeid, phase, outcome, properties),
the properties carrying the records the runners attach.
"""

from __future__ import annotations

from typing import Any

import msgspec

from pytest_specdecode.config.spec import SpecConfig, config_to_dict
from pytest_specdecode.records import CONFIG, CONFIG_DATA, CONFIG_KEY, KIND, RECORD, SERVICE
from pytest_specdecode.report.model import CodingRecord
from pytest_specdecode.report.results import RunResults

B8 = SpecConfig(budget=8, window=2048, draft_model="sim/dflash-drafter")
B4 = SpecConfig(budget=4, window=2048, draft_model="sim/dflash-drafter")
NONE = SpecConfig(algorithm="NONE")

Props = list[tuple[str, Any]]


def props(config: SpecConfig, kind: str, record: dict[str, Any] | None = None) -> Props:
    """What the session and a runner put on one test's report."""
    found: Props = [
        (CONFIG, config.label()),
        (CONFIG_KEY, config.key()),
        (CONFIG_DATA, config_to_dict(config)),
        (KIND, kind),
    ]
    if record is not None:
        found.append((RECORD, record))
    return found


def coding(
    results: RunResults,
    config: SpecConfig,
    problem: str,
    passed: bool,
    *,
    accept: float | None = None,
    tokens: int | None = None,
) -> None:
    """One coding test, reported as pytest does: setup, call, teardown."""
    record = CodingRecord(
        problem=problem,
        passed=passed,
        status="pass" if passed else "wrong-answer",
        reason="" if passed else "f(2) returned 5, expected 4",
        correct=int(passed),
        completion_tokens=tokens,
        accept_length=accept,
    )
    nodeid = f"test_c.py::test_coding[{problem}]"
    base = props(config, "coding")
    results.add(nodeid, "setup", "passed", [*base, (SERVICE, {"restarted": True})])
    results.add(
        nodeid,
        "call",
        "passed" if passed else "failed",
        props(config, "coding", msgspec.to_builtins(record)),
    )
    results.add(nodeid, "teardown", "passed", base)


def throughput(results: RunResults, config: SpecConfig, case: str, metrics: dict[str, Any]) -> None:
    nodeid = f"test_t.py::test_throughput[{case}]"
    record = {"case": case, "key": nodeid, "metrics": {"case": case, **metrics}}
    results.add(nodeid, "call", "passed", props(config, "throughput", record))


def errored(results: RunResults, config: SpecConfig, nodeid: str) -> None:
    """A test behind a failed readiness gate: its setup fails."""
    results.add(nodeid, "setup", "failed", props(config, "dflash"))
