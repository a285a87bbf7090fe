"""The rule that decides one estimate: its verdict from the estimate, the threshold, the p-value and the interval.

A metric **regresses** when its direction-adjusted change exceeds its threshold *and* the one-sided test
that the current run is worse is significant after Holm's correction over the check's family. It
**improves** when the change is past the threshold the other way and the test that the current run is
better is significant on the same evidence. Over the threshold but not significant, or under it with the
interval still reaching past it, is **inconclusive**; everything else is **unchanged**. With a single
sample on either side only the threshold applies.

:func:`decide` gives the verdict and the grounds of it (:class:`Ruling`); what that makes of the
comparison (its reason, the sample size that would decide it, the memory floor) is
:func:`perfgate.core.decision._prepare.judge`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from perfgate.core.decision._estimate import Estimate
from perfgate.core.distributions import norm_ppf, t_isf
from perfgate.core.metrics import Direction
from perfgate.core.policy import Policy
from perfgate.core.result import Verdict

__all__ = ["Grounds", "Ruling", "confidence_z", "decide", "log_threshold"]

_BOUNDARY_SLACK = 1e-12  # in log-ratio units


class Grounds(StrEnum):
    """Why the rule gave its verdict, where the verdict alone does not say it."""

    TESTED = "tested"  # the threshold and the test (or the estimate's own reason) say it
    FIXED = "fixed"  # the estimate came with its verdict (too few samples, a zero to test)
    ZERO_BASELINE = "zero_baseline"  # the baseline is 0: no relative change
    THRESHOLD_ONLY = "threshold_only"  # one sample a side: the threshold alone
    NOT_SIGNIFICANT = "not_significant"  # over the threshold, the adjusted p-value not below α
    TOO_NOISY = "too_noisy"  # under the threshold, the interval reaching past it


@dataclass(frozen=True, slots=True, kw_only=True)
class Ruling:
    """The verdict of one estimate and its grounds. An inconclusive verdict that more measurement
    would decide carries the log-ratio ``margin`` to resolve and the ``z`` to resolve it at."""

    verdict: Verdict
    grounds: Grounds = Grounds.TESTED
    margin: float | None = None
    z: float | None = None


def log_threshold(threshold: float, direction: Direction) -> float:
    # worse > t  <=>  log ratio beyond this bound, for either direction. The slack keeps a
    # change of exactly the threshold (100 -> 110 at 10 %) from "exceeding" it by rounding:
    # log(110 / 100) is one ulp above log1p(0.10).
    if direction is Direction.HIGHER:
        return math.inf if threshold >= 1.0 else -math.log1p(-threshold) + _BOUNDARY_SLACK
    return math.log1p(threshold) + _BOUNDARY_SLACK


def _improvement_significant(p: Estimate, ci: tuple[float, float] | None, alpha: float, n_tests: int) -> bool:
    """An improvement is claimed on the same evidence as a regression: the one-sided test that
    the current run is *better*, Bonferroni-corrected over the check's tests at α. A false
    improvement on unchanged code is as wrong as a false alarm (a p99 "improved" by 33 % on
    identical code, from an interval that excluded 0 at 95 % among a dozen statistics)."""
    if ci is None or p.p_value is None:
        return p.log_worse == -math.inf
    better = 1.0 - p.p_value  # the other tail of the same one-sided, continuous test
    return ci[1] < 0 and better * max(n_tests, 1) < alpha


def _isf(p: Estimate, a: float) -> float:
    """The point the test statistic (the log ratio over its SE) exceeds with probability ``a``
    under no change: a t or normal quantile, or the t-tailed mixture's (:mod:`perfgate.core.decision._tail`)."""
    if p.tail is not None and p.se:
        return p.tail.isf(a) / p.se
    return t_isf(a, p.df)


def confidence_z(p: Estimate, confidence: float) -> float:
    """The quantile of the two-sided interval at ``confidence`` around an estimate with a test."""
    return _isf(p, (1.0 - confidence) / 2.0)


def decide(
    p: Estimate,
    policy: Policy,
    n_tests: int,
    *,
    p_adjusted: float | None,
    ci: tuple[float, float] | None,
    z_ci: float,
) -> Ruling:
    """The verdict of one estimate, ``p_adjusted`` being its p-value adjusted by Holm over a family
    of ``n_tests`` (``None`` for an estimate without a test) and ``ci`` the interval of its ``worse``
    at the policy's confidence, whose quantile is ``z_ci``."""
    if p.fixed is not None:
        return Ruling(verdict=p.fixed, grounds=Grounds.FIXED)
    if p.log_worse is None:
        return Ruling(verdict=Verdict.INCONCLUSIVE, grounds=Grounds.ZERO_BASELINE)
    bound = log_threshold(p.threshold, p.cur.direction)
    if p.threshold_only:
        verdict = (
            Verdict.REGRESSED
            if p.log_worse > bound
            else Verdict.IMPROVED
            if -p.log_worse > bound
            else Verdict.UNCHANGED
        )
        return Ruling(verdict=verdict, grounds=Grounds.THRESHOLD_ONLY)
    assert p_adjusted is not None
    if p.log_worse > bound:
        if p_adjusted < policy.alpha:
            return Ruling(verdict=Verdict.REGRESSED)
        z = _isf(p, policy.alpha / max(n_tests, 1)) + norm_ppf(policy.power)
        return Ruling(verdict=Verdict.INCONCLUSIVE, grounds=Grounds.NOT_SIGNIFICANT, margin=p.log_worse, z=z)
    if -p.log_worse > bound and _improvement_significant(p, ci, policy.alpha, n_tests):
        return Ruling(verdict=Verdict.IMPROVED)
    if ci is not None and ci[1] > p.threshold and p.log_worse <= bound:
        z = z_ci + norm_ppf(policy.power)
        return Ruling(verdict=Verdict.INCONCLUSIVE, grounds=Grounds.TOO_NOISY, margin=bound - p.log_worse, z=z)
    return Ruling(verdict=Verdict.UNCHANGED)
