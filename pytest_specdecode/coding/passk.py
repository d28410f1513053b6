"""pass@k with the unbiased estimator, and per-config aggregation."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k: ``1 - C(n-c, k) / C(n, k)`` for ``c`` correct of ``n`` samples.

    Computed as a running product, exact for any n (no huge binomials, no
    cancellation). Raises ValueError for impossible counts or ``k > n``.
    """
    if not (0 <= c <= n) or n < 1:
        raise ValueError(f"pass@k needs 0 <= c <= n and n >= 1, got n={n!r} c={c!r}")
    if not 1 <= k <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n, got k={k!r} n={n!r}")
    if n - c < k:
        return 1.0
    fail = 1.0
    for i in range(n - c + 1, n + 1):
        fail *= 1.0 - k / i
    return 1.0 - fail


def report_ks(n: int, ks: Sequence[int] = (1, 5, 10)) -> list[int]:
    """The k values to report for ``n`` samples per problem (those ``<= n``)."""
    return [k for k in ks if k <= n]


def aggregate(
    samples: Mapping[str, Sequence[bool]] | Iterable[tuple[str, Sequence[bool]]],
    ks: Sequence[int] = (1, 5, 10),
) -> dict[int, float]:
    """Mean pass@k over problems, from each problem's list of per-sample pass/fail.

    Only k values every problem has enough samples for are reported.
    """
    items = list(samples.items() if isinstance(samples, Mapping) else samples)
    if not items:
        return {}
    smallest = min(len(results) for _, results in items)
    if smallest == 0:
        raise ValueError("every problem needs at least one sample")
    return {
        k: sum(pass_at_k(len(r), sum(map(bool, r)), k) for _, r in items) / len(items)
        for k in report_ks(smallest, ks)
    }
