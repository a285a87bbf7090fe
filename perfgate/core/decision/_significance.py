"""Significance helpers: the log ratio's within-run standard error, a one-sided z test, Holm.

A location (median, p95, p99) is compared on the log ratio of the two runs' values; its
within-run standard error comes from the order-statistic confidence intervals of
:mod:`perfgate.core.stats` (distribution-free, so skewed and heavy-tailed timings are fine).
No test here takes one run's samples as independent of the machine's phase: the decision
(:mod:`perfgate.core.compare`) adds the run-to-run noise to this standard error. Tested by
hand values and seeded null-rejection checks in ``tests/core/test_significance.py``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from perfgate.core.distributions import norm_ppf, norm_sf

__all__ = ["holm", "log_ratio_se", "z_test_worse"]


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
    z = norm_ppf(0.5 + confidence / 2.0)
    se_base = (base_ci[1] - base_ci[0]) / (2.0 * z) / base_value
    se_cur = (cur_ci[1] - cur_ci[0]) / (2.0 * z) / cur_value
    return math.hypot(se_base, se_cur)


def z_test_worse(log_worse: float, se: float) -> float:
    """One-sided p-value that a direction-adjusted log ratio ``log_worse`` exceeds 0."""
    if se <= 0:
        return 0.0 if log_worse > 0 else 1.0
    return norm_sf(log_worse / se)


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
