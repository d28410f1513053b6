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
import warnings
from collections.abc import Callable
from dataclasses import KW_ONLY, asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest

from pytest_specdecode import statefiles
from pytest_specdecode.client.sglang import SGLangError
from pytest_specdecode.config.settings import Settings
from pytest_specdecode.output.progress import Progress
from pytest_specdecode.records import BASELINE_CASES, RECORD
from pytest_specdecode.replies import DraftBounds, ImplausibleReply
from pytest_specdecode.server import Server
from pytest_specdecode.throughput import fingerprint, lossless
from pytest_specdecode.throughput.calibration import Calibration
from pytest_specdecode.throughput.comparison import pairing_key
from pytest_specdecode.throughput.load import BenchmarkLike, RoundResult, ThroughputError, run_case
from pytest_specdecode.throughput.metrics import Metrics, extra_info
from pytest_specdecode.throughput.workload import ThroughputCase, context_window

# Greedy prompts of the lossless check: code and prose, short and long, enough replies
# that a drafter wrong in one reply of ten is seen (0.9**100: once in 38,000 runs).
_TOPICS = (
    ("fibonacci", "the printing press", "the Moon", "speculative decoding"),
    ("binary_search", "the steam engine", "Mars", "a hash table"),
    ("merge_sort", "the telescope", "the Sun", "garbage collection"),
    ("is_prime", "the railway", "Jupiter", "a B-tree"),
    ("gcd", "radio", "Saturn", "virtual memory"),
    ("flatten", "the compass", "Venus", "a mutex"),
    ("reverse_words", "paper money", "comets", "TCP congestion control"),
    ("transpose", "the telegraph", "the Milky Way", "a bloom filter"),
    ("run_length", "the microscope", "black holes", "copy-on-write"),
    ("parse_csv", "vaccines", "the tides", "a write-ahead log"),
    ("levenshtein", "the bicycle", "auroras", "consistent hashing"),
    ("topo_sort", "photography", "eclipses", "branch prediction"),
    ("lru_cache", "the lighthouse", "meteors", "a skip list"),
    ("dijkstra", "the printing of maps", "Neptune", "tail calls"),
    ("to_roman", "glassmaking", "asteroids", "reference counting"),
    ("matrix_power", "the loom", "neutron stars", "an event loop"),
    ("quickselect", "aviation", "Pluto", "a trie"),
    ("word_count", "the clock", "the ozone layer", "database indexes"),
    ("bit_count", "canals", "supernovae", "a ring buffer"),
    ("median", "the typewriter", "Mercury", "speculative execution"),
    ("chunk", "electric light", "the Kuiper belt", "a lock-free queue"),
    ("rotate", "the phonograph", "solar wind", "a heap"),
    ("dedupe", "bridges", "Uranus", "memoization"),
    ("balanced_parens", "the printing of newspapers", "the Big Bang", "a semaphore"),
    ("fizzbuzz", "windmills", "galaxies", "JIT compilation"),
)
LOSSLESS_PROMPTS = {
    f"{kind}-{n}": text
    for n, (name, history, facts, idea) in enumerate(_TOPICS)
    for kind, text in (
        ("code", f"def {name}(n):\n    "),
        ("prose", f"The history of {history} begins"),
        ("list", f"Ten facts about {facts}:\n1."),
        ("chat", f"Explain {idea} to a new engineer in three sentences."),
    )
}
LOSSLESS_TOKENS = 64
LOSSLESS_CONCURRENCY = 32  # one batch shape per run; the baseline's second run, others
# pytest-benchmark's warning at teardown for a fixture never called.
UNUSED_BENCHMARK = "Benchmark fixture was not used at all"
# In a record measured under pytest-xdist, where pytest-benchmark is off.
PYTEST_BENCHMARK_OFF = (
    "off under pytest-xdist: measured by the plugin's load client alone (this worker held its "
    "host alone); not in pytest-benchmark's table, --benchmark-save or --benchmark-compare"
)


@dataclass(eq=False, repr=False)  # a fixture's object: identity, and no repr of its settings
class ThroughputRunner:
    """Runs one throughput case; rounds go through pytest-benchmark."""

    settings: Settings
    service: Server
    node: pytest.Item
    progress: Progress | None = None
    # The run's NONE baseline, for its output repetition per case (beside this one's).
    baseline: LosslessBaseline | None = None
    # An xdist worker that holds its host alone (no other worker can load its server).
    alone: bool = False
    # The run's null-server calibration: a round it finds disturbed is run again.
    calibration: Calibration | None = None

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
            metrics = measure(
                self.service, self.settings, case, benchmark, self.calibration, on_round=show
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
            self._quiet_unused_benchmark()
            pytest.fail(failure, pytrace=False)
        if unbenched:
            metrics.pytest_benchmark = PYTEST_BENCHMARK_OFF
        beside = self._repetition_baseline(case.id, metrics.repetition)
        metrics.repetition_baseline = beside
        info = extra_info(metrics)
        if benchmark is not None:
            benchmark.extra_info.update(info)  # run_case's, and now repetition_baseline
            benchmark.extra_info["simulated"] = self.service.simulated
            # Where it ran: the compare gate's noise counts only saved runs of this setup.
            benchmark.extra_info[fingerprint.KEY] = fingerprint.of_run(
                self.settings, simulated=self.service.simulated
            )
            # A saved run of algorithm NONE is a speedup baseline for later runs.
            benchmark.extra_info["algorithm"] = self.service.config.algorithm
        self.node.user_properties.append((RECORD, case_record(self.node, case, info)))
        return info

    @staticmethod
    def _quiet_unused_benchmark() -> None:
        """A case that fails before its first round says why; pytest-benchmark's teardown
        warning (its fixture "was not used at all") would only add noise. pytest restores
        the warning filters after each test, so this one ends with the case."""
        warnings.filterwarnings("ignore", message=UNUSED_BENCHMARK)

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


def measure(
    service: Server,
    settings: Settings,
    case: ThroughputCase,
    benchmark: BenchmarkLike | None = None,
    calibration: Calibration | None = None,
    *,
    on_round: Callable[[str], None] | None = None,
) -> Metrics:
    """Measure ``case`` against ``service`` the way every case of the run is measured (a
    config's own cases and the lossless baseline's speedup cases alike, so their prompts
    and rounds pair): the settings' rounds, SLO and load mode, the config's draft bounds,
    prompts cut to the server's context, and rounds the calibration finds disturbed run
    again (closed-loop cases only: the calibration has no rates)."""
    disturbed = None
    if calibration is not None and not case.open_loop:
        found = calibration

        def disturbed(rnd: RoundResult) -> bool:
            return found.disturbed(case.concurrency, rnd.results)

    return run_case(
        service.client,
        case,
        settings.rounds,
        benchmark,
        config=service.config.label(),
        on_round=on_round,
        slo=settings.slo,
        continuous=continuous_requests(settings, case),
        bounds=draft_bounds(service),
        window=context_window(service.server_info),
        disturbed=disturbed,
        wait=settings.client_wait,
    )


def continuous_requests(settings: Settings, case: ThroughputCase) -> int:
    """Requests per round of a continuous closed loop (0: synchronized rounds)."""
    if settings.load_mode != "continuous" or case.open_loop:
        return 0
    return settings.continuous_requests or 4 * case.concurrency


def draft_bounds(service: Server) -> DraftBounds:
    """What the config of ``service`` allows per verify step (its replies are checked against)."""
    return DraftBounds.of(service.config, service.server_info)


def case_record(node: pytest.Item, case: ThroughputCase, info: dict[str, Any]) -> dict[str, Any]:
    """What a test records of a measured case: its id, its key across configs, its figures."""
    return {"case": case.id, "key": pairing_key(node.nodeid, {"case": case.id}), "metrics": info}


def failure_text(service: Server, exc: Exception) -> str:
    """One line for a failed measurement; when the server died, its exit and log tail."""
    gone = service.gone(settle=2.0)
    if gone is not None:
        return str(gone)
    return f"{service.config.label()}: {exc}"


@dataclass(eq=False, repr=False)  # shared state: identity, and no repr of the outputs
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

    FILE: ClassVar[str] = "lossless-baseline.json"

    directory: Path | None = None
    _: KW_ONLY
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    poll_interval: float = 0.1
    # One list of outputs per baseline run (each under another batch shape).
    runs: list[list[lossless.GreedyOutput]] | None = field(default=None, init=False)
    label: str | None = field(default=None, init=False)
    expected: set[str] = field(default_factory=set, init=False)
    # The run's throughput cases when none runs under algorithm NONE (set at
    # collection): the baseline test measures them too, the speedup's baseline.
    speedup_cases: list[ThroughputCase] = field(default_factory=list, init=False)
    # The baseline's output repetition per case id, measured in this process.
    repetition: dict[str, float] = field(default_factory=dict, init=False)

    def record(self, runs: list[list[lossless.GreedyOutput]], label: str) -> None:
        """Keep the baseline's runs (and share them with the other workers)."""
        self.runs, self.label = runs, label
        if self.directory is not None:
            lossless.save_baseline(self.directory / self.FILE, runs, meta={"label": label})

    def done(self, nodeid: str) -> None:
        """A baseline test finished (passed or not); called from its teardown report."""
        if self.directory is not None and nodeid in self.expected:
            (self.directory / f"lossless-done-{_digest(nodeid)}").touch()

    def load(self) -> bool:
        """Whether a baseline is at hand, reading the shared file if need be."""
        if self.runs is None and self.directory is not None:
            path = self.directory / self.FILE
            if path.exists():
                self.runs, meta = lossless.load_baseline(path)
                self.label = str(meta.get("label") or "the baseline")
        return self.runs is not None

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
                poll=self.poll_interval,
                clock=self.clock,
                sleep=self.sleep,
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


@dataclass(eq=False, repr=False)  # a fixture's object: identity, and no repr of its settings
class LosslessChecker:
    """Records the baseline (algorithm NONE) or compares a config against it."""

    baseline: LosslessBaseline
    service: Server
    node: pytest.Item
    settings: Settings = field(default_factory=Settings)
    # The run's null-server calibration, for the speedup cases the baseline measures.
    calibration: Calibration | None = None

    def outputs(self, *, reverse: bool = False) -> list[lossless.GreedyOutput]:
        """Greedy outputs of the prompts (in reverse order: other batches); a failed
        request fails the test in one line."""
        failure: str | None = None
        try:
            return lossless.collect_greedy(
                self.service.client,
                LOSSLESS_PROMPTS,
                LOSSLESS_TOKENS,
                bounds=draft_bounds(self.service),
                concurrency=LOSSLESS_CONCURRENCY,
                reverse=reverse,
            )
        except (SGLangError, ImplausibleReply) as exc:
            failure = failure_text(self.service, exc)
        pytest.fail(failure, pytrace=False)

    def check(self) -> None:
        """Baseline config: record two runs (two batch orders, so the gate sees where the
        engine's own numerics flip); speculative config: judge its first divergences and
        fail on a drafter defect (:mod:`pytest_specdecode.throughput.lossless`)."""
        config = self.service.config
        started = time.monotonic()
        if config.algorithm == "NONE":
            runs = [self.outputs(), self.outputs(reverse=True)]
            self._same_server()
            self.baseline.record(runs, config.label())
            flips = sum(a != b for a, b in zip(*runs, strict=True))
            seconds = time.monotonic() - started
            unmeasured = self._measure_speedup_cases()
            detail = f"baseline recorded: {len(runs[1])} prompts twice, {flips} replies differ"
            self._record(True, "; ".join([detail, *unmeasured]), seconds=seconds)
            return
        if not self.baseline.load() or self.baseline.runs is None:
            pytest.skip(self.baseline.missing())
        mine = self.outputs()
        self._same_server()
        verdict = lossless.judge(self.baseline.runs, mine, self.settings.lossless_margin)
        label = f"{config.label()} against {self.baseline.label}"
        self._record(
            verdict.passed,
            verdict.detail(label),
            verdict=verdict,
            seconds=time.monotonic() - started,
        )
        if not verdict.passed:
            pytest.fail(verdict.detail(label), pytrace=False)

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
        for case in self.baseline.speedup_cases:
            try:
                metrics = measure(self.service, self.settings, case, None, self.calibration)
            except (ThroughputError, SGLangError, ImplausibleReply) as exc:
                missed.append(f"speedup baseline {case.id} not measured: {exc}")
                continue
            if metrics.repetition is not None:
                self.baseline.repetition[case.id] = metrics.repetition
            measured.append(case_record(self.node, case, extra_info(metrics)))
        if measured:
            self.node.user_properties.append((BASELINE_CASES, measured))
        return missed

    def _record(
        self,
        passed: bool,
        detail: str,
        *,
        verdict: lossless.Verdict | None = None,
        seconds: float | None = None,
    ) -> None:
        record: dict[str, Any] = {"passed": passed, "detail": detail}
        if seconds is not None:
            record["seconds"] = round(seconds, 3)
        if verdict is not None:
            record.update(
                replies=verdict.replies,
                defects=len(verdict.defects),
                numerics=len(verdict.numerics),
                divergences=[asdict(d) for d in verdict.divergences],
            )
        self.node.user_properties.append((RECORD, record))
