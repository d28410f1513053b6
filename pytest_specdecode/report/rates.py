"""Pass rates as statistics: a Wilson interval, and an exact paired test of two configs.

A pass rate over n problems is a binomial proportion; its 95% interval here is
Wilson's score interval (it stays inside [0, 1] and is not degenerate at 0/n
or n/n, unlike the normal approximation). Two configs asked the same problems
are paired: only the problems where they disagree say which is better, and
under "no difference" each disagreement goes either way with probability 1/2.
So the test of a config against the NONE baseline is the exact one-sided sign
(McNemar) test on those disagreements: the chance of at least ``lost`` losses
among ``lost + won`` coin flips.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

Z95 = 1.959963984540054
"""The two-sided 95% normal quantile."""


def wilson(passed: int, total: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval (low, high) of ``passed / total``; (0, 1) for no problems."""
    if total <= 0:
        return 0.0, 1.0
    p = passed / total
    denominator = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denominator
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denominator
    # The bounds at 0/n and n/n are 0 and 1 exactly (rounding would leave 5e-17).
    low = 0.0 if passed == 0 else max(0.0, centre - half)
    high = 1.0 if passed == total else min(1.0, centre + half)
    return low, high


def sign_test(lost: int, won: int) -> float:
    """One-sided exact p-value of at least ``lost`` losses in ``lost + won`` fair flips."""
    n = lost + won
    if n == 0 or lost == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(lost, n + 1))
    return min(1.0, float(tail / 2**n))


@dataclass(frozen=True)
class Paired:
    """A config against the baseline on the problems both answered."""

    problems: int  # asked under both
    lost: int  # the baseline passed, the config failed
    won: int  # the config passed, the baseline failed

    @property
    def p_value(self) -> float:
        """How likely this many losses are if the config changes nothing (one-sided)."""
        return sign_test(self.lost, self.won)


def paired(baseline: dict[str, bool], config: dict[str, bool]) -> Paired:
    """Pair two configs' verdicts by problem name (problems only one of them has are left
    out: they say nothing about the difference)."""
    shared = baseline.keys() & config.keys()
    lost = sum(1 for name in shared if baseline[name] and not config[name])
    won = sum(1 for name in shared if config[name] and not baseline[name])
    return Paired(len(shared), lost, won)
