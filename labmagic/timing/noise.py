"""How sure a median is: distribution-free confidence intervals from order statistics.

Kernel times are not normal (a floor, and a tail of preempted or throttled calls), so the interval of a median is
taken from the sorted samples themselves: with ``n`` independent calls, the number of calls below the true median is
Binomial(n, 1/2), so ``[x(j), x(n+1-j)]`` (1-based order statistics) covers the median with probability
``1 - 2 * P(Binom(n, 1/2) < j)``. :func:`median_interval` picks the narrowest such ``j`` whose coverage is at least
the level asked for. No resampling, no assumption about the shape of the distribution.

What this interval does *not* hold is run-to-run drift (clocks, temperature, another tenant): it says whether two
medians *of the same run* differ, which is what a race table compares. Across runs
(``labmagic results --compare``) a change must also exceed a relative threshold.

The ratio of two medians (a row's ``vs ref``) gets the interval spanned by the two medians' own intervals, each at
``sqrt(level)``: if both cover, the ratio's bounds do, so its coverage is at least ``level``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

#: The confidence of the intervals stored in the bench CSV.
LEVEL = 0.95


def _binomial_tail(n: int, j: int) -> float:
    """P(Binom(n, 1/2) < j), exactly (in log space, so n in the tens of thousands does not overflow)."""
    if j <= 0:
        return 0.0
    log_half_n = -n * math.log(2.0)
    log_terms = [math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) + log_half_n for k in range(j)]
    top = max(log_terms)
    return math.exp(top) * sum(math.exp(t - top) for t in log_terms)


def rank_for(n: int, level: float = LEVEL) -> int | None:
    """The 1-based rank ``j`` of the interval ``[x(j), x(n+1-j)]`` (the largest whose coverage is >= level), or
    None when even ``[min, max]`` covers less (``n`` of 5 or fewer at 95%)."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), not {level!r}")
    alpha = 1.0 - level
    if n < 1 or 2 * _binomial_tail(n, 1) > alpha:
        return None
    # Coverage falls as j grows; start at the normal approximation and walk to the exact boundary.
    z = NormalDist().inv_cdf(1 - alpha / 2)
    j = min(max(1, int((n - z * math.sqrt(n)) / 2)), (n + 1) // 2)
    while j > 1 and 2 * _binomial_tail(n, j) > alpha:
        j -= 1
    while j + 1 <= (n + 1) // 2 and 2 * _binomial_tail(n, j + 1) <= alpha:
        j += 1
    return j


def median_interval(samples: Sequence[float], level: float = LEVEL) -> tuple[float, float] | None:
    """The ``level`` confidence interval of the median of ``samples``; None when there are too few of them."""
    values = sorted(samples)
    j = rank_for(len(values), level)
    if j is None:
        return None
    return values[j - 1], values[len(values) - j]


def ratio_interval(numerator: Sequence[float], denominator: Sequence[float],
                   level: float = LEVEL) -> tuple[float, float] | None:
    """The interval of median(numerator) / median(denominator), at least ``level`` confident (see the module)."""
    each = math.sqrt(level)
    top, bottom = median_interval(numerator, each), median_interval(denominator, each)
    if top is None or bottom is None or bottom[0] <= 0:
        return None
    return top[0] / bottom[1], top[1] / bottom[0]


def includes_one(low: float | None, high: float | None) -> bool:
    """Whether a ratio's interval holds 1.00: the two times cannot be told apart in this run."""
    return low is not None and high is not None and low <= 1.0 <= high
