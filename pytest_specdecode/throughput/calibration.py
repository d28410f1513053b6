"""The load client's own ceiling on this machine, measured against a null server.

Before a run's first throughput case the bundled simulator is started at
``--sim-time-scale 0`` (it models no GPU time: every token costs only what the
machine spends serving it) and the plugin's own load client
(:func:`pytest_specdecode.throughput.load.run_round`) sends a few rounds at each
concurrency of the run's cases. The best output tok/s it reaches there is what
this client and this machine can measure at all; the per-request overhead
(client e2e minus the server's own) is what the client costs when nothing else
is slow. :mod:`pytest_specdecode.report.client_limit` judges each case against
these figures.

The calibration is short (its rounds have :data:`BUDGET_S` once the null server is
up, the start :data:`START_S`); a concurrency it had no time for is left out (its
cases are then judged by overhead alone), and a calibration that cannot start is one
line in the report, never the run's error.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from pytest_specdecode import statefiles
from pytest_specdecode.client.sglang import GenerateResult, SGLangClient
from pytest_specdecode.output import figures
from pytest_specdecode.processes import children
from pytest_specdecode.throughput import metrics

BUDGET_S = 3.0
"""The calibration's rounds, from the null server being up to the last one."""

START_S = 60.0
"""The null server's start (as long as a loaded machine may need to start a Python process)."""

ROUNDS = 2
"""Rounds per concurrency; the best one is the ceiling (a slow round is the machine's)."""

MAX_CONCURRENCY = 256
"""Concurrencies above this are not calibrated (their rounds alone would pass the budget)."""

LOADED_SHARE = 0.10
"""Client overhead p99 above this share of e2e p50 may move a round's tok/s by as much:
more than the noise between rounds, so (with :data:`OVERHEAD_FACTOR`) a loaded machine."""

OVERHEAD_FACTOR = 2.0
"""...and above this many times the null server's overhead p99: the machine was loaded."""


def loaded(overhead_ms_p99: float, e2e_ms_p50: float, null_ms_p99: float) -> bool:
    """Whether requests with this client overhead p99 and e2e p50 ran on a machine busier
    than the client's own cost against the null server (``null_ms_p99``) explains."""
    return (
        overhead_ms_p99 > LOADED_SHARE * e2e_ms_p50
        and overhead_ms_p99 > OVERHEAD_FACTOR * null_ms_p99
    )


@dataclass(frozen=True)
class Ceiling:
    """What the client reached at one concurrency against the null server."""

    concurrency: int
    tok_s: float
    overhead_ms_p99: float | None


@dataclass
class Calibration:
    """The run's calibration: a ceiling per concurrency, or why there is none."""

    ceilings: dict[int, Ceiling] = field(default_factory=dict)
    max_tokens: int = 0
    seconds: float = 0.0
    error: str | None = None
    skipped: list[int] = field(default_factory=list)  # concurrencies out of time

    def disturbed(self, concurrency: int, results: Sequence[GenerateResult]) -> bool:
        """Whether a round of ``results`` at ``concurrency`` ran on a loaded machine
        (:func:`loaded`); never without a ceiling for it or the servers' own e2e."""
        ceiling = self.ceilings.get(concurrency)
        overheads = metrics.client_overheads(results)
        if ceiling is None or ceiling.overhead_ms_p99 is None or not overheads:
            return False
        p99 = metrics.Percentiles.of(overheads).scaled(1000).p99
        e2e = metrics.Percentiles.of([r.e2e_latency for r in results]).scaled(1000).p50
        return p99 is not None and e2e is not None and loaded(p99, e2e, ceiling.overhead_ms_p99)

    def to_json(self) -> dict[str, Any]:
        return {
            "method": "the bundled simulator at --sim-time-scale 0 on 127.0.0.1, driven by the "
            f"plugin's load client: {ROUNDS} rounds per concurrency, the best round's output "
            "tok/s is the ceiling",
            "max_tokens": self.max_tokens,
            "seconds": round(self.seconds, 3),
            "ceilings": [asdict(self.ceilings[c]) for c in sorted(self.ceilings)],
            "skipped": sorted(self.skipped),
            "error": self.error,
        }


def null_server_argv(port: int) -> list[str]:
    """The simulator with no modelled time and no load or warm-up phase."""
    return [
        sys.executable,
        *("-m", "pytest_specdecode.sim", "--host", "127.0.0.1", "--port", str(port)),
        *("--sim-time-scale", "0", "--sim-load-seconds", "0", "--sim-warmup-seconds", "0"),
    ]


def _healthy(url: str, proc: subprocess.Popen[bytes]) -> bool:
    if children.peek_exit(proc) is not None:
        raise RuntimeError(f"the null server exited with status {proc.returncode or '?'}")
    try:
        with urllib.request.urlopen(url + "/health", timeout=0.5) as reply:
            return bool(reply.status == 200)
    except (OSError, urllib.error.URLError):
        return False


@contextlib.contextmanager
def _null_server(deadline: float) -> Any:
    port = children.free_port()
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            null_server_argv(port),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            statefiles.wait_until(
                lambda: _healthy(url, proc),
                timeout=max(0.1, deadline - time.monotonic()),
                what="the calibration's null server",
                poll=0.02,
            )
            yield url
        finally:
            children.signal_group(proc, signal.SIGKILL)
            proc.wait(timeout=10)


def measure_round(
    url: str, concurrency: int, max_tokens: int, wait: str = "sleep"
) -> tuple[float, list[float]]:
    """One round of ``concurrency`` requests: its output tok/s and per-request overheads.
    ``wait`` is how the run's own rounds wait (``poll`` or ``sleep``): the null server is
    on 127.0.0.1, where ``auto`` would always sleep."""
    from pytest_specdecode.throughput.load import raise_for_errors, run_round

    client = SGLangClient(url, timeout=10.0)
    try:
        prompts = [f"calibration request {i}" for i in range(concurrency)]
        result = run_round(client, prompts, max_tokens, wait=wait)
    finally:
        client.close()
    raise_for_errors(result, f"the calibration round at c{concurrency}")
    tokens = sum(r.completion_tokens for r in result.results)
    rate = tokens / result.wall_time if result.wall_time > 0 else 0.0
    return rate, metrics.client_overheads(result.results)


Round = Callable[[str, int, int], tuple[float, list[float]]]


def calibrate(
    concurrencies: Iterable[int],
    max_tokens: int,
    *,
    budget: float = BUDGET_S,
    server: Callable[[float], Any] = _null_server,
    one_round: Round = measure_round,
    clock: Callable[[], float] = time.monotonic,
) -> Calibration:
    """The client's ceiling at each of ``concurrencies`` (lowest first, the rounds within
    ``budget`` from when the null server is up)."""
    wanted = sorted({c for c in concurrencies if 0 < c <= MAX_CONCURRENCY})
    found = Calibration(max_tokens=max_tokens)
    started = clock()
    try:
        with server(started + START_S) as url:
            # The rounds' budget starts once the null server is up: on a loaded machine
            # its start alone (a Python process importing the simulator) took the whole
            # budget, leaving concurrencies uncalibrated in one run and not in the next.
            deadline = clock() + budget
            for position, concurrency in enumerate(wanted):
                if clock() >= deadline:
                    found.skipped = wanted[position:]
                    break
                measured = [one_round(url, concurrency, max_tokens) for _ in range(ROUNDS)]
                overheads = [spent for _, round_spent in measured for spent in round_spent]
                p99 = metrics.Percentiles.of(overheads).scaled(1000).p99
                best = max(rate for rate, _ in measured)
                found.ceilings[concurrency] = Ceiling(concurrency, best, p99)
    except Exception as exc:  # a calibration never ends the run: it is one line instead
        found.error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
    found.seconds = clock() - started
    return found


def case_concurrencies(cases: Sequence[Any]) -> list[int]:
    """The concurrencies a run's throughput cases keep in flight (closed-loop ones)."""
    return sorted({c.concurrency for c in cases if not c.open_loop and c.concurrency > 0})


def summary_line(found: Calibration) -> str:
    """The run's one line about its calibration."""
    if found.error is not None:
        return (
            f"dflash: load client calibration failed ({found.error}): no case is judged "
            "client-limited by it (--dflash-client-calibration off skips it)"
        )
    shown = ", ".join(
        f"c{c} {figures.tok_s(found.ceilings[c].tok_s)}" for c in sorted(found.ceilings)
    )
    late = f"; no time for c{', c'.join(map(str, found.skipped))}" if found.skipped else ""
    return (
        f"dflash: load client ceiling against a null server on this machine ({found.seconds:.1f} "
        f"s): {shown or 'none measured'}{late}; cases above half of it are client-limited"
    )
