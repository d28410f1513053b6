"""Rounds of concurrent streaming requests, and cases made of rounds.

A closed-loop round sends C streaming ``/generate`` requests at once (on one
event loop, one connection each: :mod:`~pytest_specdecode.throughput.aioload`)
and waits for all of them; a continuous closed-loop round sends N requests
keeping C in flight. An open-loop round (a request-rate case) releases its
requests at Poisson arrival times, seeded by the case and round so every config
sees the same arrivals, with at most ``max_concurrency`` in flight. A case
flushes the prefix cache, runs one uncounted warm-up round (all at once), then
its counted rounds, through ``benchmark.pedantic`` when pytest-benchmark is active.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pytest_specdecode import replies
from pytest_specdecode.client.limits import DEFAULT_LIMITS, Limits
from pytest_specdecode.client.sglang import GenerateResult, SGLangClient
from pytest_specdecode.config.load_options import Slo
from pytest_specdecode.errors import SpecDecodeError
from pytest_specdecode.throughput.fdlimit import FdLimitError, ensure_fds
from pytest_specdecode.throughput.metrics import Metrics, case_metrics, extra_info
from pytest_specdecode.throughput.workload import (
    Prompt,
    PromptBuilder,
    PromptTooLong,
    ThroughputCase,
    fit_error,
    prompt_room,
)

if TYPE_CHECKING:
    from pytest_specdecode.throughput.aioload import Sleep


class ThroughputError(SpecDecodeError):
    """Requests of a round failed; the message is one line with the server's text."""


@dataclass
class RequestRecord:
    """One request of a round: its result, or the one-line error that ended it."""

    result: GenerateResult | None = None
    error: str | None = None


@dataclass
class RoundResult:
    """All requests of one round and the round's wall-clock span."""

    start: float
    end: float
    requests: list[RequestRecord] = field(default_factory=list)
    cpu_s: float | None = None  # the load client's CPU seconds for the round

    @property
    def wall_time(self) -> float:
        """Seconds from releasing the requests to the last one finishing."""
        return self.end - self.start

    @property
    def results(self) -> list[GenerateResult]:
        """Results of the requests that succeeded."""
        return [r.result for r in self.requests if r.result is not None]

    @property
    def errors(self) -> list[str]:
        """One line per failed request."""
        return [r.error for r in self.requests if r.error is not None]


class BenchmarkLike(Protocol):
    """What :func:`run_case` needs of pytest-benchmark's ``benchmark`` fixture (the
    arguments of ``pedantic`` it passes)."""

    extra_info: dict[str, Any]

    def pedantic(
        self,
        target: Callable[..., Any],
        *,
        setup: Callable[[], Any] | None = ...,
        rounds: int = ...,
        iterations: int = ...,
    ) -> Any: ...


def arrival_offsets(rate: float, n: int, seed: str) -> list[float]:
    """Seconds after the round's start at which each of ``n`` requests arrives.

    A Poisson process at ``rate`` requests per second: exponential gaps drawn
    from ``random.Random(seed)``, the first request at once (as SGLang's
    ``bench_serving`` does).
    """
    if not rate > 0:
        raise ValueError(f"rate must be > 0, got {rate!r}")
    rng = random.Random(seed)
    gaps = [0.0] + [rng.expovariate(rate) for _ in range(max(n - 1, 0))]
    return list(itertools.accumulate(gaps))[:n]


def run_round(
    client: SGLangClient,
    prompts: Sequence[Prompt | str],
    max_tokens: int,
    *,
    ignore_eos: bool = True,
    temperature: float = 0.0,
    clock: Callable[[], float] = time.perf_counter,
    arrivals: Sequence[float] | None = None,
    max_concurrency: int = 0,
    sleep: Sleep = asyncio.sleep,
    limits: Limits = DEFAULT_LIMITS,
    wait: str = "auto",
) -> RoundResult:
    """Send every prompt as a streaming request and wait for all of them.

    ``arrivals`` and ``max_concurrency`` (its ``in_flight``) say how the round is
    driven (:func:`~pytest_specdecode.throughput.aioload.drive`): on one event loop, one
    connection per request in flight, to ``client``'s server with its API key. Failed
    requests are recorded, not raised: see :func:`raise_for_errors`. ``wait`` is how the
    loop waits for bytes (``--dflash-client-wait``, :attr:`~.aioload.Target.polls`).
    """
    if arrivals is not None and len(arrivals) != len(prompts):
        raise ValueError(f"{len(arrivals)} arrival times for {len(prompts)} prompts")
    if not prompts:
        now = clock()
        return RoundResult(now, now)
    # Imported here: aiohttp is a fifth of a run's start-up, and a run without
    # throughput cases never sends a round.
    from pytest_specdecode.throughput.aioload import Request, Target, body_bytes, drive, run_sync

    headers = {"Authorization": f"Bearer {client.api_key}"} if client.api_key else {}
    target = Target(client.base_url, headers, limits, wait=wait)
    requests = [
        Request(
            body_bytes(
                p.text if isinstance(p, Prompt) else p,
                max_tokens,
                temperature=temperature,
                ignore_eos=ignore_eos,
            ),
            max_tokens,
        )
        for p in prompts
    ]
    ensure_fds(max_concurrency if max_concurrency > 0 else len(requests))
    start, cpu_s = run_sync(
        drive(
            target, requests, clock=clock, arrivals=arrivals, in_flight=max_concurrency, sleep=sleep
        )
    )
    records = [RequestRecord(r.result, r.error) for r in requests]
    end = max([r.result.end_time for r in records if r.result is not None] or [clock()])
    return RoundResult(start, end, records, cpu_s)


def raise_for_errors(result: RoundResult, what: str) -> None:
    """Raise :class:`ThroughputError` naming ``what`` if any request of the round failed."""
    errors = result.errors
    if errors:
        raise ThroughputError(
            f"{len(errors)}/{len(result.requests)} requests failed in {what}: {errors[0]}"
        )


REMEASURES = 2
"""Times a counted round on a loaded machine is measured again before it counts as it is."""


def _prompt_batches(
    client: SGLangClient,
    case: ThroughputCase,
    size: int,
    n_batches: int,
    builder: PromptBuilder | None,
    window: int | None,
) -> Iterator[list[Prompt]]:
    builder = builder or PromptBuilder(
        client.count_tokens, domain=case.domain, max_prompt=prompt_room(window, case.max_tokens)
    )
    try:
        prompts = builder.build(case.context, size * n_batches)
    except PromptTooLong as exc:
        raise ThroughputError(f"{case.id}: {exc}") from None
    for i in range(n_batches):
        yield prompts[i * size : (i + 1) * size]


def run_case(
    client: SGLangClient,
    case: ThroughputCase,
    rounds: int,
    benchmark: BenchmarkLike | None = None,
    *,
    prompt_builder: PromptBuilder | None = None,
    warmup: bool = True,
    config: str | None = None,
    clock: Callable[[], float] = time.perf_counter,
    on_round: Callable[[str], None] | None = None,
    slo: Slo = (),
    sleep: Sleep = asyncio.sleep,
    continuous: int = 0,
    limits: Limits = DEFAULT_LIMITS,
    bounds: replies.DraftBounds = replies.UNKNOWN,
    window: int | None = None,
    disturbed: Callable[[RoundResult], bool] | None = None,
    wait: str = "auto",
) -> Metrics:
    """Run one throughput case and return its metrics.

    Builds fresh prompts for every round (and the warm-up), flushes the
    prefix cache, runs one uncounted warm-up round, then ``rounds`` counted
    rounds. With ``benchmark`` the rounds go through ``benchmark.pedantic``
    (so pytest-benchmark records, saves and compares them) and the metrics
    are stored in ``benchmark.extra_info`` (with ``config``, the config's
    label, when given: compare and sweep tables use it); without it (pytest-benchmark
    is off under xdist) the rounds are timed here. ``on_round`` hears each round's
    label ("warm-up round", "round 2/3") as it starts, for progress displays. A failed
    request raises :class:`ThroughputError` with the server's error text. ``slo`` adds
    goodput and attainment to the metrics. ``bounds`` (the config's draft positions) is
    what every counted reply is checked against before it becomes a figure
    (:mod:`pytest_specdecode.replies`). ``window`` is the server's
    context length (:func:`~pytest_specdecode.throughput.workload.context_window`): a
    case whose prompt and output cannot fit in it is a :class:`ThroughputError` before
    any request, and no prompt is longer than what is left of it.

    A request-rate case sends its warm-up round all at once and its counted
    rounds at seeded Poisson arrivals (``case.id`` and the round number).

    With ``continuous`` N (closed-loop cases only) a counted round sends N
    requests keeping ``case.concurrency`` in flight the whole time, so the
    server never idles at the round's tail; the warm-up round is one
    synchronized batch of ``case.concurrency``.

    A counted round that ``disturbed`` finds was run on a loaded machine (the
    run's calibration, :meth:`~pytest_specdecode.throughput.calibration.Calibration.disturbed`)
    is measured again with the same prompts (the prefix cache flushed first), up to
    :data:`REMEASURES` times; the last one counts. One spike of the machine's load
    then moves no figure, and a load that lasts still shows (the case is client-limited).
    """
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds!r}")
    if continuous < 0:
        raise ValueError(f"continuous must be >= 0, got {continuous!r}")
    continuous = 0 if case.open_loop else continuous
    try:
        ensure_fds(case.concurrency or case.round_requests)
    except FdLimitError as exc:
        raise ThroughputError(f"{case.id}: {exc}") from None
    if (too_long := fit_error(case, window)) is not None:
        raise ThroughputError(too_long)
    size = continuous or case.round_requests
    batches = _prompt_batches(client, case, size, rounds + int(warmup), prompt_builder, window)
    client.flush_cache()

    def one_round(
        batch: list[Prompt], label: str, arrivals: list[float] | None, in_flight: int
    ) -> RoundResult:
        if on_round is not None:
            on_round(label)
        result = run_round(
            client,
            batch,
            case.max_tokens,
            ignore_eos=case.ignore_eos,
            clock=clock,
            arrivals=arrivals,
            max_concurrency=in_flight,
            sleep=sleep,
            limits=limits,
            wait=wait,
        )
        raise_for_errors(result, f"{case.id} ({label})")
        return result

    if warmup:
        one_round(next(batches)[: case.round_requests], "warm-up round", None, 0)
    counted: list[RoundResult] = []
    remeasured = [0]

    def target(batch: list[Prompt]) -> RoundResult:
        number = len(counted) + 1
        arrivals = (
            arrival_offsets(case.rate, len(batch), f"{case.id}:round{number}")
            if case.open_loop
            else None
        )
        in_flight = case.concurrency if case.open_loop or continuous else 0
        label = f"round {number}/{rounds}"
        result = one_round(batch, label, arrivals, in_flight)
        for _ in range(REMEASURES):
            if disturbed is None or not disturbed(result):
                break
            client.flush_cache()  # the same prompts again, not served from the cache
            remeasured[0] += 1
            result = one_round(batch, f"{label} again (machine busy)", arrivals, in_flight)
        counted.append(result)
        return result

    if benchmark is None:
        for _ in range(rounds):
            target(next(batches))
    else:
        benchmark.pedantic(
            target,
            setup=lambda: ((next(batches),), {}),
            rounds=rounds,
            iterations=1,
        )
    mode = "rate" if case.open_loop else ("continuous" if continuous else "rounds")
    metrics = case_metrics(
        case, counted, slo=slo, load_mode=mode, bounds=bounds, remeasured=remeasured[0]
    )
    if benchmark is not None:
        benchmark.extra_info.update(extra_info(metrics))
        if config is not None:
            benchmark.extra_info["config"] = config
    return metrics
