"""The shape of the run-to-run term: a Student t, not a normal, when the phase has heavy tails.

The machine's phase moves one run's every timing together (``docs/noise.md`` §1). Its
spread in the middle is what a calibration or the assumption gives (a robust SD: the median
absolute successive difference, scaled for a normal); its tails are heavier than a normal's
on real runs of a shared machine (a neighbour starting, a slow minute), so a normal tail
calls the rare 1.6× phase of unchanged code a regression far more often than α.

The run-to-run part ``D`` of a stored comparison's log ratio (the difference of two runs'
phases, or the calibrated run-to-run noise of both sides) is therefore taken as a Student t
on ``df`` degrees of freedom whose middle matches the robust SD ``σ`` it was measured with:
its scale is ``σ · Φ⁻¹(0.75) / t_df⁻¹(0.75)``, so the two agree on the median absolute
value, and the t only adds the tail. The rest (the within-run error, the per-process
offsets, the reference kernel's change) stays normal, so the log ratio under no change is

    L = D + E,   D = scale · T_df,   E ~ N(0, v)

a normal scale mixture: ``T_df = Z · √W`` with ``W = df / χ²_df``, and

    P(L > x) = E_W[ Φ̄(x / √(v + scale² · W)) ].

The expectation is a sum over ``log χ²_df`` on an even grid (the trapezoidal rule, which
converges geometrically for a smooth integrand decaying on both sides); the quantiles invert
it by bisection on the log of the tail. A ``df`` of None is a normal ``D`` and the plain test.

Tested in ``tests/core/test_tail.py`` against seeded simulations and hand limits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from perfgate.core.distributions import norm_ppf, t_log_pdf, t_ppf, t_sf

__all__ = ["Tail", "robust_to_scale"]

_Q75 = norm_ppf(0.75)
_SQRT2 = math.sqrt(2.0)
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_STEP = 0.2  # the grid step in log χ²
_MASS = 1e-10  # the χ² mass left out of the grid on each side


def robust_to_scale(df: float | None) -> float:
    """The t's scale per unit of robust SD: a t on ``df`` degrees of freedom with this scale has
    the median absolute value of a normal of SD 1 (1 for a normal)."""
    if df is None:
        return 1.0
    return _Q75 / t_ppf(0.75, df)


@lru_cache(maxsize=64)
def _mixing(df: float) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Nodes ``W = df / χ²_df`` and their weights (summing to 1), from the trapezoidal rule on
    ``y = log χ²_df``, whose density is exp(df/2 · y − e^y / 2) / (2^(df/2) Γ(df/2))."""
    half = df / 2.0
    log_norm = half * math.log(2.0) + math.lgamma(half)
    # left: P(χ² < e^y) ≈ (e^y / 2)^(df/2) / Γ(df/2 + 1); right: far past the mean df
    lo = math.log(2.0) + (math.log(_MASS) + math.lgamma(half + 1.0)) / half
    hi = math.log(df + 20.0 * math.sqrt(2.0 * df) + 60.0)
    n = math.ceil((hi - lo) / _STEP)
    nodes, weights = [], []
    for i in range(n + 1):
        y = lo + i * (hi - lo) / n
        nodes.append(df * math.exp(-y))
        weights.append(math.exp(half * y - math.exp(y) / 2.0 - log_norm))
    total = math.fsum(weights)
    return tuple(nodes), tuple(w / total for w in weights)


@dataclass(frozen=True, slots=True)
class Tail:
    """The null distribution of a stored comparison's log ratio: ``scale · T_df`` plus a normal
    of variance ``light``.

    ``within4_df`` is the within-run variance squared over its degrees of freedom (0 when the
    samples are many): given the t part's draw, the sum is then a t whose degrees of freedom
    are carried over in proportion (Welch–Satterthwaite), as the plain test does."""

    df: float
    heavy: float  # scale² of the t part
    light: float  # variance of the normal part
    within4_df: float = 0.0

    def sf(self, x: float) -> float:
        """P(L > x)."""
        if math.isinf(x):
            return 0.0 if x > 0 else 1.0
        return _sf_pdf(self.df, self.heavy, self.light, self.within4_df, x, False)[0]

    def isf(self, p: float) -> float:
        """The x with P(L > x) = p (symmetric: isf(1 - p) = -isf(p)).

        In units of the total SD the quantile depends only on the t part's share of the variance
        and the within-run degrees of freedom, so it is computed once per share (to 1e-4) and
        kept: a check of hundreds of alike metrics inverts the tail a few times, not hundreds."""
        total = self.light + self.heavy
        if total <= 0:
            return 0.0 if 0.0 < p < 1.0 else (math.inf if p <= 0.0 else -math.inf)
        share = round(self.heavy / total, 4)
        effective = total * total / self.within4_df if self.within4_df > 0 else math.inf
        df0 = round(effective, 2) if effective < 1000 else None
        return math.sqrt(total) * _unit_isf(self.df, share, df0, p)


def _sf_pdf(df: float, heavy: float, light: float, within4_df: float, x: float, pdf: bool) -> tuple[float, float]:
    """P(L > x) and (when ``pdf``) the density of L at x: the mixture's sum over its nodes."""
    nodes, weights = _mixing(df)
    tail = density = 0.0
    for w, weight in zip(nodes, weights, strict=True):
        var = light + heavy * w
        sd = math.sqrt(var)
        z = x / sd
        effective = var * var / within4_df if within4_df > 0 else math.inf
        if effective >= 1000:
            tail += weight * 0.5 * math.erfc(z / _SQRT2)
            if pdf:
                density += weight * math.exp(-0.5 * z * z) / (_SQRT_2PI * sd)
        else:
            given = max(math.floor(effective + 1e-9), 1)
            tail += weight * t_sf(z, given)
            if pdf:
                density += weight * math.exp(t_log_pdf(z, given)) / sd
    return min(max(tail, 0.0), 1.0), density


@lru_cache(maxsize=8192)
def _unit_isf(df: float, share: float, df0: float | None, p: float) -> float:
    """The quantile of a mixture of total variance 1, ``share`` of it the t part's, the within
    part on ``df0`` degrees of freedom carried over to the total variance (None: many samples)."""
    if p <= 0.0:
        return math.inf
    if p >= 1.0:
        return -math.inf
    if p > 0.5:
        return -_unit_isf(df, share, df0, 1.0 - p)
    if p == 0.5:
        return 0.0
    heavy, light = share, 1.0 - share
    # the within part's variance squared over its degrees of freedom, from df0 at total variance 1
    within4_df = 1.0 / df0 if df0 is not None else 0.0
    log_p = math.log(p)
    # Newton on log P(L > x) against log x (close to a straight line in a t's tail), kept in a bracket
    lo, hi = -math.inf, math.inf
    u = math.log(max(-norm_ppf(p), 1e-3))
    for _ in range(200):
        x = math.exp(u)
        tail, density = _sf_pdf(df, heavy, light, within4_df, x, True)
        if tail > p:
            lo = max(lo, u)
        else:
            hi = min(hi, u)
        slope = -density * x / tail if tail > 0 else -math.inf
        step = (math.log(tail) - log_p) / slope if tail > 0 and slope < 0 else math.nan
        u_next = u - step
        if not lo < u_next < hi or math.isnan(u_next):
            if math.isinf(hi):
                u_next = u + 1.0
            elif math.isinf(lo):
                u_next = u - 1.0
            else:
                u_next = 0.5 * (lo + hi)
        if abs(u_next - u) <= 1e-10:
            return math.exp(u_next)
        u = u_next
    return math.exp(u)
