"""The few distribution functions the decision needs, in plain Python.

The decision needs the normal and Student's t tails and their inverses, and the binomial
quantile of an order-statistic interval: a handful of calls per metric. ``scipy.stats``
builds every distribution object of SciPy when it is imported (most of a second of a
check's start-up), and even ``scipy.special`` pulls in SciPy's array-API layer (a third of
a second on a loaded 2-core runner), so both are left out of the check path:

* the normal tail from :func:`math.erfc`, its inverse from :class:`statistics.NormalDist`
  (Wichura's AS 241, exact to about 1e-16);
* Student's t tail and the binomial CDF from the regularised incomplete beta function
  I_x(a, b), evaluated by its continued fraction (modified Lentz; Press et al., *Numerical
  Recipes*, 3rd ed., §6.4), on the side of the switch point where it converges fast, with
  1 - x passed exactly so that no digits are lost near x = 1;
* Student's t quantile by Newton's method on the log of the tail against the log of t
  (the t tail is close to a power law there, so few steps are needed), with closed forms
  for 1 and 2 degrees of freedom; the binomial quantile by bisection on the CDF.

``tests/core/test_distributions.py`` checks every function against ``scipy.stats`` over the
ranges a check uses (the binomial ranks exactly, for every sample count up to 400).

Internal: shared with ``workers``; not part of the Python API (README, "Python API").
"""

from __future__ import annotations

import math
from functools import lru_cache
from statistics import NormalDist

__all__ = [
    "betainc",
    "binom_cdf",
    "binom_ppf",
    "norm_isf",
    "norm_ppf",
    "norm_sf",
    "t_isf",
    "t_log_pdf",
    "t_ppf",
    "t_sf",
]

_NORMAL = NormalDist()
_EPS = 1e-16
_TINY = 1e-300
_MAX_TERMS = 100_000


def norm_sf(x: float) -> float:
    """P(Z > x) for a standard normal Z."""
    return 0.5 * math.erfc(x / math.sqrt(2.0))


def norm_ppf(q: float) -> float:
    """The q-quantile of the standard normal."""
    if q <= 0.0:
        return -math.inf
    if q >= 1.0:
        return math.inf
    return _NORMAL.inv_cdf(q)


def norm_isf(a: float) -> float:
    """The point a standard normal exceeds with probability ``a``."""
    return -norm_ppf(a)


def _continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b) (modified Lentz), for x below the switch point."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _MAX_TERMS):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + aa / c
            c = c if abs(c) > _TINY else _TINY
            step = d * c
            h *= step
        if abs(step - 1.0) <= _EPS:
            break
    return h


def betainc(a: float, b: float, x: float, y: float | None = None) -> float:
    """The regularised incomplete beta function I_x(a, b); ``y`` is 1 - x, when known exactly."""
    y = 1.0 - x if y is None else y
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(y)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _continued_fraction(b, a, y) / b


def t_sf(x: float, df: float | None) -> float:
    """P(T > x) for Student's t on ``df`` degrees of freedom (the normal when ``df`` is None)."""
    if df is None:
        return norm_sf(x)
    if x == 0.0:
        return 0.5
    if math.isinf(x):
        return 0.0 if x > 0 else 1.0
    x2 = x * x
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + x2), x2 / (df + x2))
    return tail if x > 0 else 1.0 - tail


def t_log_pdf(t: float, df: float) -> float:
    return (
        math.lgamma((df + 1.0) / 2.0)
        - math.lgamma(df / 2.0)
        - 0.5 * math.log(df * math.pi)
        - (df + 1.0) / 2.0 * math.log1p(t * t / df)
    )


@lru_cache(maxsize=4096)
def t_ppf(q: float, df: float | None) -> float:
    """The q-quantile of Student's t on ``df`` degrees of freedom (the normal when ``df`` is None)."""
    if df is None:
        return norm_ppf(q)
    if q <= 0.0:
        return -math.inf
    if q >= 1.0:
        return math.inf
    if q == 0.5:
        return 0.0
    return -_t_upper(q, df) if q < 0.5 else _t_upper(1.0 - q, df)


def _t_upper(p: float, df: float) -> float:
    """The t > 0 with P(T > t) = p < 1/2 (the tail given directly, so a tiny p keeps its digits)."""
    if df == 1:
        return 1.0 / math.tan(math.pi * p)
    if df == 2:
        return (1.0 - 2.0 * p) / math.sqrt(2.0 * p * (1.0 - p))
    # Newton on log P(T > t) against u = log t: nearly a straight line in the tail
    t = max(-norm_ppf(p), 1e-3)
    log_p = math.log(p)
    for _ in range(100):
        sf = t_sf(t, df)
        if sf <= 0.0:
            t /= 2.0
            continue
        slope = -math.exp(t_log_pdf(t, df)) * t / sf  # d log sf / d log t
        step = (math.log(sf) - log_p) / slope
        t_next = t * math.exp(-max(min(step, 2.0), -2.0))
        if abs(t_next - t) <= 1e-15 * t:
            return t_next
        t = t_next
    return t


def t_isf(a: float, df: float | None) -> float:
    """The point Student's t on ``df`` degrees of freedom exceeds with probability ``a``."""
    return -t_ppf(a, df)


def binom_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p): I_{1-p}(n - k, k + 1)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return betainc(n - k, k + 1.0, 1.0 - p, p)


@lru_cache(maxsize=4096)
def binom_ppf(q: float, n: int, p: float) -> int:
    """The smallest k with P(X <= k) >= q for X ~ Binomial(n, p), as ``scipy.stats.binom.ppf``."""
    if q <= 0.0:
        return -1
    if q >= 1.0:
        return n
    lo, hi = 0, n  # the CDF at hi is 1 >= q; find the first k that reaches q
    while lo < hi:
        mid = (lo + hi) // 2
        if binom_cdf(mid, n, p) >= q:
            hi = mid
        else:
            lo = mid + 1
    return lo
