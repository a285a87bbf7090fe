"""A moderated t test across worker pairs: each metric's variance borrows strength from its group.

With 3–4 worker pairs a metric's own t test has 2–3 degrees of freedom, and after Holm over
a dozen tests and α spent over the looks it needs t values of 10–30. The limit is the
variance estimate, not the size of the effect. The metrics of one check that share a
statistic and a unit (the stages' medians in ms, say) have per-pair spreads of the same
order, so each metric's sample variance s² on d = k - 1 degrees of freedom is shrunk
toward a prior s0² fitted to the group, in the empirical-Bayes way of limma (Smyth 2004,
"Linear models and empirical Bayes methods for assessing differential expression",
Stat. Appl. Genet. Mol. Biol. 3(1), §6):

    s̃² = (d0 s0² + d s²) / (d0 + d),   t̃ = mean / (s̃ / √k)  on  d0 + d  degrees of freedom.

Under the model (normal pair ratios, variances drawn from a scaled inverse χ² on d0 df) t̃
is exactly Student's t; :func:`fit_prior` estimates s0² and d0 by moments of log s²
(limma's ``fitFDist``). Three guards keep it honest where the model is not:

* **the prior is capped**: d0 never exceeds the degrees of freedom of the group's other
  metrics (a prior cannot know more than the data it came from), and a group of fewer than
  three metrics with a spread borrows nothing;
* **a metric unlike its group keeps its own variance**: when s²/s0² is improbably large
  under the prior (an F test at :data:`OUTLIER_LEVEL`; a stage with two-state layout offsets
  among quiet ones) the metric is tested on its own, the plain t test;
* **no verdict rests on one pair**: a borrowing metric regresses (or improves) only when
  the test and the threshold agree with every single pair left out (:func:`guarded`). A pair
  far off inflates the metric's own s² but barely the pooled one, so without this a single
  +30 % pair among quiet ones would decide.

Tails are never pooled with medians (the group key carries the statistic): a p99's per-pair
spread is 5–9 % where a median's is 1–2 %. ``tests/core/test_paired_moderated.py`` checks A/A
≤ α in seeded simulations with heavy-tailed and two-state offsets, and the hand values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from perfgate.core.distributions import betainc, t_sf

__all__ = ["OUTLIER_LEVEL", "Moderated", "Prior", "digamma", "fit_prior", "guarded", "trigamma"]

OUTLIER_LEVEL = 0.05  # a metric whose s²/s0² is beyond this F tail does not borrow
_MIN_METRICS = 3  # a group needs this many metrics with a spread to fit a prior


def digamma(x: float) -> float:
    """ψ(x) for x > 0: recurrence up to 6, then the asymptotic series."""
    out = 0.0
    while x < 6.0:
        out -= 1.0 / x
        x += 1.0
    f = 1.0 / (x * x)
    return out + math.log(x) - 0.5 / x - f * (1 / 12 - f * (1 / 120 - f * (1 / 252 - f * (1 / 240 - f / 132))))


def trigamma(x: float) -> float:
    """ψ'(x) for x > 0: recurrence up to 6, then the asymptotic series."""
    out = 0.0
    while x < 6.0:
        out += 1.0 / (x * x)
        x += 1.0
    f = 1.0 / (x * x)
    return out + 1.0 / x + f / 2.0 + f / x * (1 / 6 - f * (1 / 30 - f * (1 / 42 - f / 30)))


def _tetragamma(x: float) -> float:
    out = 0.0
    while x < 6.0:
        out -= 2.0 / x**3
        x += 1.0
    f = 1.0 / (x * x)
    return out - f - f / x - f * f * (0.5 - f * (1 / 6 - f * (1 / 6 - f * 3 / 10)))


def _trigamma_inverse(y: float) -> float:
    """The x with ψ'(x) = y, by Newton's method from limma's starting point."""
    if y > 1e7:
        return 1.0 / math.sqrt(y)
    if y < 1e-6:
        return 1.0 / y
    x = 0.5 + 1.0 / y
    for _ in range(50):
        tri = trigamma(x)
        step = tri * (1.0 - tri / y) / _tetragamma(x)
        x += step
        if -step / x < 1e-8:
            break
    return x


@dataclass(frozen=True, slots=True, kw_only=True)
class Prior:
    """The variance a group of metrics lends: ``s0_sq`` on ``d0`` degrees of freedom (inf: the
    metrics' variances look alike), fitted from ``metrics`` metrics with ``total_df`` df in all."""

    s0_sq: float
    d0: float
    metrics: int
    total_df: int

    def __post_init__(self) -> None:
        if not self.s0_sq > 0:
            raise ValueError(f"s0_sq must be positive, got {self.s0_sq!r}")
        if not self.d0 > 0:
            raise ValueError(f"d0 must be positive, got {self.d0!r}")

    def df_for(self, own_df: int) -> int:
        """The prior df lent to a metric with ``own_df`` of its own: capped at the others' df, whole."""
        return int(min(self.d0, self.total_df - own_df))


def fit_prior(variances: Sequence[tuple[float, int]]) -> Prior | None:
    """The group's prior from its metrics' ``(s², d)`` (limma's moment fit of log s²); None when
    fewer than three metrics have a spread to learn from.

    ``e = log s² - ψ(d/2) + log(d/2)`` has mean ``log s0² - ψ(d0/2) + log(d0/2)`` and variance
    ``ψ'(d/2) + ψ'(d0/2)``: what the spread of ``e`` leaves beyond sampling gives d0."""
    usable = [(s2, d) for s2, d in variances if d >= 1 and s2 > 0 and math.isfinite(s2)]
    if len(usable) < _MIN_METRICS:
        return None
    e = np.array([math.log(s2) - digamma(d / 2) + math.log(d / 2) for s2, d in usable])
    excess = float(e.var(ddof=1)) - float(np.mean([trigamma(d / 2) for _, d in usable]))
    mean = float(e.mean())
    if excess > 0:
        d0 = 2.0 * _trigamma_inverse(excess)
        s0_sq = math.exp(mean + digamma(d0 / 2) - math.log(d0 / 2))
    else:
        d0, s0_sq = math.inf, math.exp(mean)
    return Prior(s0_sq=s0_sq, d0=d0, metrics=len(usable), total_df=sum(d for _, d in usable))


def _f_sf(f: float, d1: int, d2: int) -> float:
    """P(F > f) for F on (d1, d2) degrees of freedom."""
    if f <= 0:
        return 1.0
    x = d2 / (d2 + d1 * f)
    return betainc(d2 / 2.0, d1 / 2.0, x, d1 * f / (d2 + d1 * f))


@dataclass(frozen=True, slots=True, kw_only=True)
class Moderated:
    """One metric's test across pairs (direction-adjusted log ratios): the estimate, its
    standard error and df, the p-value the family sees, and how much was borrowed."""

    log_worse: float
    se: float
    sd: float  # s̃ (s when nothing was borrowed)
    df: int
    p_value: float
    d0: int  # prior df lent; 0: the plain t test
    unlike: bool = False  # the metric's own variance is too large for its group's prior
    blocked: str = ""  # why one pair left out undoes the verdict, when it does


def _test(d: np.ndarray, s0_sq: float, d0: int) -> tuple[float, float, float, int, float]:
    k = len(d)
    own = float(d.var(ddof=1)) if k > 1 else 0.0
    s2 = (d0 * s0_sq + (k - 1) * own) / (d0 + k - 1)
    mean = float(d.mean())
    sd = math.sqrt(s2)
    se = sd / math.sqrt(k)
    p = t_sf(mean / se, d0 + k - 1) if se > 0 else (0.0 if mean > 0 else 1.0)
    return mean, se, sd, d0 + k - 1, p


def guarded(d: Sequence[float], prior: Prior | None, bound: float) -> Moderated:
    """The moderated test of the pairs' direction-adjusted log ratios ``d`` (at least 2),
    guarded by leaving out each pair in turn (``bound``: the threshold in log units).

    The p-value the family sees is the one, among the full test's and each pair-left-out
    test's, nearest 1/2 (1/2 itself when they disagree in sign), so a regression needs every
    one of them small and an improvement every one of them near 1. A change past the
    threshold must stay past it with any one pair left out, or its p-value is raised to 1/2
    (lowered, for an improvement). Without a prior this is the plain t test, unguarded: a
    pair far off then inflates the only variance there is.
    """
    x = np.asarray(d, dtype=float)
    k = len(x)
    if k < 2:
        raise ValueError(f"need at least 2 pairs, got {k}")
    d0 = prior.df_for(k - 1) if prior is not None else 0
    unlike = False
    if prior is not None and d0 > 0 and k > 1:
        ratio = float(x.var(ddof=1)) / prior.s0_sq
        unlike = _f_sf(ratio, k - 1, d0) < OUTLIER_LEVEL
    if prior is None or d0 <= 0 or unlike or k < 3:
        mean, se, sd, df, p = _test(x, 1.0, 0)
        return Moderated(log_worse=mean, se=se, sd=sd, df=df, p_value=p, d0=0, unlike=unlike)
    mean, se, sd, df, p = _test(x, prior.s0_sq, d0)
    left_out = [_test(np.delete(x, j), prior.s0_sq, d0) for j in range(k)]
    ps = [p] + [t[4] for t in left_out]
    lo, hi = min(ps), max(ps)
    p_family = 0.5 if lo < 0.5 < hi else (hi if hi <= 0.5 else lo)
    blocked = ""
    means = [t[0] for t in left_out]
    # the pair's ratio is direction-adjusted (positive: worse), so it is said in words, not signed:
    # a throughput's "+39 %" would read as a rise in a row that shows its own change
    if mean > bound and min(means) <= bound:
        j = int(np.argmin(means))
        p_family = max(p_family, 0.5)
        blocked = f"past the threshold only with pair {j + 1} (worse by {abs(x[j]):.1%} in log)"
    elif -mean > bound and -max(means) <= bound:
        j = int(np.argmax(means))
        p_family = min(p_family, 0.5)
        blocked = f"past the threshold only with pair {j + 1} (better by {abs(x[j]):.1%} in log)"
    return Moderated(log_worse=mean, se=se, sd=sd, df=df, p_value=p_family, d0=d0, blocked=blocked)
