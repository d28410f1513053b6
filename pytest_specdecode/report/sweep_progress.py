"""How far a sweep is: configs done of all, time elapsed, and an estimate of the time left.

The estimate is made from what the run measured so far: the mean server
start (the readiness gate's time, on a GPU host mostly the model load) for
each config not started yet, plus the mean time of a test of each kind for
each test still to run, divided over the hosts that work in parallel. It
is None until a start and a test have been measured. Fed by the session
from test reports (the xdist controller gets every worker's), shown on the
progress line, at each finished config and in the GitHub step summary.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_specdecode.report.model import Report, ResumedFrom, Sweep


@dataclass
class _Config:
    tests: int  # to run in this run
    done: int = 0
    carried: bool = False  # every test came from the resumed report
    started: bool = False


@dataclass
class SweepProgress:
    """Configs and tests of the run, and what finishing them took so far."""

    clock: Callable[[], float] = time.monotonic
    parallel: int = 1
    configs: dict[str, _Config] = field(default_factory=dict)
    starts: list[float] = field(default_factory=list)
    test_times: dict[str, list[float]] = field(default_factory=dict)
    _began: float | None = None
    _durations: dict[str, float] = field(default_factory=dict)
    _start_seen: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self._began = self.clock()  # the sweep's time counts from the session's start

    def plan(self, tests: Mapping[str, int], carried: Mapping[str, int] | None = None) -> None:
        """``tests``: per config key, the tests to run; ``carried``: configs resumed whole."""
        for key, n in tests.items():
            self.configs.setdefault(key, _Config(n))
        for key in carried or {}:
            self.configs.setdefault(key, _Config(0, carried=True))

    @property
    def planned(self) -> bool:
        return bool(self.configs)

    def report(self, nodeid: str, when: str, key: str | None, kind: str | None,
               duration: float, service: Mapping[str, Any] | None) -> bool:  # fmt: skip
        """Take one test report; True when it finished the last test of its config."""
        self._durations[nodeid] = self._durations.get(nodeid, 0.0) + duration
        config = self.configs.get(key or "")
        if config is None:
            return False
        config.started = True
        if (
            isinstance(service, Mapping)
            and service.get("restarted")
            and key not in self._start_seen
        ):
            self._start_seen.add(str(key))
            ready = float(service.get("ready_seconds") or 0.0)
            self.starts.append(ready)
            self._durations[nodeid] -= ready  # the test's own time, without the start
        if when != "teardown":
            return False
        config.done += 1
        self.test_times.setdefault(kind or "test", []).append(self._durations.pop(nodeid))
        return config.done == config.tests

    def status(self) -> Sweep:
        """How far the sweep got, as the report holds it (``left_seconds`` None: not
        enough measured yet)."""
        done = sum(c.carried or (c.tests > 0 and c.done >= c.tests) for c in self.configs.values())
        elapsed = self.clock() - (self._began or 0.0)
        return Sweep(
            configs_done=done,
            configs_total=len(self.configs),
            carried=sum(c.carried for c in self.configs.values()),
            elapsed_seconds=round(elapsed, 1),
            left_seconds=self._left(),
        )

    def _left(self) -> float | None:
        every = [t for times in self.test_times.values() for t in times]
        if not self.starts or not every:
            return None
        start = sum(self.starts) / len(self.starts)
        test = sum(every) / len(every)
        work = sum(
            (0.0 if c.started else start) + max(0, c.tests - c.done) * test
            for c in self.configs.values()
            if not c.carried
        )
        return round(work / max(1, self.parallel), 1)


def describe(status: Sweep | None) -> str:
    """``sweep: 3/6 configs done, 4m12s elapsed, about 5m left`` (a report's ``sweep``,
    :meth:`SweepProgress.status`)."""
    if status is None or not status.configs_total:
        return ""
    text = f"sweep: {status.configs_done}/{status.configs_total} configs done"
    if status.carried:
        text += f" ({status.carried} carried from the resumed report)"
    text += f", {duration(status.elapsed_seconds or 0.0)} elapsed"
    left = status.left_seconds
    if status.configs_done < status.configs_total:
        text += f", about {duration(left)} left" if left is not None else ", time left unknown yet"
    return text


def duration(seconds: float) -> str:
    """``45s``, ``4m12s``, ``2h05m``."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def notes(report: Report) -> list[str]:
    """What a long sweep's reader needs besides the results: how far it is, what was
    carried from a resumed report, which configs moved hosts and which starts were retried."""
    lines = [text] if (text := describe(report.sweep)) else []
    if report.resumed_from is not None:
        lines.append(_resumed(report, report.resumed_from))
    for c in report.configs:
        # The service section is the service's own record (an open object).
        lines += [
            f"moved: {c.label}: {move.get('from')} -> {move.get('to') or 'nowhere'} "
            f"({move.get('reason')})"
            for move in c.service.get("moves") or []
        ]
        lines += _retried(c.label, c.service)
    return lines


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _resumed(report: Report, resumed: ResumedFrom) -> str:
    """Where a resumed run came from, and how many tests and whole configs it carried."""
    whole = [c.label for c in report.configs if c.carried is not None and c.carried.whole]
    tests = {t.nodeid for t in report.tests if t.carried}
    return (
        f"resumed from {resumed.report} (run of {resumed.started}): "
        f"{_plural(len(tests), 'test')} carried (not run again), "
        f"{_plural(len(whole), 'config')} whole" + (f" ({', '.join(whole)})" if whole else "")
    )


def _retried(label: str, service: Mapping[str, Any]) -> list[str]:
    """The line of a config whose start was tried again; a bad flag started once (and a
    drafter mismatch) is its test's error, not a retry."""
    tries = [t for t in service.get("start_attempts") or [] if isinstance(t, Mapping)]
    if not any(t.get("retried_after_seconds") is not None for t in tries):
        return []
    why = ", ".join(sorted({str(t.get("why")) for t in tries}))
    # Where the starts failed (a config that moved ran elsewhere in the end).
    hosts = list(dict.fromkeys(str(t["host"]) for t in tries if t.get("host")))
    hosts = hosts or ([str(service["host"])] if service.get("host") else [])
    where = " on " + ", ".join(hosts) if hosts else ""
    return [f"retried: {label}: {len(tries)} failed start(s) ({why}){where}"]
