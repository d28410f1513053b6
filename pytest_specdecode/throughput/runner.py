"""Test-side glue for throughput cases and the lossless check.

``dflash_throughput`` and ``dflash_lossless`` fixtures hand these objects to
tests; each runs the measurement against the verified server and attaches
what it measured to the test's ``user_properties`` (see
:mod:`pytest_specdecode.report.results`), so the summary, the report and the gates
see it, under pytest-xdist too.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_specdecode import statefiles
from pytest_specdecode.client import SGLangError
from pytest_specdecode.config.settings import Settings
from pytest_specdecode.progress import Progress
from pytest_specdecode.records import BASELINE_CASES, RECORD
from pytest_specdecode.replies import DraftBounds, ImplausibleReply
from pytest_specdecode.server import Server
from pytest_specdecode.throughput import fingerprint, lossless
from pytest_specdecode.throughput.comparison import pairing_key
from pytest_specdecode.throughput.load import BenchmarkLike, ThroughputError, run_case
from pytest_specdecode.throughput.workload import ThroughputCase

# Greedy prompts of the lossless check: code and prose, short and long.
LOSSLESS_PROMPTS = {
    "code": "def fibonacci(n):\n    ",
    "prose": "The history of the printing press begins",
    "list": "Ten facts about the Moon:\n1.",
    "chat": "Explain speculative decoding to a new engineer in three sentences.",
}
LOSSLESS_TOKENS = 128
# In a record measured under pytest-xdist, where pytest-benchmark is off.
PYTEST_BENCHMARK_OFF = (
    "off under pytest-xdist: measured by the plugin's load client alone (this worker held its "
    "host alone); not in pytest-benchmark's table, --benchmark-save or --benchmark-compare"
)


class ThroughputRunner:
    """Runs one throughput case; rounds go through pytest-benchmark."""

    def __init__(
        self,
        settings: Settings,
        service: Server,
        node: pytest.Item,
        progress: Progress | None = None,
        baseline: LosslessBaseline | None = None,
        alone: bool = False,
    ) -> None:
        self.settings = settings
        self.service = service
        self.node = node
        self.progress = progress
        # The run's NONE baseline, for its output repetition per case (beside this one's).
        self.baseline = baseline
        # An xdist worker that holds its host alone (no other worker can load its server).
        self.alone = alone

    def run(self, case: ThroughputCase, benchmark: BenchmarkLike | None) -> dict[str, Any]:
        """Measure ``case``; fail the test with the server's error text on errors."""
        label = self.service.config.label()
        unbenched = False
        if benchmark is not None and getattr(benchmark, "disabled", False):
            if not self.alone:
                pytest.skip(
                    "pytest-benchmark is disabled (it switches itself off under pytest-xdist "
                    "and with --benchmark-disable): run throughput cases without -n, or with "
                    "no more workers than --dflash-hosts (each worker then holds its host alone)"
                )
            # Under xdist with a host to itself: the plugin's own load client times the
            # rounds; pytest-benchmark's table, saves and compares do not have them.
            benchmark, unbenched = None, True
        started = time.monotonic()
        failure: str | None = None

        def show(step: str) -> None:
            if self.progress is not None:
                elapsed = time.monotonic() - started
                self.progress.update(label, f"throughput {case.id} {step}", elapsed)

        try:
            metrics = run_case(
                self.service.client,
                case,
                self.settings.rounds,
                benchmark,
                config=label,
                on_round=show,
                slo=self.settings.slo,
                continuous=continuous_requests(self.settings, case),
                bounds=draft_bounds(self.service),
            )
        except (ThroughputError, SGLangError, ImplausibleReply) as exc:
            failure = failure_text(self.service, exc)
        finally:
            if self.progress is not None:
                self.progress.done()
        if failure is None and (changed := self.service.changed()) is not None:
            # Another server's figures: not saved by pytest-benchmark, not filed here.
            if benchmark is not None:
                # pytest-benchmark's public flag: an errored benchmark is not saved.
                setattr(benchmark, "has_error", True)  # noqa: B010 - not in BenchmarkLike
            failure = changed
        if failure is not None:
            pytest.fail(failure, pytrace=False)
        info = metrics.to_extra_info()
        if unbenched:
            info["pytest_benchmark"] = PYTEST_BENCHMARK_OFF
        beside = self._repetition_baseline(case.id, metrics.repetition)
        if beside is not None:
            info["repetition_baseline"] = beside
        if benchmark is not None:
            if beside is not None:
                benchmark.extra_info["repetition_baseline"] = beside
            benchmark.extra_info["case"] = case.id
            benchmark.extra_info["simulated"] = self.service.simulated
            # Where it ran: the compare gate's noise counts only saved runs of this setup.
            benchmark.extra_info[fingerprint.KEY] = fingerprint.of_run(
                self.settings, simulated=self.service.simulated
            )
            # A saved run of algorithm NONE is a speedup baseline for later runs.
            benchmark.extra_info["algorithm"] = self.service.config.algorithm
        record = {
            "case": case.id,
            "key": pairing_key(self.node.nodeid, {"case": case.id}),
            "metrics": info,
        }
        self.node.user_properties.append((RECORD, record))
        return info

    def _repetition_baseline(self, case: str, figure: float | None) -> float | None:
        """Keep a NONE config's repetition figure for ``case``; for a speculative config,
        the baseline's figure measured earlier in this process (None when there is none:
        the report judges against the run's baseline whatever the order)."""
        if self.baseline is None:
            return None
        if self.service.config.algorithm == "NONE":
            if figure is not None:
                self.baseline.repetition[case] = figure
            return None
        return self.baseline.repetition.get(case)


def continuous_requests(settings: Settings, case: ThroughputCase) -> int:
    """Requests per round of a continuous closed loop (0: synchronized rounds)."""
    if settings.load_mode != "continuous" or case.open_loop:
        return 0
    return settings.continuous_requests or 4 * case.concurrency


def draft_bounds(service: Server) -> DraftBounds:
    """What the config of ``service`` allows per verify step (its replies are checked against)."""
    return DraftBounds.of(service.config, service.server_info)


def failure_text(service: Server, exc: Exception) -> str:
    """One line for a failed measurement; when the server died, its exit and log tail."""
    gone = service.gone(settle=2.0)
    if gone is not None:
        return str(gone)
    return f"{service.config.label()}: {exc}"


class LosslessBaseline:
    """Greedy outputs of the non-speculative baseline, shared by the run's workers.

    Serially the outputs live in memory. Under pytest-xdist the worker that ran
    the baseline test (algorithm NONE) is rarely the one checking a config, so
    the outputs also go to a file in the directory the xdist controller shares
    (``directory``), and each baseline test leaves a *done* marker whatever its
    outcome, so a worker waiting for the baseline knows when to stop waiting.
    ``expected`` holds the node ids of the run's baseline tests (set at
    collection); with none, a check skips at once with that reason.
    """

    FILE = "lossless-baseline.json"

    def __init__(
        self,
        directory: Path | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        poll_interval: float = 0.1,
    ) -> None:
        self.outputs: list[lossless.GreedyOutput] | None = None
        self.label: str | None = None
        self.expected: set[str] = set()
        # The run's throughput cases when none runs under algorithm NONE (set at
        # collection): the baseline test measures them too, the speedup's baseline.
        self.speedup_cases: list[ThroughputCase] = []
        # The baseline's output repetition per case id, measured in this process.
        self.repetition: dict[str, float] = {}
        self.directory = directory
        self._clock = clock
        self._sleep = sleep
        self._poll = poll_interval

    def record(self, outputs: list[lossless.GreedyOutput], label: str) -> None:
        """Keep the baseline (and share it with the other workers)."""
        self.outputs, self.label = outputs, label
        if self.directory is not None:
            lossless.save_baseline(self.directory / self.FILE, outputs, meta={"label": label})

    def done(self, nodeid: str) -> None:
        """A baseline test finished (passed or not); called from its teardown report."""
        if self.directory is not None and nodeid in self.expected:
            (self.directory / f"lossless-done-{_digest(nodeid)}").touch()

    def load(self) -> bool:
        """Whether a baseline is at hand, reading the shared file if need be."""
        if self.outputs is None and self.directory is not None:
            path = self.directory / self.FILE
            if path.exists():
                self.outputs, meta = lossless.load_baseline(path)
                self.label = str(meta.get("label") or "the baseline")
        return self.outputs is not None

    def finished(self) -> bool:
        """Every baseline test of the run is done (in any worker)."""
        if self.directory is None:
            return True  # serially the baseline tests run first (see the session's order)
        return all((self.directory / f"lossless-done-{_digest(n)}").exists() for n in self.expected)

    def wait(self, timeout: float) -> None:
        """Block until the baseline is at hand or every baseline test is done."""
        with contextlib.suppress(statefiles.WaitTimeout):
            statefiles.wait_until(
                lambda: not self.expected or self.load() or self.finished(),
                timeout=timeout,
                what="the non-speculative baseline",
                poll=self._poll,
                clock=self._clock,
                sleep=self._sleep,
            )

    def missing(self) -> str:
        """Why there is no baseline to compare with: one line."""
        if not self.expected:
            return (
                "no non-speculative baseline in this run: run the lossless test under "
                "algorithm=NONE too (the built-in suite does)"
            )
        names = ", ".join(sorted(self.expected))
        if self.finished():
            return f"the non-speculative baseline was not recorded: {names} did not pass"
        return f"the non-speculative baseline was not recorded in time: {names} did not finish"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class LosslessChecker:
    """Records the baseline (algorithm NONE) or compares a config against it."""

    def __init__(
        self,
        baseline: LosslessBaseline,
        service: Server,
        node: pytest.Item,
        settings: Settings | None = None,
    ) -> None:
        self.baseline = baseline
        self.service = service
        self.node = node
        self.settings = settings or Settings()

    def outputs(self) -> list[lossless.GreedyOutput]:
        """Greedy outputs of the prompts; a failed request fails the test in one line."""
        failure: str | None = None
        try:
            return lossless.collect_greedy(
                self.service.client,
                LOSSLESS_PROMPTS,
                LOSSLESS_TOKENS,
                bounds=draft_bounds(self.service),
            )
        except (SGLangError, ImplausibleReply) as exc:
            failure = failure_text(self.service, exc)
        pytest.fail(failure, pytrace=False)

    def check(self) -> None:
        """Baseline config: record; speculative config: compare, fail on the first difference."""
        config = self.service.config
        if config.algorithm == "NONE":
            outputs = self.outputs()
            self._same_server()
            self.baseline.record(outputs, config.label())
            unmeasured = self._measure_speedup_cases()
            self._record(True, "; ".join(["baseline recorded", *unmeasured]))
            return
        if not self.baseline.load() or self.baseline.outputs is None:
            pytest.skip(self.baseline.missing())
        problems = lossless.compare_outputs(self.baseline.outputs, self.outputs())
        self._same_server()
        detail = "; ".join(problems) if problems else "identical to the baseline"
        self._record(not problems, detail)
        if problems:
            pytest.fail(
                f"{config.label()} is not lossless against {self.baseline.label}: {problems[0]}",
                pytrace=False,
            )

    def _same_server(self) -> None:
        """Fail (recording the failure) when the server is not the gate's any more."""
        changed = self.service.changed()
        if changed is not None:
            self._record(False, changed)
            pytest.fail(changed, pytrace=False)

    def _measure_speedup_cases(self) -> list[str]:
        """Measure the run's throughput cases on this baseline server, for the speedup
        (:attr:`LosslessBaseline.speedup_cases`); returns a line per case it could not."""
        measured: list[dict[str, Any]] = []
        missed: list[str] = []
        label = self.service.config.label()
        for case in self.baseline.speedup_cases:
            try:
                metrics = run_case(
                    self.service.client,
                    case,
                    self.settings.rounds,
                    config=label,
                    slo=self.settings.slo,
                    continuous=continuous_requests(self.settings, case),
                    bounds=draft_bounds(self.service),
                )
            except (ThroughputError, SGLangError, ImplausibleReply) as exc:
                missed.append(f"speedup baseline {case.id} not measured: {exc}")
                continue
            if metrics.repetition is not None:
                self.baseline.repetition[case.id] = metrics.repetition
            key = pairing_key(self.node.nodeid, {"case": case.id})
            measured.append({"case": case.id, "key": key, "metrics": metrics.to_extra_info()})
        if measured:
            self.node.user_properties.append((BASELINE_CASES, measured))
        return missed

    def _record(self, passed: bool, detail: str) -> None:
        self.node.user_properties.append((RECORD, {"passed": passed, "detail": detail}))
