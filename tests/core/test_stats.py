"""Tests for :mod:`perfgate.core.stats`, three ways (docs/design.md §8).

1. Hand-computed values: summaries of small samples worked out on paper, and order-statistic
   confidence intervals whose indices come from binomial tail sums written out with
   ``math.comb`` (Conover, *Practical Nonparametric Statistics*, 3rd ed., §3.2, table A3).
2. Seeded Monte-Carlo coverage of :func:`quantile_ci` on normal and log-normal samples.
3. Edge cases: n = 1, all equal, ties, huge outliers, empty input.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from perfgate.core.stats import QUANTILES, Summary, min_samples_for, quantile, quantile_ci, summarize

# --- hand-computed values -------------------------------------------------------------------

# The textbook sample 2, 4, 4, 4, 5, 5, 7, 9 (population sd exactly 2).
TEXTBOOK = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]


def test_summarize_textbook_sample() -> None:
    """n, mean, median, sd, MAD, min/max and type-7 percentiles, each worked out by hand.

    mean = 40/8 = 5; sum of squares about the mean = 32, so sd(n-1) = sqrt(32/7);
    median = (4+5)/2 = 4.5; |x - 4.5| sorted = .5 .5 .5 .5 .5 2.5 2.5 4.5, median 0.5;
    type 7 puts quantile q at position h = (n-1)q (0-based): p95 at 6.65 -> 7 + 0.65*(9-7)
    = 8.3, p99 at 6.93 -> 7 + 0.93*2 = 8.86, p50 at 3.5 -> 4.5.
    """
    s = summarize(TEXTBOOK)
    assert s.n == 8
    assert s.mean == pytest.approx(5.0)
    assert s.median == pytest.approx(4.5)
    assert s.stdev == pytest.approx(math.sqrt(32.0 / 7.0))
    assert s.mad == pytest.approx(0.5)
    assert (s.min, s.max) == (2.0, 9.0)
    assert s.p50 == pytest.approx(4.5)
    assert s.p95 == pytest.approx(8.3)
    assert s.p99 == pytest.approx(8.86)
    assert s.cv == pytest.approx(1.4826 * 0.5 / 4.5)


def test_summarize_huge_outlier_moves_mean_not_median() -> None:
    """1, 2, 3, 4, 100: mean 22, median 3, MAD median(2,1,0,1,97) = 1, p95 = 4 + 0.8*96 = 80.8."""
    s = summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert s.mean == pytest.approx(22.0)
    assert s.median == pytest.approx(3.0)
    assert s.mad == pytest.approx(1.0)
    assert s.p95 == pytest.approx(80.8)
    assert s.max == 100.0


@pytest.mark.parametrize("n", [2, 3, 7, 10, 61, 301])
def test_percentiles_match_numpy_type7(n: int) -> None:
    """Percentiles are numpy's ``method="linear"`` (Hyndman & Fan type 7), as documented."""
    x = np.random.default_rng(n).lognormal(3.0, 0.5, n)
    s = summarize(x.tolist())
    expected = np.percentile(x, [50, 95, 99], method="linear")
    assert [s.p50, s.p95, s.p99] == pytest.approx(expected.tolist())
    for stat, q in QUANTILES.items():
        assert quantile(x.tolist(), stat) == pytest.approx(float(np.percentile(x, 100 * q, method="linear")))


def _order_statistic_indices(n: int, q: float, confidence: float) -> tuple[int, int]:
    """1-based (l, u) by summing binomial terms with math.comb (independent of scipy).

    l = smallest k with P(B <= k) >= tail; u = 1 + smallest k with P(B <= k) >= 1 - tail,
    B ~ Binomial(n, q) the number of samples below the q-quantile.
    """
    tail = (1.0 - confidence) / 2.0
    cdf, acc = [], 0.0
    for k in range(n + 1):
        acc += math.comb(n, k) * q**k * (1.0 - q) ** (n - k)
        cdf.append(acc)
    lo = next(k for k in range(n + 1) if cdf[k] >= tail - 1e-12)
    hi = next(k for k in range(n + 1) if cdf[k] >= 1.0 - tail - 1e-12) + 1
    return min(max(lo, 1), n), min(max(hi, 1), n)


def test_quantile_ci_median_n10_by_hand() -> None:
    """n = 10: P(B<=1) = 11/1024 < .025 <= P(B<=2) = 56/1024, P(B<=7) = 968/1024 < .975 <=
    P(B<=8) = 1013/1024, so the 95 % interval is [x(2), x(9)] (coverage 1002/1024 = 97.9 %,
    Conover table A3)."""
    x = [60.0, 10.0, 90.0, 30.0, 100.0, 20.0, 80.0, 50.0, 70.0, 40.0]  # shuffled 10..100
    assert quantile_ci(x, "median") == (20.0, 90.0)
    assert _order_statistic_indices(10, 0.5, 0.95) == (2, 9)


def test_quantile_ci_median_n20_by_hand() -> None:
    """n = 20: sum_{k<=5} C(20,k) = 21700 (/2^20 = .0207) and sum_{k<=6} = 60460 (.0577), so
    the 95 % interval is [x(6), x(15)]; at 99 %: sum_{k<=3} = 1351 (.0013) < .005 <= sum_{k<=4}
    = 6196 (.0059), so [x(4), x(17)]."""
    x = [float(v) for v in range(1, 21)][::-1]
    assert quantile_ci(x, "median") == (6.0, 15.0)
    assert quantile_ci(x, "p50", confidence=0.99) == (4.0, 17.0)


@pytest.mark.parametrize(
    ("n", "statistic", "confidence"),
    [(15, "median", 0.95), (31, "median", 0.9), (100, "p95", 0.95), (200, "p95", 0.99), (500, "p99", 0.95)],
)
def test_quantile_ci_indices_match_binomial_sums(n: int, statistic: str, confidence: float) -> None:
    """The interval is [x(l), x(u)] with l, u from binomial tail sums written out by hand."""
    x = [float(v) for v in range(1, n + 1)]  # x(k) == k
    lo, hi = _order_statistic_indices(n, QUANTILES[statistic], confidence)
    assert quantile_ci(x, statistic, confidence) == (float(lo), float(hi))


def test_min_samples_for() -> None:
    """3 samples beyond the quantile: p50 2 (any two), p95 3/0.05 = 60, p99 3/0.01 = 300 (G6)."""
    assert min_samples_for("p50") == 2
    assert min_samples_for("median") == 2
    assert min_samples_for("p95") == 60
    assert min_samples_for("p99") == 300


# --- seeded Monte-Carlo ---------------------------------------------------------------------


def _coverage(draw: np.ndarray, statistic: str, true_value: float) -> float:
    hits = 0
    for row in draw:
        lo, hi = quantile_ci(row.tolist(), statistic)
        hits += lo <= true_value <= hi
    return hits / len(draw)


@pytest.mark.slow
@pytest.mark.parametrize("dist", ["normal", "lognormal"])
def test_quantile_ci_median_coverage(dist: str) -> None:
    """Empirical coverage of the 95 % median interval, 2000 seeded samples of n = 30.

    The exact coverage for n = 30 is P(10 <= B <= 20) = 1 - 2 * 0.0214 = 0.957 whatever the
    distribution; Monte-Carlo SE = 0.0045. The upper bound proves the interval is not simply
    [min, max] (coverage 1 - 2^-29).
    """
    rng = np.random.default_rng(20260 + len(dist))
    if dist == "normal":
        draw, truth = rng.normal(100.0, 15.0, (2000, 30)), 100.0
    else:
        draw, truth = rng.lognormal(np.log(100.0), 0.5, (2000, 30)), 100.0  # median = e^mu
    coverage = _coverage(draw, "median", truth)
    assert 0.93 <= coverage <= 0.985, coverage


@pytest.mark.slow
def test_quantile_ci_p95_coverage_lognormal() -> None:
    """Coverage of the 95 % p95 interval, n = 200 log-normal: exact 0.967 (binomial sum)."""
    rng = np.random.default_rng(95)
    sigma = 0.5
    truth = float(np.exp(np.log(50.0) + sigma * 1.6448536269514722))  # 95th percentile of the law
    draw = rng.lognormal(np.log(50.0), sigma, (1500, 200))
    assert 0.93 <= _coverage(draw, "p95", truth) <= 0.995


# --- edge cases -----------------------------------------------------------------------------


def test_single_sample() -> None:
    """n = 1: every location statistic is the value, spread is 0, the interval is a point."""
    s = summarize([7.5])
    assert s == Summary(n=1, mean=7.5, median=7.5, stdev=0.0, mad=0.0, min=7.5, max=7.5, p50=7.5, p95=7.5, p99=7.5)
    assert s.cv == 0.0
    assert quantile_ci([7.5], "p99") == (7.5, 7.5)


def test_all_equal() -> None:
    """All equal: no spread, and the interval collapses onto the value."""
    s = summarize([3.0] * 12)
    assert (s.stdev, s.mad, s.cv) == (0.0, 0.0, 0.0)
    assert s.median == s.p95 == s.p99 == 3.0
    assert quantile_ci([3.0] * 12, "median") == (3.0, 3.0)


def test_ties_and_zero_median() -> None:
    """Ties: 1, 1, 2, 2 has median 1.5 and MAD 0.5; a zero median gives cv 0, not a division error."""
    s = summarize([1.0, 1.0, 2.0, 2.0])
    assert (s.median, s.mad) == (1.5, 0.5)
    assert summarize([0.0, 0.0, 0.0, 1.0]).cv == 0.0


def test_small_n_tail_interval_reaches_the_maximum() -> None:
    """Too few samples for p99: the data cannot bound it from above, so the interval ends at max.

    n = 10, q = .99: P(B<=8) = 1 - 10(.99^9)(.01) - .99^10 = .0043 < .025 <= P(B<=9) = .0956,
    so l = 9; u = 1 + 10 = 11 lies past the sample and is clamped to x(10).
    """
    x = [float(v) for v in range(1, 11)]
    assert quantile_ci(x, "p99") == (9.0, 10.0)


def test_huge_outlier_does_not_move_median_interval() -> None:
    """Order statistics are robust: replacing the maximum by 1e12 leaves the median CI unchanged."""
    x = [float(v) for v in range(1, 21)]
    wild = [*x[:-1], 1e12]
    assert quantile_ci(wild, "median") == quantile_ci(x, "median")
    assert summarize(wild).median == summarize(x).median


def test_empty_raises() -> None:
    """Empty input is a caller error, not a NaN."""
    with pytest.raises(ValueError, match="empty"):
        summarize([])
    with pytest.raises(ValueError, match="empty"):
        quantile_ci([], "median")


def test_unknown_statistic_raises() -> None:
    """Only median/p50/p95/p99 are location statistics."""
    with pytest.raises(KeyError):
        min_samples_for("p42")
