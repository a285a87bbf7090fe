"""Significance tests: one-sided, rank-based for location, and Holm's family-wise step-down.

Timing samples are skewed and heavy-tailed, so the location test is the one-sided
Mann-Whitney U test (as asv uses, and as pytest-benchmark users ask for in
ionelmc/pytest-benchmark#108) rather than a t-test. Tail quantiles (p95/p99) are tested
with a z statistic on the log ratio of the quantiles, whose standard error comes from the
order-statistic confidence intervals of :mod:`perfgate.core.stats`. Tested by hand values
and seeded Monte-Carlo false-alarm and power checks in ``tests/core/test_significance.py``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats as sps

__all__ = ["holm", "log_ratio_se", "mann_whitney_worse", "z_test_worse"]


def mann_whitney_worse(baseline: Sequence[float], current: Sequence[float], *, higher_is_worse: bool) -> float:
    """One-sided Mann-Whitney U p-value for "current is worse than baseline".

    ``higher_is_worse`` is True for times and memory (current tends to be larger), False
    for throughput. Exact for small samples without ties, normal approximation with tie
    and continuity correction otherwise (scipy's ``method="auto"``). Returns 1.0 when all
    values are identical.
    """
    a = np.asarray(baseline, dtype=float)
    b = np.asarray(current, dtype=float)
    if a.size == 0 or b.size == 0:
        raise ValueError("Mann-Whitney U needs samples on both sides")
    if np.all(a == a[0]) and np.all(b == a[0]):
        return 1.0
    alternative = "greater" if higher_is_worse else "less"
    return float(sps.mannwhitneyu(b, a, alternative=alternative).pvalue)


def log_ratio_se(
    base_value: float,
    base_ci: tuple[float, float],
    cur_value: float,
    cur_ci: tuple[float, float],
    confidence: float,
) -> float | None:
    """Standard error of log(cur/base) from each side's confidence interval (delta method).

    Returns None when a value is 0 (the ratio is undefined).
    """
    if base_value <= 0 or cur_value <= 0:
        return None
    z = float(sps.norm.ppf(0.5 + confidence / 2.0))
    se_base = (base_ci[1] - base_ci[0]) / (2.0 * z) / base_value
    se_cur = (cur_ci[1] - cur_ci[0]) / (2.0 * z) / cur_value
    return math.hypot(se_base, se_cur)


def z_test_worse(log_worse: float, se: float) -> float:
    """One-sided p-value that a direction-adjusted log ratio ``log_worse`` exceeds 0."""
    if se <= 0:
        return 0.0 if log_worse > 0 else 1.0
    return float(sps.norm.sf(log_worse / se))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (Holm 1979), in the input order.

    Rejecting every hypothesis whose adjusted p-value is below alpha keeps the
    family-wise error rate at alpha under any dependence between the tests.
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted
