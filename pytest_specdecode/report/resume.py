"""``--dflash-resume``: continue a sweep from its JSON report.

The report is rewritten after every test, so an interrupted sweep leaves one
that says which tests have results. A resumed run checks the report was made
with the same settings that change results (:func:`json_report.result_settings`, and
the coding problems by name and definition, :func:`json_report.problem_set`; else one
line naming them), then:

- a test with a result (its call phase passed, failed or skipped, and its
  server did not die under it) is *carried*: deselected, so it does not run
  again (pytest's own counts say ``N deselected``), and its results are
  copied into the new report, marked with the run they came from;
- a config all of whose tests are carried is therefore never restarted, and
  its whole entry (the server facts included) is carried;
- a config partly done reruns only its missing tests (its server restarts once).

Each record of the report carries a digest (:mod:`~pytest_specdecode.report.digest`):
a test whose record no longer matches it is refused with one line and runs again.
The summary lists the carried tests per config.

So gates, summary and plots see the same results as an uninterrupted run, and
the exit status counts carried failures (:func:`exit_status`). One exception
keeps the lossless check honest: when a speculative config's lossless test
still has to run, the baseline's lossless tests run again too (their greedy
outputs are not in the report).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from pytest_specdecode.config.settings import Settings
from pytest_specdecode.config.spec import ConfigError
from pytest_specdecode.report import digest, json_report, model
from pytest_specdecode.report.model import Report, TestEntry
from pytest_specdecode.report.results import ConfigResults, RunResults

OK, TESTS_FAILED, NO_TESTS_COLLECTED = 0, 1, 5
PROBLEM_SET = "problem_set"  # a report setting: json_report.problem_records of its problems
DONE_OUTCOMES = ("passed", "failed", "skipped")
Measured = TypeVar("Measured", model.CodingRecord, model.ThroughputRecord, model.LosslessRecord)


class ResumeError(ConfigError):
    """The report cannot be resumed from (unreadable, or made with other settings)."""


class Resume:
    """What an earlier run of the sweep left: its report, and which tests are done."""

    def __init__(self, path: Path, report: Report) -> None:
        self.path = path
        self.report = report
        self.origin = {
            "report": str(path),
            "started": report.started,
            "git_commit": report.git_commit,
        }
        died = {n for c in report.configs for n in c.died_tests}
        self.entries: dict[str, list[TestEntry]] = {}
        for entry in report.tests:
            self.entries.setdefault(entry.nodeid, []).append(entry)
        # A record edited since its run is not carried: its test runs again.
        self.refused = digest.refused(report)
        self.verified = digest.signed(report)
        self.done = {
            nodeid
            for nodeid, found in self.entries.items()
            if nodeid not in died
            and nodeid not in self.refused
            and any(e.when == "call" and e.outcome in DONE_OUTCOMES for e in found)
        }
        self.carried: set[str] = set()
        self.refused_now: list[str] = []  # refused tests this run collected (plan)

    @classmethod
    def load(
        cls,
        path: str | Path,
        settings: Settings,
        root: Path,
        problems: Callable[[], Mapping[str, str] | None] | None = None,
    ) -> Resume:
        """Read the report at ``path`` (relative to ``root``); :class:`ResumeError` if it
        is not one or was made with settings that change results.

        ``problems``: this run's :func:`json_report.problem_set` (None when its problems do
        not load: their collection error says why), asked only if the report has one."""
        target = Path(path) if Path(path).is_absolute() else root / path
        try:
            report = json_report.load(target)
        except ValueError as exc:
            raise ResumeError(
                f"--dflash-resume: {exc}; give the JSON report of the run to continue "
                "(--dflash-resume=PATH, default the --dflash-report path)"
            ) from None
        now = json_report.result_settings(settings)
        before = report.settings
        recorded = before is not None and before.problem_set is not None
        if problems is not None and recorded and (found := problems()) is not None:
            now[PROBLEM_SET] = json_report.problem_records(found)
        differ = differences(before, now)
        if differ:
            raise ResumeError(
                f"--dflash-resume: {str(path)!r} was made with other settings that change "
                f"results: {'; '.join(differ)}; resume with that run's settings, or start the "
                "sweep again without --dflash-resume"
            )
        return cls(target, report)

    def plan(self, items: Iterable[tuple[str, str, bool]]) -> set[str]:
        """Which of the collected tests (node id, kind, runs the baseline config) to carry."""
        listed = list(items)
        carried = {nodeid for nodeid, _, _ in listed if nodeid in self.done}
        self.refused_now = [nodeid for nodeid, _, _ in listed if nodeid in self.refused]
        lossless_left = any(
            kind == "lossless" and not baseline and nodeid not in carried
            for nodeid, kind, baseline in listed
        )
        if lossless_left:  # the check needs the baseline's outputs, which only a run has
            carried -= {n for n, kind, baseline in listed if kind == "lossless" and baseline}
        self.carried = carried
        return carried

    def carry_into(
        self, results: RunResults, remaining: Iterable[str], carried: Iterable[str] | None = None
    ) -> int:
        """Copy the results of the carried tests into ``results``; returns how many.

        ``remaining``: the config keys with tests still to run in this run (the others
        are carried whole, their server facts included)."""
        left = set(remaining)
        chosen = set(self.carried if carried is None else carried)
        results.resumed_from = dict(self.origin)
        by_config: dict[str, set[str]] = {}
        for nodeid in chosen:
            for entry in self.entries.get(nodeid, []):
                results.tests.append({**msgspec.to_builtins(entry), "carried": True})
                if entry.config_key:
                    by_config.setdefault(entry.config_key, set()).add(nodeid)
        for data in self.report.configs:
            key = str(data.key)
            mine = by_config.get(key, set())
            if mine:
                results.configs[key] = _carried_config(
                    data, mine, whole=key not in left, origin=self.origin
                )
        results.other_failures.extend(n for n in self.report.other_failures if n in chosen)
        return len(chosen)

    def refusal_lines(self) -> list[str]:
        """One line per collected test whose carried record was refused."""
        return [
            f"dflash: resume: refused the carried result of {nodeid} from {str(self.path)!r}: "
            f"{self.refused[nodeid]} (edited after its run?); the test runs again"
            for nodeid in self.refused_now
        ]

    def note(self, configs: int, to_run: int) -> str:
        """The line a resumed run shows after collection."""
        started = self.origin["started"] or "an earlier run"
        unverified = ""
        if self.carried and not self.verified:
            unverified = " (not verified: the report predates record digests)"
        return (
            f"dflash: resume: {len(self.carried)} tests carried from {str(self.path)!r} (run "
            f"of {started}){unverified}; {configs} config{'s' if configs != 1 else ''} "
            f"complete there, not restarted; {to_run} test{'s' if to_run != 1 else ''} to run"
        )


def differences(before: model.Settings | None, now: Mapping[str, Any]) -> list[str]:
    """The result-changing settings that differ, one phrase each (``dialect 'a' -> 'b'``)."""
    if before is None:
        return ["the report records none (made by an older pytest-specdecode)"]
    # Compared as the report's JSON holds them: ``now`` is a setting's name -> its value.
    recorded: dict[str, Any] = msgspec.to_builtins(before)
    found: list[str] = []
    for name, value in now.items():
        old = recorded.get(name)
        if old == value:
            continue
        if name == PROBLEM_SET and isinstance(value, list) and isinstance(old, list):
            found.append(f"{name}: {_problem_changes(_by_name(old), _by_name(value))}")
        elif isinstance(value, Mapping) and isinstance(old, Mapping):
            parts = [
                f"{key} {old.get(key)!r} -> {sub!r}"
                for key, sub in value.items()
                if old.get(key) != sub
            ]
            found.append(f"{name}: {', '.join(parts)}")
        else:
            found.append(f"{name} {old!r} -> {value!r}")
    return found


def _by_name(records: list[Any]) -> dict[str, Any]:
    """A problem set's records (``{"name", "digest"}``) by name."""
    return {str(r.get("name")): r.get("digest") for r in records if isinstance(r, Mapping)}


def _problem_changes(old: Mapping[str, Any], now: Mapping[str, Any]) -> str:
    """``'gcd' changed, 'double' added, 'fib' removed`` (the first few of each)."""

    def some(names: list[str], what: str) -> list[str]:
        shown = ", ".join(repr(n) for n in names[:3])
        more = f" and {len(names) - 3} more" if len(names) > 3 else ""
        return [f"{shown}{more} {what}"] if names else []

    changed = sorted(n for n in now if n in old and old[n] != now[n])
    added = sorted(n for n in now if n not in old)
    removed = sorted(n for n in old if n not in now)
    parts = some(changed, "changed") + some(added, "added") + some(removed, "removed")
    return ", ".join(parts)


def exit_status(exitstatus: int, results: RunResults) -> int:
    """pytest's status as an uninterrupted run would have it: carried failures count, and a
    run whose every test was carried ran no tests of its own but is not empty."""
    carried = [t for t in results.tests if t.get("carried")]
    if not carried:
        return exitstatus
    if exitstatus == NO_TESTS_COLLECTED:
        exitstatus = OK
    if exitstatus == OK and any(t.get("outcome") == "failed" for t in carried):
        return TESTS_FAILED
    return exitstatus


def _carried_config(
    data: model.ConfigResults, nodeids: set[str], *, whole: bool, origin: Mapping[str, Any]
) -> ConfigResults:
    """A config's entry of the old report, reduced to the carried tests' results: a whole
    config carries every coding and throughput record (a lossless check only by its test),
    each keyed by its test id (an entry without one: its problem or case)."""
    results = ConfigResults(data.label, str(data.key))
    results.config = data.config
    if whole:  # its server facts belong to it; a partial config gets this run's
        results.service = _service(data)
    for coding in data.coding:
        if whole or coding.nodeid in nodeids:
            results.coding[coding.nodeid or coding.problem] = _measured(coding)
    for case in data.throughput:
        if whole or case.nodeid in nodeids:
            results.throughput[case.nodeid or case.case] = _measured(case)
    for checked in data.lossless:
        if checked.nodeid in nodeids:
            results.lossless[checked.nodeid] = _measured(checked)
    results.errors = [n for n in data.errors if n in nodeids]
    results.called = set(nodeids)
    results.carried = {**origin, "tests": sorted(nodeids), "whole": whole}
    return results


def _measured(record: Measured) -> Measured:
    """A carried record as its test measured it: without the digest and what the old run
    judged of it (speedup, repetition, client limit), which this run's report works out."""
    if isinstance(record, model.ThroughputRecord):
        return msgspec.structs.replace(
            record, speedup=None, repetition=None, client_limited=None, digest=None
        )
    return msgspec.structs.replace(record, digest=None)


def _service(data: model.ConfigResults) -> dict[str, Any]:
    """A config's server facts, with the start phases the report lifts out of them."""
    service = dict(data.service)
    if data.start_phases is not None:
        service["start_phases"] = msgspec.to_builtins(data.start_phases)
    return service
