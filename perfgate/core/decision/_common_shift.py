"""The run's common shift: what every timing metric of a stored comparison moved together.

Under the noise model of :mod:`perfgate.core.noise` the machine's phase is shared by every
metric one run measured, so the unpaired tests of a check are strongly correlated: with the
assumed phase of 12 % and process term of 8 %, two metrics' log ratios correlate at about
0.69. Holm's correction treats them as independent and throws that away: 600 metrics that
all doubled are each "inconclusive" (adjusted p 0.24 after Holm over 600), although their
average moved far more than any phase could explain by chance.

So the check tests in two steps, with α split between them (:data:`ALPHA_SHARE`):

1. **The common shift.** The median ``c`` of the direction-adjusted log ratios of the ``k``
   tested medians that carry a run-to-run (phase) term and moved with the run (a minority
   that moved apart from it is left out, :mod:`perfgate.core.decision._shared_phase`; a median, so
   that one far move cannot drag it along). Its variance is the shared part,
   perfectly correlated across the metrics, plus the metrics' own parts averaged over ``k``:

       Var(c) = (mean of the shared SDs)² + mean(own variances) / k

   A one-sided z test at ``ALPHA_SHARE × α`` that the run as a whole is worse, and the
   shift must exceed the threshold (the median of the metrics' thresholds).
2. **Each metric** is then tested as before, with Holm over the family at the rest of α.

When no metric carries a phase term (a paired check, memory only, or a noise model without
a phase) the first step does not run and the rule is Holm's at the whole α.

A common shift is ambiguous by nature: on this machine everything has been seen moving
together by 1.4–2.4× on unchanged code (``docs/noise.md``). It is decided only when
something tells the machine from the code:

* every metric in it was compared in units of its reference kernel (the machine-speed
  index): the kernels took the machine's speed out, so what is left is the code;
* or every metric's run-to-run noise was measured on this machine (a calibration, or a
  baseline pooled from runs spread in time), not assumed.

Otherwise it is :attr:`CommonShift.ambiguous`: "the whole run is 2.0× slower: the code or
the machine", and the check exits 2 (could not decide) instead of passing silently; a
metric of the shift is then not called regressed on its own either (the machine's phase
moved it as much as any code could). The same holds the other way: when the whole run is
faster beyond the threshold and nothing tells why, none of its metrics is called improved.

Tested in ``tests/core/test_common_shift.py``: 600 doubled metrics, with and without
kernels; seeded A/A simulations of 600 metrics sharing a phase; the rule reducing to Holm's
when there is no phase term.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from perfgate.core.decision._estimate import Estimate
from perfgate.core.decision._tail import Tail, robust_to_scale
from perfgate.core.distributions import norm_ppf, norm_sf
from perfgate.core.result import CommonShift

__all__ = ["ALPHA_SHARE", "MIN_METRICS", "common_shift"]

# the share of α the common-shift test spends; the per-metric tests share the rest (Holm)
ALPHA_SHARE = 0.25
# fewer metrics than this: no common step (a shift of two metrics is no "whole run")
MIN_METRICS = 3


def _scale(tail: Tail) -> float:
    return robust_to_scale(tail.df)


def _worse(log_worse: float) -> float:
    try:
        return math.expm1(log_worse)
    except OverflowError:
        return math.inf


def common_shift(tested: Sequence[Estimate], *, alpha: float, confidence: float) -> CommonShift | None:
    """The common shift of the tested medians that carry a run-to-run term; None when the
    step does not apply (fewer than :data:`MIN_METRICS` of them)."""
    usable = [
        p
        for p in tested
        if p.statistic == "median"
        and not p.derived_from
        and not p.threshold_only
        and p.log_worse is not None
        and math.isfinite(p.log_worse)
        and p.se is not None
        and p.fixed_variance > 0
    ]
    k = len(usable)
    if k < MIN_METRICS:
        return None
    # the median, not the mean: a minority that moved far must not drag the run's shift along
    c = statistics.median(p.log_worse for p in usable if p.log_worse is not None)
    shared_sd = math.fsum(math.sqrt(p.fixed_variance) for p in usable) / k
    own = math.fsum(max((p.se or 0.0) ** 2 - p.fixed_variance, 0.0) for p in usable) / k
    se = math.sqrt(shared_sd**2 + own / k)
    spent = alpha * ALPHA_SHARE
    z_ci = norm_ppf(0.5 + confidence / 2.0)
    ci_half = z_ci * se
    p_value = norm_sf(c / se) if se > 0 else (0.0 if c > 0 else 1.0)
    p_better = norm_sf(-c / se) if se > 0 else (0.0 if c < 0 else 1.0)
    if all(p.kernel for p in usable):
        decided_by = "the reference kernels"
    elif not any(p.noise_assumed for p in usable):
        decided_by = "this machine's measured run-to-run noise"
    else:
        decided_by = ""
    tails = [p.tail for p in usable if p.tail is not None]
    if tails and se > 0 and decided_by:
        # a shift that can be called a regression is tested with the metrics' t tail (the
        # heaviest of them) on the shared part: the scale of the t part is the mean of the
        # metrics' scales, the rest of the variance stays normal. A shift nothing can tell from
        # the machine's claims nothing, only withholds the metrics' claims and exits 2: it keeps
        # the normal tail, which flags a whole run that moved together sooner.
        heavy = (math.fsum(math.sqrt(p.tail.heavy) for p in usable if p.tail is not None) / k) ** 2
        robust = (math.fsum(math.sqrt(p.tail.heavy) / _scale(p.tail) for p in usable if p.tail is not None) / k) ** 2
        shared = Tail(df=min(t.df for t in tails), heavy=heavy, light=max(se**2 - robust, 0.0))
        ci_half = shared.isf((1.0 - confidence) / 2.0)
        p_value, p_better = shared.sf(c), shared.sf(-c)
    return CommonShift(
        metrics=k,
        worse=_worse(c),
        ci=(_worse(c - ci_half), _worse(c + ci_half)),
        p_value=p_value,
        p_better=p_better,
        alpha=spent,
        threshold=statistics.median(p.threshold for p in usable),
        decided_by=decided_by,
        names=frozenset(p.cur.name for p in usable),
    )
