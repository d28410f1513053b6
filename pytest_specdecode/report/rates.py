"""Pass rates as statistics: an exact paired test of two configs.

(A pass rate's own 95% interval is Wilson's, :func:`throughput.stats.wilson_interval`.)
Two configs asked the same problems
are paired: only the problems where they disagree say which is better, and
under "no difference" each disagreement goes either way with probability 1/2.
So the test of a config against the NONE baseline is the exact one-sided sign
(McNemar) test on those disagreements: the chance of at least ``lost`` losses
among ``lost + won`` coin flips.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


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
