"""Intervals over rounds: mean and 95% interval by Student's t, and of ratios and differences.

A case is measured over R rounds; each round gives one value per figure
(tok/s, mean TPOT, accept length). The interval of the mean is
``mean +- t(0.975, R-1) * s / sqrt(R)`` with ``s`` the sample standard
deviation. Two cases (a saved run and this one, a baseline and a config) are
compared by the difference of their means (Welch's t, Welch-Satterthwaite
degrees of freedom) or by the ratio of their means (the delta method on the
log of the ratio, same degrees of freedom). A side measured once has no
variance of its own; it is given the other side's relative spread (equal
variances assumed, said in :attr:`Interval.method`). With one round on both
sides there is no interval at all.

When both sides have the same number of rounds (two or more) they are
*paired*: round i of a case sends the same prompts in every run and under
every config (the prompt set is pinned), so the comparison is made round by
round, which removes the spread that comes from the prompts themselves:
the ratio is the geometric mean of the per-round ratios with a t interval
on their logs, the difference the mean of the per-round differences.

The t quantile is computed here (regularized incomplete beta by continued
fraction, then bisection) so the plugin needs no SciPy.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

CONFIDENCE = 0.95
METHOD = (
    "mean over rounds, 95% interval by Student's t with rounds-1 degrees of freedom; "
    "comparisons pair round i of both sides (same prompts) when their round counts match"
)


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        even = m * (b - m) * x / ((qam + m2) * (a + m2))
        odd = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        for aa in (even, odd):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            step = d * c
            h *= step
        if abs(step - 1.0) < 1e-14:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` (> 0, may be fractional) degrees of freedom."""
    if df <= 0:
        raise ValueError(f"degrees of freedom must be > 0, got {df!r}")
    x = df / (df + t * t)
    tail = 0.5 * _betainc(df / 2.0, 0.5, x)
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t (``t_quantile(0.975, 2)`` is 4.303)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be within (0, 1), got {p!r}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


# Cached: the search above costs half a millisecond, and a sweep asks for the same few
# degrees of freedom (rounds - 1) once per case and config.
@functools.lru_cache(maxsize=256)
def _critical(df: float) -> float:
    return t_quantile(0.5 + CONFIDENCE / 2.0, df)


@dataclass(frozen=True)
class Interval:
    """A point estimate and its 95% interval (``low``/``high`` None: no interval)."""

    value: float
    low: float | None = None
    high: float | None = None
    n: int = 1
    method: str = ""

    @property
    def known(self) -> bool:
        """Whether there is an interval (at least two rounds somewhere)."""
        return self.low is not None and self.high is not None

    @property
    def half_width(self) -> float | None:
        """Half the interval's width (``None`` without one)."""
        return None if self.low is None or self.high is None else (self.high - self.low) / 2.0


def clean(values: Sequence[Any]) -> list[float]:
    """The finite numbers of ``values`` (a hostile or old report may hold anything)."""
    out: list[float] = []
    for v in values:
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            out.append(float(v))
    return out


def _mean_var(values: Sequence[float]) -> tuple[float, float | None]:
    return statistics.fmean(values), statistics.variance(values) if len(values) > 1 else None


def mean_interval(values: Sequence[float]) -> Interval | None:
    """Mean and 95% interval of the values (one per round); ``None`` when empty."""
    data = clean(values)
    if not data:
        return None
    mean, var = _mean_var(data)
    if var is None:
        return Interval(mean, n=1)
    half = _critical(len(data) - 1) * math.sqrt(var / len(data))
    return Interval(mean, mean - half, mean + half, len(data), "t")


def summary(values: Sequence[float]) -> dict[str, Any] | None:
    """JSON form of :func:`mean_interval` plus the values themselves (for later comparisons)."""
    found = mean_interval(values)
    if found is None:
        return None
    return {
        "mean": found.value,
        "low": found.low,
        "high": found.high,
        "n": found.n,
        "values": clean(values),
    }


def _df(a: list[float], b: list[float], sa: float, sb: float, method: str) -> float:
    """The degrees of freedom of ``sa + sb`` (the variances of the two means): with a side
    measured once, the other's; else Welch-Satterthwaite's."""
    if method == "pooled":
        return float(max(len(a), len(b)) - 1)
    num = (sa + sb) ** 2
    den = sum(v * v / (n - 1) for v, n in ((sa, len(a)), (sb, len(b))) if n > 1)
    if num <= 0 or den <= 0:
        return float(max(len(a) + len(b) - 2, 1))
    return max(num / den, 1.0)


def _around(value: float, half: float, n: int, method: str, *, relative: bool) -> Interval:
    """``value +- half``, or for a ratio ``value * exp(+-half)`` (``half`` on the log scale)."""
    if relative:
        return Interval(value, value * math.exp(-half), value * math.exp(half), n, method)
    return Interval(value, value - half, value + half, n, method)


def _unpaired(a: list[float], b: list[float], *, ratio: bool) -> Interval | None:
    """mean(b) - mean(a), or with ``ratio`` mean(b) / mean(a), and its 95% interval; None
    if a side is empty (or, for a ratio, a mean is not positive).

    For a ratio the variances are of ``x / mean`` and the interval is on the log scale.
    A side measured once takes the other side's spread (equal variances: ``pooled``).
    """
    if not a or not b:
        return None
    ma, va = _mean_var(a)
    mb, vb = _mean_var(b)
    if ratio:
        if ma <= 0 or mb <= 0:
            return None
        va = None if va is None else va / (ma * ma)
        vb = None if vb is None else vb / (mb * mb)
    value = mb / ma if ratio else mb - ma
    spread = va if va is not None else vb
    if spread is None:  # one round on both sides: no interval
        return Interval(value, n=1)
    method = "welch" if va is not None and vb is not None else "pooled"
    sa = (va if va is not None else spread) / len(a)
    sb = (vb if vb is not None else spread) / len(b)
    half = _critical(_df(a, b, sa, sb, method)) * math.sqrt(sa + sb)
    return _around(value, half, len(a) + len(b), method, relative=ratio)


def diff_interval(base: Sequence[float], now: Sequence[float]) -> Interval | None:
    """mean(now) - mean(base) and its 95% interval (Welch); ``None`` if a side is empty."""
    return _unpaired(clean(base), clean(now), ratio=False)


def ratio_interval(numerator: Sequence[float], denominator: Sequence[float]) -> Interval | None:
    """mean(numerator) / mean(denominator) and its 95% interval.

    The interval is ``exp(log r +- t * se)`` with ``se`` from the delta
    method, ``se**2 = var_num / (n_num * mean_num**2) + var_den / (n_den *
    mean_den**2)``, and Welch-Satterthwaite degrees of freedom.
    """
    return _unpaired(clean(denominator), clean(numerator), ratio=True)


def _paired(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) >= 2


def paired_diff_interval(base: Sequence[float], now: Sequence[float]) -> Interval | None:
    """Round-by-round difference when the rounds pair up, else :func:`diff_interval`."""
    a, b = clean(base), clean(now)
    if not _paired(a, b):
        return diff_interval(a, b)
    found = mean_interval([y - x for x, y in zip(a, b, strict=True)])
    assert found is not None
    return Interval(found.value, found.low, found.high, found.n, "paired")


def paired_ratio_interval(
    numerator: Sequence[float], denominator: Sequence[float]
) -> Interval | None:
    """Round-by-round ratio when the rounds pair up, else :func:`ratio_interval`.

    Paired: ``exp(mean(log(n_i / d_i)) +- t * s / sqrt(R))``.
    """
    a, b = clean(numerator), clean(denominator)
    if not _paired(a, b) or min(a + b) <= 0:
        return ratio_interval(a, b)
    found = mean_interval([math.log(x / y) for x, y in zip(a, b, strict=True)])
    assert found is not None
    assert found.low is not None
    assert found.high is not None
    return Interval(
        math.exp(found.value), math.exp(found.low), math.exp(found.high), found.n, "paired"
    )


# --- noise across restarts ------------------------------------------------------

MIN_SAVED_RUNS = 3
"""Saved runs of a case needed before their spread is taken as the between-run noise."""

BETWEEN_METHOD = (
    "between-run: the run means of the same config and case in the k saved runs found "
    "(log scale for relative changes) give the spread s of one run's mean across server "
    "starts; the change between two runs then has variance 2 s^2, and its interval is "
    "change +- t(0.975, k-1) * sqrt(2) * s. The gate uses whichever of this and the "
    "within-run interval is wider (with k < 3: the within-run interval only)"
)


def between_run_interval(
    change: float, run_means: Sequence[float], *, relative: bool
) -> Interval | None:
    """The interval of a change between two runs from the spread of saved runs' means.

    ``change`` is the observed ratio (``relative``) or difference; ``run_means``
    one mean per saved run of the same config and case. Each run mean carries
    its server start's level and its own rounds' noise, so the sample variance
    ``s**2`` of the means (of their logs for a ratio) estimates the variance of
    one run's mean across starts, ``2 * s**2`` that of the difference of two
    independent runs, with ``k - 1`` degrees of freedom. ``None`` with fewer
    than :data:`MIN_SAVED_RUNS` usable means.
    """
    data = clean(run_means)
    if relative:
        if change <= 0:
            return None
        data = [math.log(v) for v in data if v > 0]
    if len(data) < MIN_SAVED_RUNS:
        return None
    _, var = _mean_var(data)
    assert var is not None
    half = _critical(len(data) - 1) * math.sqrt(2.0 * var)
    return _around(change, half, len(data), "between-run", relative=relative)


def wilson_interval(successes: int, trials: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson's 95% score interval of a rate ``successes / trials`` ((0, 1) with no trials):
    unlike the normal one it stays within 0..1 and is not empty at 0 of n."""
    if trials <= 0:
        return 0.0, 1.0
    p = successes / trials
    centre = p + z * z / (2 * trials)
    spread = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials))
    scale = 1 + z * z / trials
    # The bounds at 0 of n and n of n are 0 and 1 exactly (rounding would leave 5e-17).
    low = 0.0 if successes == 0 else max(0.0, (centre - spread) / scale)
    high = 1.0 if successes == trials else min(1.0, (centre + spread) / scale)
    return low, high
