"""The few distribution functions the decision needs, from :mod:`scipy.special`.

``scipy.stats`` builds every distribution object of SciPy when it is imported (most of a
second of start-up); the decision needs only the normal and Student's t tails and their
inverses, and the binomial quantile of an order-statistic interval. These are the
``scipy.special`` functions ``scipy.stats`` itself calls for them, taking scalars or numpy
arrays. ``tests/core/test_distributions.py`` checks each against ``scipy.stats``.

``scipy.special`` itself is imported on first use: a check of two single-number files
(the original specification's flat format) applies only the threshold and never needs it,
and costs the start-up of numpy alone.
"""

from __future__ import annotations

import math
from functools import cache, lru_cache
from types import ModuleType

__all__ = ["binom_ppf", "norm_isf", "norm_ppf", "norm_sf", "t_isf", "t_ppf", "t_sf"]


@cache
def _special() -> ModuleType:
    import importlib

    return importlib.import_module("scipy.special")


def norm_sf(x: float) -> float:
    """P(Z > x) for a standard normal Z."""
    return float(_special().ndtr(-x))


def norm_ppf(q: float) -> float:
    """The q-quantile of the standard normal."""
    return float(_special().ndtri(q))


def norm_isf(a: float) -> float:
    """The point a standard normal exceeds with probability ``a``."""
    return -float(_special().ndtri(a))


def t_sf(x: float, df: float | None) -> float:
    """P(T > x) for Student's t on ``df`` degrees of freedom (the normal when ``df`` is None)."""
    if df is None:
        return norm_sf(x)
    return float(_special().stdtr(df, -x))


@lru_cache(maxsize=4096)
def t_ppf(q: float, df: float | None) -> float:
    """The q-quantile of Student's t on ``df`` degrees of freedom (the normal when ``df`` is None)."""
    if df is None:
        return norm_ppf(q)
    return float(_special().stdtrit(df, q))


def t_isf(a: float, df: float | None) -> float:
    """The point Student's t on ``df`` degrees of freedom exceeds with probability ``a``."""
    return -t_ppf(a, df)


@lru_cache(maxsize=4096)
def binom_ppf(q: float, n: int, p: float) -> int:
    """The smallest k with P(X <= k) >= q for X ~ Binomial(n, p), as ``scipy.stats.binom.ppf``.

    ``bdtrik`` inverts the binomial CDF continuously; the integer answer is its ceiling or
    the one below it, whichever is the first to reach ``q`` (SciPy's own rule).
    """
    if q <= 0.0:
        return -1
    if q >= 1.0:
        return n
    k = math.ceil(float(_special().bdtrik(q, n, p)))
    k = min(max(k, 0), n)
    below = max(k - 1, 0)
    if float(_special().bdtr(below, n, p)) >= q:
        # the continuous inverse may sit a little high; step down while the CDF still reaches q
        while below > 0 and float(_special().bdtr(below - 1, n, p)) >= q:
            below -= 1
        return below
    while k < n and float(_special().bdtr(k, n, p)) < q:
        k += 1
    return k
