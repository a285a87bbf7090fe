"""Multi-epoch stability: where a run's per-step timings reach steady state, and whether they drift.

The runner records a metric's samples in the order they were taken (one per training
step, say). Two things spoil a summary of them:

* **Warm-up.** The first steps pay for allocation, JIT compilation, cuDNN autotuning and
  cold caches; a first step 10x slower than the rest is normal. :func:`steady_state` trims
  it in two steps. First, the leading samples more than 5 robust standard deviations
  (1.4826 MAD) from the median of the run's second half (of the whole run below 20
  samples; a spike, however large, cannot move that reference). Then the level shifts
  at the front: while the first change point of what remains
  (:func:`perfgate.core.changepoints.detect`, alpha 0.001) lies in the first half of the
  run, the samples before it are warm-up too. At most half the run is trimmed. A run
  whose steady part still has a change point of its own (a trend through the whole run,
  a phase change in its second half) never settled: ``settled`` is False.

  MSER-5 (White 1997), the simulation literature's usual rule, was tried first and
  dropped: on clean, independent samples it trimmed 6-10 of 200 samples on average and
  up to 90 (its score's own noise picks a later truncation), where the rule above trims
  none but with probability about alpha.
* **Drift.** A leak or a thermal throttle makes steps slower across a run. The slope of the
  steady part is estimated with **Theil–Sen** (the median of pairwise slopes; robust to
  the odd spike) with its distribution-free confidence interval (Sen 1968, eq. 2.6, computed
  as ``scipy.stats.theilslopes`` does; ``tests/core/test_stability.py`` compares the two).
  Runs longer than 600 samples are reduced to 500 batch
  means first, to keep the pairwise slopes in memory. Timings within one run are
  autocorrelated (``docs/noise.md``: speed moves in phases), so the interval is
  optimistic; ``drifting`` therefore also asks for the drift across the run to exceed
  ``drift_tolerance`` (5 % by default), not only for the interval to exclude zero.

Pure functions, no I/O: tested in ``tests/core/test_stability.py``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from perfgate.core.changepoints import detect
from perfgate.core.distributions import norm_ppf

__all__ = ["SteadyState", "steady_state", "theil_sen", "trim_warmup"]

_OUTLIER_Z = 5.0
_SHORT = 20
_SHIFT_ALPHA = 0.001
_MAX_SHIFT_STEPS = 10
_MAX_PAIRS_N = 600  # Theil-Sen on more points: batch means first
_REDUCED_N = 500


@dataclass(frozen=True, slots=True, kw_only=True)
class SteadyState:
    """Where the samples settle and how they move afterwards.

    Attributes:
        start: index of the first steady sample (the samples before it are warm-up).
        n: number of steady samples.
        mean, median: of the steady samples.
        drift_per_sample: Theil–Sen slope over the steady samples, in their unit per sample.
        drift_ci: confidence interval of that slope.
        relative_drift: the drift across the steady part as a fraction of its median
            (``drift_per_sample * (n - 1) / median``): +0.10 means 10 % slower at the end.
        relative_drift_ci: the same for the interval's ends.
        drifting: the interval excludes zero and ``|relative_drift|`` reaches the tolerance.
        settled: False when the steady part still has a change point (a trend, a late phase
            change): the run never reached one level, and its drift may say why.
    """

    start: int
    n: int
    mean: float
    median: float
    drift_per_sample: float
    drift_ci: tuple[float, float]
    relative_drift: float
    relative_drift_ci: tuple[float, float]
    drifting: bool
    settled: bool

    @property
    def warmup(self) -> int:
        """Samples trimmed as warm-up (same as ``start``)."""
        return self.start


def _warmup_end(x: NDArray[np.float64]) -> int:
    half = x.size // 2
    reference = x[half:] if x.size >= _SHORT else x  # a short run's half is too few to judge by
    median = float(np.median(reference))
    spread = 1.4826 * float(np.median(np.abs(reference - median)))
    limit = _OUTLIER_Z * spread if spread > 0 else 1e-9 * abs(median)
    start = 0
    while start < half and abs(float(x[start]) - median) > limit:
        start += 1
    for _ in range(_MAX_SHIFT_STEPS):
        shifts = detect(x[start:], alpha=_SHIFT_ALPHA)
        if not shifts or start + shifts[0].index > half:
            break
        start += shifts[0].index
    return start


def _theil_sen(y: NDArray[np.float64], confidence: float) -> tuple[float, float, float]:
    n = y.size
    x = np.arange(n, dtype=float)
    if n > _MAX_PAIRS_N:
        edges = np.linspace(0, n, _REDUCED_N + 1).astype(int)
        x = np.array([x[a:b].mean() for a, b in itertools.pairwise(edges)])
        y = np.array([y[a:b].mean() for a, b in itertools.pairwise(edges)])
    slope, low, high = theil_sen(y, x, confidence)
    if not (math.isfinite(low) and math.isfinite(high)):
        low = high = slope
    return slope, low, high


def _tie_term(values: NDArray[np.float64]) -> float:
    _, counts = np.unique(values, return_counts=True)
    k = counts[counts > 1].astype(float)
    return float(np.sum(k * (k - 1) * (2 * k + 5)))


def theil_sen(y: NDArray[np.float64], x: NDArray[np.float64], confidence: float) -> tuple[float, float, float]:
    """The Theil–Sen slope of ``y`` on ``x`` and its confidence interval (Sen 1968, eq. 2.6):
    the median of the pairwise slopes, the interval two of its order statistics, with ties in
    either coordinate taken off the variance of Kendall's score. NaN bounds when the interval
    cannot be placed."""
    dx = x[:, np.newaxis] - x
    dy = y[:, np.newaxis] - y
    slopes = np.sort(dy[dx > 0] / dx[dx > 0])
    if slopes.size == 0:
        return math.nan, math.nan, math.nan
    slope = float(np.median(slopes))
    tail = 1.0 - confidence if confidence > 0.5 else confidence
    z = norm_ppf(tail / 2.0)
    n = float(y.size)
    variance = (n * (n - 1) * (2 * n + 5) - _tie_term(x) - _tie_term(y)) / 18.0
    if not variance >= 0:
        return slope, math.nan, math.nan
    sigma = math.sqrt(variance)
    nt = slopes.size
    upper = min(int(np.round((nt - z * sigma) / 2.0)), nt - 1)
    lower = max(int(np.round((nt + z * sigma) / 2.0)) - 1, 0)
    if not (0 <= lower < nt and 0 <= upper < nt):
        return slope, math.nan, math.nan
    return slope, float(slopes[lower]), float(slopes[upper])


def steady_state(
    samples: Sequence[float] | NDArray[np.float64],
    *,
    confidence: float = 0.95,
    drift_tolerance: float = 0.05,
) -> SteadyState:
    """Trim the warm-up of ordered ``samples`` and estimate the drift of the rest.

    Args:
        samples: one metric's samples in the order they were taken.
        confidence: level of the drift's confidence interval.
        drift_tolerance: the drift across the run below which a run is not called drifting.

    Raises:
        ValueError: empty or non-finite samples, or a bad parameter.
    """
    x = np.asarray(samples, dtype=float)
    if x.ndim != 1 or x.size == 0:
        raise ValueError("steady_state needs a non-empty one-dimensional series of samples")
    if not np.all(np.isfinite(x)):
        raise ValueError("samples must be finite numbers")
    if not 0.5 <= confidence < 1.0:
        raise ValueError(f"confidence must be in [0.5, 1), got {confidence!r}")
    if drift_tolerance < 0:
        raise ValueError(f"drift_tolerance must be >= 0, got {drift_tolerance!r}")
    start = _warmup_end(x) if x.size >= 3 else 0
    settled = not detect(x[start:], alpha=_SHIFT_ALPHA)
    steady = x[start:]
    median = float(np.median(steady))
    if steady.size >= 3 and np.ptp(steady) > 0:
        slope, low, high = _theil_sen(steady, confidence)
    else:
        slope = low = high = 0.0
    span = (steady.size - 1) / median if median > 0 else 0.0
    relative, rel_low, rel_high = slope * span, low * span, high * span
    drifting = (low > 0 or high < 0) and abs(relative) >= drift_tolerance
    return SteadyState(
        start=start,
        n=int(steady.size),
        mean=float(steady.mean()),
        median=median,
        drift_per_sample=slope,
        drift_ci=(low, high),
        relative_drift=relative,
        relative_drift_ci=(rel_low, rel_high),
        drifting=bool(drifting),
        settled=settled,
    )


def trim_warmup(samples: Sequence[float] | NDArray[np.float64]) -> tuple[float, ...]:
    """``samples`` without the warm-up :func:`steady_state` finds."""
    values = tuple(float(v) for v in samples)
    return values[steady_state(values).start :]
