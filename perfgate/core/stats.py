"""Descriptive statistics over raw samples: summaries and distribution-free quantile CIs.

Quantiles use the "linear" (type 7) definition, numpy's default, so a reader can check
any figure with ``numpy.percentile``. Confidence intervals for a quantile come from
order statistics (the binomial argument in Conover, *Practical Nonparametric
Statistics*, 3rd ed., §3.2), which need no assumption about the shape of the timing
distribution; tested in ``tests/core/test_stats.py`` against hand-computed values and by
seeded coverage simulations.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from perfgate.core.distributions import binom_ppf

__all__ = [
    "QUANTILES",
    "Summary",
    "min_samples_for",
    "order_statistic_ranks",
    "quantile",
    "quantile_ci",
    "summarize",
]

QUANTILES = {"median": 0.5, "p50": 0.5, "p95": 0.95, "p99": 0.99}

# Tail samples needed beyond a quantile before it is compared: with fewer than this many
# observations above p99 the empirical p99 is little more than the maximum.
_TAIL_SAMPLES = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    """Summary of one metric's samples."""

    n: int
    mean: float
    median: float
    stdev: float  # sample standard deviation (n-1); 0 for n = 1
    mad: float  # median absolute deviation, unscaled
    min: float
    max: float
    p50: float
    p95: float
    p99: float

    @property
    def cv(self) -> float:
        """Robust coefficient of variation: 1.4826 * MAD / median (0 when the median is 0)."""
        return 1.4826 * self.mad / self.median if self.median > 0 else 0.0


def summarize(samples: Sequence[float]) -> Summary:
    """Summary statistics of a non-empty sample."""
    x = np.asarray(samples, dtype=float)
    if x.size == 0:
        raise ValueError("cannot summarise an empty sample")
    med = float(np.median(x))
    p50, p95, p99 = (float(v) for v in np.percentile(x, [50, 95, 99]))
    return Summary(
        n=int(x.size),
        mean=float(x.mean()),
        median=med,
        stdev=float(x.std(ddof=1)) if x.size > 1 else 0.0,
        mad=float(np.median(np.abs(x - med))),
        min=float(x.min()),
        max=float(x.max()),
        p50=p50,
        p95=p95,
        p99=p99,
    )


def quantile(samples: Sequence[float], statistic: str) -> float:
    """The named location statistic (``median``, ``p50``, ``p95``, ``p99``) of a sample."""
    return float(np.percentile(np.asarray(samples, dtype=float), 100.0 * QUANTILES[statistic]))


def min_samples_for(statistic: str) -> int:
    """Samples per side before a quantile is compared: enough to put 3 samples beyond it.

    p50 needs 2, p95 60, p99 300.
    """
    q = QUANTILES[statistic]
    return max(2, math.ceil(_TAIL_SAMPLES / (1.0 - q) - 1e-9)) if q > 0.5 else 2


def quantile_ci(samples: Sequence[float], statistic: str, confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval for a quantile from order statistics.

    The number of samples below the q-quantile is Binomial(n, q); the interval is
    ``[x_(l), x_(u)]`` with l, u the binomial (1 ± confidence)/2 quantiles. For small n
    the interval reaches the sample minimum or maximum, which is honest: the data cannot
    say more.
    """
    x = np.sort(np.asarray(samples, dtype=float))
    n = x.size
    if n == 0:
        raise ValueError("cannot bound a quantile of an empty sample")
    lo, hi = order_statistic_ranks(n, statistic, confidence)
    return float(x[lo - 1]), float(x[hi - 1])


def order_statistic_ranks(n: int, statistic: str, confidence: float = 0.95) -> tuple[int, int]:
    """The 1-based ranks ``(l, u)`` of the order statistics bounding a quantile of ``n`` samples
    (:func:`quantile_ci`); they depend on ``n`` alone, not on the values."""
    if n < 1:
        raise ValueError("cannot bound a quantile of an empty sample")
    if n == 1:
        return 1, 1
    q = QUANTILES[statistic]
    tail = (1.0 - confidence) / 2.0
    lo = binom_ppf(tail, n, q)  # number of samples below -> 1-based order statistic
    hi = binom_ppf(1.0 - tail, n, q) + 1
    return min(max(lo, 1), n), min(max(hi, 1), n)
