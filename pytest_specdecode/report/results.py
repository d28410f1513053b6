"""What a run measured, per config: coding verdicts, throughput, readiness.

Tests attach their measurements to their report as ``user_properties``
(which pytest-xdist carries from workers to the controller and JUnit XML
writes out); :class:`RunResults` collects them from the reports, so the same
code aggregates a plain run and a distributed one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec

from pytest_specdecode.records import (
    BASELINE_CASES,
    CONFIG,
    CONFIG_DATA,
    CONFIG_KEY,
    DIED,
    KIND,
    RECORD,
    SERVICE,
)
from pytest_specdecode.report.model import (
    CodingRecord,
    Config,
    LosslessRecord,
    Sweep,
    ThroughputRecord,
)

Record = TypeVar("Record", CodingRecord, ThroughputRecord, LosslessRecord)


@dataclass
class ConfigResults:
    """Everything measured under one config (``key``: its canonical key)."""

    label: str
    key: str = ""
    config: Config = field(default_factory=Config)
    service: dict[str, Any] = field(default_factory=dict)
    # Records by the id of the test that measured them (the case is a field of each).
    coding: dict[str, CodingRecord] = field(default_factory=dict)
    throughput: dict[str, ThroughputRecord] = field(default_factory=dict)
    lossless: dict[str, LosslessRecord] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    # Records that did not read as the report's (test id -> why): measured, never judged.
    refused: dict[str, str] = field(default_factory=dict)
    # The server exited mid-run: the first reason, and the tests it cut short.
    died: str | None = None
    died_tests: set[str] = field(default_factory=set)
    called: set[str] = field(default_factory=set)
    # Results carried from an earlier run by --dflash-resume: from where, which tests.
    carried: dict[str, Any] | None = None

    def died_after(self) -> int:
        """How many tests of this config ran before its server died."""
        return len(self.called - self.died_tests)

    def pass_rate(self) -> tuple[float, int, int] | None:
        """(mean pass@1, passed problems, problems), or None without coding tests."""
        if not self.coding:
            return None
        records = list(self.coding.values())
        rate = sum(r.correct / r.samples for r in records) / len(records)
        return rate, sum(r.passed for r in records), len(records)

    def pass_at_k(self, k: int) -> float | None:
        """Mean unbiased pass@k over problems with at least k samples."""
        usable = [r for r in self.coding.values() if r.samples >= k]
        if not usable:
            return None
        # Imported here: the coding package loads hypothesis, not needed otherwise.
        from pytest_specdecode.coding.passk import pass_at_k

        return sum(pass_at_k(r.samples, r.correct, k) for r in usable) / len(usable)

    def take(self, nodeid: str, when: str, data: Mapping[str, Any]) -> None:
        """One test report's properties: its server, whether the server died, and on the
        call what the test measured."""
        service = data.get(SERVICE)
        # Under xdist every worker reports the server; keep the restart's record.
        if isinstance(service, dict) and (
            not self.service or service.get("restarted") or not self.service.get("restarted")
        ):
            self.service = service
        died = data.get(DIED)
        if isinstance(died, str):
            self.died = self.died or died
            self.died_tests.add(nodeid)
        if when != "call":
            return
        self.called.add(nodeid)
        record = data.get(RECORD)
        if isinstance(record, dict):
            self._record(nodeid, data.get(KIND), record)
        measured = data.get(BASELINE_CASES)
        if isinstance(measured, list):
            self._baseline_cases(nodeid, measured)

    def _record(self, nodeid: str, kind: Any, record: dict[str, Any]) -> None:
        # Keyed by test id: two tests measuring one case (or problem) under one
        # config are two records, each naming its case as a field.
        if kind == "coding":
            self._keep(self.coding, nodeid, nodeid, {**record, "nodeid": nodeid}, CodingRecord)
        elif kind == "throughput":
            self._keep(self.throughput, nodeid, nodeid, _case(record, nodeid), ThroughputRecord)
        elif kind == "lossless":
            self._keep(self.lossless, nodeid, nodeid, {**record, "nodeid": nodeid}, LosslessRecord)

    def _baseline_cases(self, nodeid: str, measured: list[Any]) -> None:
        """The lossless baseline's throughput cases, for speedup."""
        for found in measured:
            if isinstance(found, dict) and isinstance(found.get("case"), str):
                # One test measures many cases here: the case's own test id is its key.
                key = str(found.get("key") or f"{nodeid}[{found['case']}]")
                data = {
                    **_case(found, nodeid),
                    "metrics": found.get("metrics") or {},
                    "key": str(found.get("key")),
                }
                self._keep(self.throughput, key, nodeid, data, ThroughputRecord)

    def _keep(
        self,
        records: dict[str, Record],
        key: str,
        nodeid: str,
        data: dict[str, Any],
        kind: type[Record],
    ) -> None:
        """The test's record as the report's type, converted once, in ``records[key]``; a
        record that does not convert (the test's properties are what a server replied) is
        refused, with why (a gate fails on it), never the run's crash."""
        try:
            records[key] = msgspec.convert(data, kind)
        except msgspec.ValidationError as exc:
            self.refused.setdefault(nodeid, str(exc))

    def accept_length(self) -> float | None:
        """Tokens per verify step over the throughput cases (else the coding answers)."""
        pairs: list[tuple[float | None, float | None]] = [
            (r.metrics.completion_tokens, r.metrics.spec_verify_ct)
            for r in self.throughput.values()
        ]
        if not any(t and s for t, s in pairs):
            pairs = [
                (r.completion_tokens, r.completion_tokens / r.accept_length)
                for r in self.coding.values()
                if r.completion_tokens and r.accept_length
            ]
        tokens = sum(float(t) for t, s in pairs if t and s)
        steps = sum(float(s) for t, s in pairs if t and s)
        return tokens / steps if steps else None


def _config(data: Any) -> Config | None:
    """A test's config values (``config_to_dict``) as the report's, converted once; None
    without any, or with values that are not a config's (then its label alone names it)."""
    if not data:
        return None
    try:
        return msgspec.convert(data, Config)
    except msgspec.ValidationError:
        return None


def _case(record: Mapping[str, Any], nodeid: str) -> dict[str, Any]:
    """What a throughput record is made of (its case, figures and pairing key) by test id."""
    return {**{k: record[k] for k in ("case", "metrics", "key") if k in record}, "nodeid": nodeid}


# The markers of the tests that measure: a run that selected some and ran none measured nothing.
MEASURING = ("coding", "throughput", "lossless")


@dataclass
class Selected:
    """The tests of one measuring marker that the run reported: which ran, which skipped."""

    ran: set[str] = field(default_factory=set)
    skipped: dict[str, str] = field(default_factory=dict)  # nodeid -> skip reason

    def none_ran(self) -> bool:
        return bool(self.skipped) and not self.ran


class RunResults:
    """Collects per-config results from test reports (controller side)."""

    def __init__(self) -> None:
        self.configs: dict[str, ConfigResults] = {}  # by canonical key
        self.selected: dict[str, Selected] = {}  # by measuring marker
        self.other_failures: list[str] = []
        self.tests: list[dict[str, Any]] = []
        self.resumed_from: dict[str, Any] | None = None  # set by --dflash-resume
        self.sweep: Sweep | None = None  # how far the sweep is (sweep_progress.py)
        self.search: dict[str, Any] | None = None  # --dflash-search's section (search/record.py)

    def ordered(self) -> list[ConfigResults]:
        """Configs in a stable order (baseline first, then by value), whatever the
        order their reports arrived in (xdist workers finish in any order)."""

        def key(r: ConfigResults) -> tuple[Any, ...]:
            c = r.config
            numbers = [-1 if n is None else n for n in (c.budget, c.topk, c.window)]
            drafter = c.draft_model or ""
            return (c.algorithm != "NONE", str(c.algorithm), *numbers, drafter, r.key)

        return sorted(self.configs.values(), key=key)

    def for_config(
        self, label: str, config: Config | None = None, key: str | None = None
    ) -> ConfigResults:
        """The results of the config with canonical ``key`` (reports without one: the label)."""
        key = key or label
        results = self.configs.get(key)
        if results is None:
            results = self.configs[key] = ConfigResults(label, key)
        if config is not None and results.config == Config():
            results.config = config
        return results

    def note_selected(
        self, markers: Iterable[str], nodeid: str, when: str, outcome: str, reason: str
    ) -> None:
        """Tally a report of a test carrying a measuring marker (``markers``: its keywords)."""
        for marker in MEASURING:
            if marker not in markers:
                continue
            tally = self.selected.setdefault(marker, Selected())
            if outcome == "skipped":
                tally.skipped.setdefault(nodeid, reason)
            elif when == "call":
                tally.ran.add(nodeid)

    def add(
        self,
        nodeid: str,
        when: str,
        outcome: str,
        props: Iterable[tuple[str, Any]],
        duration: float = 0.0,
    ) -> None:
        """Take one report's outcome and properties."""
        data = dict(props)
        label, kind = data.get(CONFIG), data.get(KIND)
        failed = outcome == "failed"
        if when == "call" or failed or outcome == "skipped":
            self.tests.append(
                {
                    "nodeid": nodeid,
                    "when": when,
                    "outcome": outcome,
                    "duration": round(duration, 4),
                    "config": label,
                    "config_key": data.get(CONFIG_KEY),
                }
            )
        if label is None or kind is None:
            if failed:
                self.other_failures.append(nodeid)
            return
        key = data.get(CONFIG_KEY)
        config = _config(data.get(CONFIG_DATA))
        results = self.for_config(str(label), config, str(key) if key else None)
        results.take(nodeid, when, data)
        if failed and kind != "coding":
            self.other_failures.append(nodeid)
        if failed and when != "call":
            results.errors.append(nodeid)

    def to_json(self) -> dict[str, Any]:
        return {
            "configs": [
                {
                    "label": r.label,
                    "key": r.key,
                    "config": r.config.to_dict(),
                    "service": {k: v for k, v in r.service.items() if k != "start_phases"},
                    "start_phases": r.service.get("start_phases"),
                    "pass_rate": _rate_json(r.pass_rate()),
                    "pass_at_k": [
                        {"k": k, "value": v}
                        for k in (1, 5, 10)
                        if (v := r.pass_at_k(k)) is not None
                    ],
                    "accept_length": r.accept_length(),
                    "coding": msgspec.to_builtins(list(r.coding.values())),
                    "throughput": msgspec.to_builtins(list(r.throughput.values())),
                    "lossless": msgspec.to_builtins(list(r.lossless.values())),
                    "errors": r.errors,
                    "server_died": (
                        {"reason": r.died, "after_tests": r.died_after()} if r.died else None
                    ),
                    "died_tests": sorted(r.died_tests),
                    **({"carried": r.carried} if r.carried else {}),
                }
                for r in self.ordered()
            ],
            "other_failures": self.other_failures,
            "tests": self.tests,
            **({"resumed_from": self.resumed_from} if self.resumed_from else {}),
            **({"sweep": msgspec.to_builtins(self.sweep)} if self.sweep else {}),
            **({"search": self.search} if self.search else {}),
        }


def _rate_json(rate: tuple[float, int, int] | None) -> dict[str, Any] | None:
    if rate is None:
        return None
    return {"rate": rate[0], "passed": rate[1], "total": rate[2]}
