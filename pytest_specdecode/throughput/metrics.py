"""The metrics defined in docs/metrics.md, computed from finished rounds.

Token counts come from the server's ``completion_tokens``; chunk counts only
feed the chunk metrics (ITL, tokens per chunk), because one chunk may carry
several speculated tokens. Per round, tok/s, mean TPOT, accept length and
mean per-request tok/s give one value each; ``intervals`` holds their mean
and 95% interval over the rounds (:mod:`~pytest_specdecode.throughput.stats`)
and the values themselves, so a later run can be compared with this one.
The acceptance histogram is SGLang's ``spec_correct_drafts_histogram``
(index: correct drafts in a verify step, value: steps) summed over requests.
A case's figures are one :class:`Metrics`, the struct the JSON report holds them
in; :func:`extra_info` gives its flat keys for ``benchmark.extra_info``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec

from pytest_specdecode import replies
from pytest_specdecode.config.load_options import Slo, slo_text
from pytest_specdecode.throughput import stats
from pytest_specdecode.throughput.quality import TextSample

if TYPE_CHECKING:
    from pytest_specdecode.client.sglang import GenerateResult
    from pytest_specdecode.throughput.load import RoundResult
    from pytest_specdecode.throughput.workload import ThroughputCase


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) with linear interpolation; ``None`` if empty."""
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be within 0..100, got {q!r}")
    if not values:
        return None
    data = sorted(values)
    pos = (len(data) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


class Percentiles(NamedTuple):
    """p50, p90 and p99 of one quantity (``None`` where there were no samples)."""

    p50: float | None
    p90: float | None
    p99: float | None

    @classmethod
    def of(cls, values: Sequence[float]) -> Percentiles:
        """Percentiles of ``values``."""
        return cls(percentile(values, 50), percentile(values, 90), percentile(values, 99))

    def scaled(self, factor: float) -> Percentiles:
        """Each value times ``factor`` (seconds to milliseconds)."""
        return Percentiles(*(None if v is None else v * factor for v in self))


def request_tpot(result: GenerateResult) -> float | None:
    """(e2e - TTFT) / (completion_tokens - 1), or ``None`` with fewer than 2 tokens."""
    ttft = result.ttft
    if ttft is None or result.completion_tokens < 2:
        return None
    return (result.e2e_latency - ttft) / (result.completion_tokens - 1)


def request_itls(result: GenerateResult) -> list[float]:
    """Gaps between consecutive token-carrying chunks of one request."""
    return [b - a for a, b in itertools.pairwise(result.chunk_times)]


# The names under which a case's figures are written (Metrics' fields, and the keys of
# its ``intervals``), for every reader to take from here: a reader spelling one itself reads
# nothing once it is renamed, and the search calls every config infeasible.
TOK_S = "tok_s"
"""Output tokens per second of the case (all requests), per round and overall."""
TPOT_MS = "tpot_ms"
"""Time per output token after the first, in milliseconds (per round: the requests' mean)."""
ACCEPT_LENGTH = "accept_length"
"""Tokens per verify step."""
REQ_TOK_S = "req_tok_s"
"""One request's output tokens per second of its own latency (per round: the mean)."""
ROUND_FIGURES = (TOK_S, TPOT_MS, ACCEPT_LENGTH, REQ_TOK_S)
"""The figures with one value per round: ``intervals`` holds their values and 95% interval."""

# Quantities reported as percentiles; latencies are stored in milliseconds.
_PERCENTILE_FIELDS = ("ttft_ms", TPOT_MS, "itl_ms", "e2e_ms", REQ_TOK_S, "tokens_per_chunk")


def single_key(name: str) -> str:
    """The flat key holding a figure's one value in :func:`extra_info`: the
    median for a quantity given as percentiles (``tpot_ms_p50``), else its own name."""
    return f"{name}_p50" if name in _PERCENTILE_FIELDS else name


class RoundSummary(msgspec.Struct, kw_only=True):
    """A per-round figure's mean and 95% interval over the counted rounds, and the values."""

    mean: float | None = None
    low: float | None = None
    high: float | None = None
    n: int | None = None
    values: list[float] = []


class Metrics(msgspec.Struct, kw_only=True):
    """A throughput case's figures (docs/metrics.md): ``benchmark.extra_info``'s flat
    keys (``throughput/metrics.py``), the percentiles as ``<name>_p50/_p90/_p99``, and
    ``intervals`` by figure name (``tok_s``, ``tpot_ms``, ``accept_length``, ``req_tok_s``)."""

    case: str | None = None
    context: int | None = None
    concurrency: int | None = None
    max_tokens: int | None = None
    rounds: int | None = None
    requests: int | None = None
    errors: int | None = None
    completion_tokens: int | None = None
    prompt_tokens_mean: float | None = None
    wall_time_s: float | None = None
    tok_s: float | None = None
    tok_s_round_min: float | None = None
    tok_s_round_max: float | None = None
    accept_length: float | None = None
    spec_verify_ct: int | None = None
    tokens_per_chunk_mean: float | None = None
    ttft_ms_p50: float | None = None
    ttft_ms_p90: float | None = None
    ttft_ms_p99: float | None = None
    tpot_ms_p50: float | None = None
    tpot_ms_p90: float | None = None
    tpot_ms_p99: float | None = None
    itl_ms_p50: float | None = None
    itl_ms_p90: float | None = None
    itl_ms_p99: float | None = None
    e2e_ms_p50: float | None = None
    e2e_ms_p90: float | None = None
    e2e_ms_p99: float | None = None
    req_tok_s_p50: float | None = None
    req_tok_s_p90: float | None = None
    req_tok_s_p99: float | None = None
    tokens_per_chunk_p50: float | None = None
    tokens_per_chunk_p90: float | None = None
    tokens_per_chunk_p99: float | None = None
    domain: str | None = None
    load: str | None = None
    rate: float | None = None
    intervals: dict[str, RoundSummary | None] | None = None
    accept_histogram: list[int] | None = None
    accept_rate_by_position: list[float] | None = None
    slo: str | None = None
    goodput: float | None = None
    slo_attainment: float | None = None
    load_mode: str | None = None
    client_overhead_ms_p50: float | None = None
    client_overhead_ms_p99: float | None = None
    # The load client's CPU seconds per second of the counted rounds' wall time: near
    # 1.0 its own single core, not the server, was the limit.
    client_cpu_share: float | None = None
    # Output quality (throughput/quality.py): share of repeated word 4-grams over a
    # bounded sample of the replies, how many replies it read, and the start of the
    # most repetitive one (unescaped: whoever shows it escapes it); the baseline's share
    # for the same case, as the runner found it.
    repetition: float | None = None
    repetition_sample: int | None = None
    repetition_excerpt: str | None = None
    repetition_baseline: float | None = None
    # Counted rounds measured again because the machine was loaded during them (load.py).
    remeasured: int | None = None
    # Set under pytest-xdist, where pytest-benchmark is off: why this case is not in its table.
    pytest_benchmark: str | None = None

    def figure(self, name: str) -> Any:
        """The field named ``name`` (a name from ``throughput/metrics.py``), None if unknown."""
        return getattr(self, name, None) if name in self.__struct_fields__ else None

    def interval(self, name: str) -> RoundSummary | None:
        """The per-round summary of figure ``name``, if measured."""
        return (self.intervals or {}).get(name)


RUNNER_FIELDS = ("repetition_baseline", "pytest_benchmark")
"""The fields the throughput runner sets (:func:`case_metrics` does not): written only once set."""


def extra_info(metrics: Metrics) -> dict[str, Any]:
    """Flat JSON-able dict for ``benchmark.extra_info`` and the runner's record
    (``ttft_ms_p50``...)."""
    info: dict[str, Any] = msgspec.to_builtins(metrics)
    for name in RUNNER_FIELDS:
        if info[name] is None:
            del info[name]
    return info


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


MAX_HISTOGRAM = 1024
"""Longest histogram taken from a server (a draft budget is far below; a longer list is junk)."""


def request_histogram(result: GenerateResult) -> list[int] | None:
    """The request's histogram of correct drafts per verify step, if the server sent one."""
    for name in replies.HISTOGRAM_FIELDS:  # SGLang's name, then its older alias
        found = result.meta_info.get(name)
        if (
            isinstance(found, list)
            and 0 < len(found) <= MAX_HISTOGRAM
            and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in found)
        ):
            return list(found)
    return None


def sum_histograms(histograms: Iterable[list[int] | None]) -> list[int] | None:
    """Element-wise sum (lists grow as SGLang's do); None when there is none."""
    found = [hist for hist in histograms if hist is not None]
    if not found:
        return None
    return [sum(column) for column in itertools.zip_longest(*found, fillvalue=0)]


def position_rates(histogram: list[int] | None) -> list[float] | None:
    """Acceptance rate per draft position i (1-based): steps with >= i correct drafts / steps."""
    if not histogram or not sum(histogram):
        return None
    steps = sum(histogram)
    return [sum(histogram[i:]) / steps for i in range(1, len(histogram))]


def meets_slo(result: GenerateResult, slo: Slo) -> bool:
    """Whether one request met every SLO (limits in seconds; a missing TPOT meets it)."""
    measured = {"ttft": result.ttft, "tpot": request_tpot(result), "e2e": result.e2e_latency}
    for name, limit in slo:
        value = measured.get(name)
        if name == "ttft" and value is None:
            return False
        if value is not None and value > limit:
            return False
    return True


def client_overheads(results: Iterable[GenerateResult]) -> list[float]:
    """Per request, the client's e2e latency minus the server's own
    ``meta_info.e2e_latency``, in seconds: time spent in the client and on the
    wire (requests without a server figure are left out)."""
    return [
        r.e2e_latency - r.server_e2e_latency for r in results if r.server_e2e_latency is not None
    ]


def _verify_steps(results: Sequence[GenerateResult]) -> int | None:
    """The verify steps of ``results`` together; None unless every one reported its count."""
    counted = [v for r in results if (v := r.spec_verify_ct) is not None]
    return sum(counted) if results and len(counted) == len(results) else None


def _request_rates(results: Sequence[GenerateResult]) -> list[float]:
    """Each request's output tokens per second of its own latency."""
    return [r.completion_tokens / r.e2e_latency for r in results if r.e2e_latency > 0]


def _round_values(rnd: RoundResult) -> dict[str, float | None]:
    results = rnd.results
    tokens = sum(r.completion_tokens for r in results)
    steps = _verify_steps(results)
    tpots = [t * 1000 for r in results if (t := request_tpot(r)) is not None]
    return {
        TOK_S: tokens / rnd.wall_time if rnd.wall_time > 0 else None,
        TPOT_MS: _mean(tpots),
        ACCEPT_LENGTH: tokens / steps if steps else None,
        REQ_TOK_S: _mean(_request_rates(results)),
    }


def _intervals(per_round: list[dict[str, float | None]]) -> dict[str, RoundSummary | None]:
    out: dict[str, RoundSummary | None] = {}
    for name in ROUND_FIGURES:
        values = [v for r in per_round if (v := r[name]) is not None]
        found = stats.summary(values)
        out[name] = None if found is None else RoundSummary(**found)
    return out


def _percentiles(name: str, values: Sequence[float], factor: float = 1.0) -> dict[str, Any]:
    """Metrics' ``<name>_p50/_p90/_p99`` fields: the percentiles of ``values`` times ``factor``."""
    found = Percentiles.of(values).scaled(factor)
    return {f"{name}_{tag}": v for tag, v in zip(Percentiles._fields, found, strict=True)}


def _cpu_share(rounds: list[RoundResult]) -> float | None:
    """The client's CPU seconds over the rounds' wall seconds (None: a round unmeasured)."""
    wall = sum(rnd.wall_time for rnd in rounds)
    spent = [rnd.cpu_s for rnd in rounds]
    if not rounds or wall <= 0 or any(c is None for c in spent):
        return None
    return sum(c for c in spent if c is not None) / wall


def case_metrics(
    case: ThroughputCase,
    rounds: Iterable[RoundResult],
    *,
    slo: Slo = (),
    load_mode: str | None = None,
    bounds: replies.DraftBounds = replies.UNKNOWN,
    remeasured: int | None = None,
) -> Metrics:
    """Aggregate the counted rounds of ``case`` into :class:`Metrics`.

    Every reply is checked first against what a server running the config
    (``bounds``) could have produced for ``case.max_tokens``: an impossible
    one raises :class:`~pytest_specdecode.replies.ImplausibleReply` and
    becomes no figure.
    """
    rounds = list(rounds)
    results = [r for rnd in rounds for r in rnd.results]
    for result in results:
        replies.check(result, case.max_tokens, bounds)
    errors = sum(len(rnd.errors) for rnd in rounds)
    wall = sum(rnd.wall_time for rnd in rounds)
    tokens = sum(r.completion_tokens for r in results)
    per_round = [_round_values(rnd) for rnd in rounds]
    round_rates = [v for values in per_round if (v := values[TOK_S]) is not None]
    steps = _verify_steps(results)
    ttfts = [t for r in results if (t := r.ttft) is not None]
    tpots = [t for r in results if (t := request_tpot(r)) is not None]
    itls = [gap for r in results for gap in request_itls(r)]
    per_chunk = [float(n) for r in results for n in r.chunk_tokens]
    histogram = sum_histograms(request_histogram(r) for r in results)
    good = sum(meets_slo(r, slo) for r in results) if slo else None
    requests = len(results) + errors
    overhead = Percentiles.of(client_overheads(results)).scaled(1000)
    sample = TextSample()
    for r in results:
        sample.add(r.text)
    return Metrics(
        case=case.id,
        context=case.context,
        concurrency=case.concurrency,
        max_tokens=case.max_tokens,
        rounds=len(rounds),
        requests=requests,
        errors=errors,
        completion_tokens=tokens,
        prompt_tokens_mean=_mean([float(r.prompt_tokens) for r in results]),
        wall_time_s=wall,
        tok_s=tokens / wall if wall > 0 else 0.0,
        tok_s_round_min=min(round_rates) if round_rates else None,
        tok_s_round_max=max(round_rates) if round_rates else None,
        accept_length=tokens / steps if steps else None,
        spec_verify_ct=steps,
        tokens_per_chunk_mean=_mean(per_chunk),
        **_percentiles("ttft_ms", ttfts, 1000),
        **_percentiles(TPOT_MS, tpots, 1000),
        **_percentiles("itl_ms", itls, 1000),
        **_percentiles("e2e_ms", [r.e2e_latency for r in results], 1000),
        **_percentiles(REQ_TOK_S, _request_rates(results)),
        **_percentiles("tokens_per_chunk", per_chunk),
        domain=case.domain,
        load=case.load,
        rate=case.rate if case.open_loop else None,
        intervals=_intervals(per_round),
        accept_histogram=histogram,
        accept_rate_by_position=position_rates(histogram),
        slo=slo_text(slo) if slo else None,
        goodput=(good / wall if wall > 0 else 0.0) if good is not None else None,
        slo_attainment=good / requests if good is not None and requests else None,
        load_mode=load_mode,
        client_overhead_ms_p50=overhead.p50,
        client_overhead_ms_p99=overhead.p99,
        client_cpu_share=_cpu_share(rounds),
        repetition=sample.repetition(),
        repetition_sample=len(sample.texts),
        repetition_excerpt=sample.excerpt(),
        remeasured=remeasured,
    )
