"""The medians' confidence intervals (labmagic.timing.noise): exact order-statistic ranks, real coverage on skewed
samples, the ratio's interval, and what a race row and its table make of them."""

from __future__ import annotations

import random
import statistics

import pytest

from labmagic.timing.noise import includes_one, median_interval, rank_for, ratio_interval


@pytest.mark.parametrize("n, rank", [(6, 1), (10, 2), (20, 6), (50, 18), (100, 40)])
def test_ranks_match_the_binomial_tables(n, rank):
    # The classical distribution-free 95% interval of a median: [x(j), x(n+1-j)] (Conover, Table A3).
    assert rank_for(n) == rank


def test_too_few_samples_have_no_interval():
    assert [rank_for(n) for n in range(6)] == [None] * 6
    assert median_interval([1.0, 2.0, 3.0, 4.0, 5.0]) is None


def test_the_interval_covers_the_true_median_at_the_level_asked_on_skewed_samples():
    # Kernel times look like a floor plus a long tail: exponential with a shift. True median: 1 + ln 2.
    rng = random.Random(7)
    true = 1 + 0.6931471805599453
    for n, level in ((12, 0.95), (40, 0.95), (200, 0.95), (200, 0.80)):
        hits = 0
        for _ in range(1500):
            low, high = median_interval([1 + rng.expovariate(1) for _ in range(n)], level)
            hits += low <= true <= high
        assert level - 0.02 <= hits / 1500 <= min(1.0, level + 0.04), (n, level, hits / 1500)


def test_the_interval_narrows_with_more_samples_and_holds_the_median():
    rng = random.Random(3)
    widths = []
    for n in (20, 200, 2000):
        xs = [1 + rng.expovariate(1) for _ in range(n)]
        low, high = median_interval(xs)
        assert min(xs) <= low <= statistics.median(xs) <= high <= max(xs)
        widths.append(high - low)
    assert widths[0] > widths[1] > widths[2]


def test_the_ratio_interval_tells_a_real_difference_from_noise():
    rng = random.Random(11)
    ref = [1.0 + rng.gauss(0, 0.01) for _ in range(100)]
    same = [1.0 + rng.gauss(0, 0.01) for _ in range(100)]
    faster = [0.9 + rng.gauss(0, 0.01) for _ in range(100)]
    assert includes_one(*ratio_interval(ref, same))
    low, high = ratio_interval(ref, faster)
    assert not includes_one(low, high) and low < 1 / 0.9 < high
    assert ratio_interval(ref, [1.0] * 3) is None
    assert not includes_one(None, None)
