"""Change points in a metric's history: where its level moved, by how much, how sure.

Three candidate searches share one test (a shift in mean, Student's t with pooled variance):

* ``seeded`` (the default): seeded binary segmentation (Kovacs, Li, Buhlmann & Munk,
  *Biometrika* 110, 2023). A fixed, deterministic set of intervals at every scale (the
  whole series, halves shifted by quarters, quarters shifted by eighths, ... down to
  ``2 * min_size`` points); in each, the split with the largest |t|. Splits are taken
  greedily, most significant first, skipping intervals that contain one already taken.
  Local intervals see a short bump (a regression that was reverted 20 commits later) as
  two clean steps, where a single split of the whole series sees little. O(n log n),
  vectorised per scale.
* ``binseg``: plain binary segmentation with the same statistic: the best split of the
  whole series, then of each side, recursively. O(n) per segment with prefix sums.
* ``edivisive``: E-divisive means (Matteson & James, *JASA* 109, 2014, alpha = 1), the
  candidate search of Apache Otava and MongoDB's signal-processing-algorithms, recursive
  like ``binseg`` but choosing the split that maximises the energy statistic
  ``q = m k / (m + k) * E``. Pairwise distances are summed once (O(n^2) time and memory).

**Significance.** A candidate split is tested with Student's two-sided t-test between its
two sides, and the p-value is multiplied by the number of splits the candidate was chosen
from (Bonferroni): for ``binseg`` and ``edivisive`` the admissible positions of the
segment (``n - 2 min_size + 1``), for ``seeded`` every (interval, split) pair examined,
a set fixed in advance, so that under white noise the chance of reporting any change
point in a series is at most ``alpha`` (default 0.001, Otava's level). A final merge pass
(as Otava's) re-tests each change point between its neighbours with the same factor and
drops the weakest while any fails; what is reported is that last test.

Tested in ``tests/core/test_changepoints.py``: against scipy's t-test by hand, by
simulation (false alarms on noise; precision and recall on steps of 3 sigma; ten +1 %
steps of slow drift; a reverted regression), and for invariance to units. Everything is
deterministic: no permutations, no random state.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import special

__all__ = ["METHODS", "ChangePoint", "detect", "seeded_intervals"]

METHODS = ("seeded", "binseg", "edivisive")

Array = NDArray[np.float64]


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangePoint:
    """A level shift that starts at ``index`` (the first point of the new level).

    ``before`` and ``after`` are the means of the segments on either side (bounded by the
    neighbouring change points); ``change`` is ``after / before - 1``; ``p_value`` is the
    Bonferroni-adjusted two-sided t-test between the two segments.
    """

    index: int
    before: float
    after: float
    change: float
    p_value: float
    t: float

    @property
    def confidence(self) -> float:
        """1 - p_value: how sure the shift is real."""
        return 1.0 - self.p_value


class _Sums:
    """Prefix sums of the series (centred), so that any split's t statistic costs O(1).

    Centring on the series mean keeps the sums of squares from cancelling badly; a segment
    whose residual sum of squares is below ``1e-10`` of the series' total counts as noiseless.
    """

    def __init__(self, x: Array) -> None:
        self.shift = float(x.mean())
        y = x - self.shift
        self.c1 = np.concatenate([[0.0], np.cumsum(y)])
        self.c2 = np.concatenate([[0.0], np.cumsum(y * y)])
        self.flat_sse = 1e-10 * float(self.c2[-1]) + 1e-300
        self.flat_diff = 1e-12 * max(float(np.max(np.abs(x))), 1e-300)

    def mean(self, lo: int, hi: int) -> float:
        return self.shift + float(self.c1[hi] - self.c1[lo]) / (hi - lo)

    def t_grid(self, lo: NDArray[np.int64], split: NDArray[np.int64], hi: NDArray[np.int64]) -> Array:
        """The t statistic of ``[lo, split)`` against ``[split, hi)`` for arrays of positions (broadcast)."""
        m = (split - lo).astype(float)
        k = (hi - split).astype(float)
        s1 = self.c1[split] - self.c1[lo]
        s2 = self.c1[hi] - self.c1[split]
        q1 = self.c2[split] - self.c2[lo]
        q2 = self.c2[hi] - self.c2[split]
        sse = np.maximum(q1 - s1 * s1 / m + q2 - s2 * s2 / k, 0.0)
        diff = s2 / k - s1 / m
        se = np.sqrt(sse / (m + k - 2) * (1.0 / m + 1.0 / k))
        flat = sse <= self.flat_sse
        t: Array = np.divide(diff, se, out=np.zeros_like(diff), where=~flat)
        jump = flat & (np.abs(diff) > self.flat_diff)
        t[jump] = np.inf * np.sign(diff[jump])
        return t

    def t_profile(self, lo: int, hi: int, min_size: int) -> tuple[NDArray[np.int64], Array]:
        """Split positions (absolute; the left side is ``[lo, split)``) and the t statistic at each."""
        split = np.arange(lo + min_size, hi - min_size + 1)
        return split, self.t_grid(np.full_like(split, lo), split, np.full_like(split, hi))

    def t_at(self, lo: int, split: int, hi: int) -> float:
        """The t statistic of one split, ``[lo, split)`` against ``[split, hi)``."""
        m, k = split - lo, hi - split
        s1 = float(self.c1[split] - self.c1[lo])
        s2 = float(self.c1[hi] - self.c1[split])
        q1 = float(self.c2[split] - self.c2[lo])
        q2 = float(self.c2[hi] - self.c2[split])
        sse = max(q1 - s1 * s1 / m + q2 - s2 * s2 / k, 0.0)
        diff = s2 / k - s1 / m
        if sse <= self.flat_sse:
            return math.copysign(math.inf, diff) if abs(diff) > self.flat_diff else 0.0
        return diff / math.sqrt(sse / (m + k - 2) * (1.0 / m + 1.0 / k))


def _p_two_sided(t: float, df: int) -> float:
    if math.isinf(t):
        return 0.0
    return float(min(1.0, 2.0 * special.stdtr(df, -abs(t))))  # Student t CDF, without scipy.stats' overhead


def _adjusted(t: float, n: int, factor: int) -> float:
    """Bonferroni: the split was the best of ``factor`` (interval, split) pairs."""
    return min(1.0, _p_two_sided(t, n - 2) * factor)


class _Energy:
    """Prefix sums of pairwise distances, so the energy statistic of any split costs O(segment)."""

    def __init__(self, x: Array) -> None:
        n = x.size
        self.prefix = np.zeros((n, n + 1))
        # prefix[i, j] = sum over columns c < j of |x_i - x_c|
        np.cumsum(np.abs(x[:, None] - x[None, :]), axis=1, out=self.prefix[:, 1:])

    def best_split(self, lo: int, hi: int, min_size: int) -> int:
        rows = np.arange(lo, hi)
        within_left = self.prefix[rows, rows] - self.prefix[rows, lo]  # sum over lo <= j < i
        within_right = self.prefix[rows, hi] - self.prefix[rows, rows + 1]  # sum over i < j < hi
        cum_left = np.concatenate([[0.0], np.cumsum(within_left)])  # cum_left[r] = pairs inside [lo, lo + r)
        cum_right = np.concatenate([np.cumsum(within_right[::-1])[::-1], [0.0]])  # pairs inside [lo + r, hi)
        total = cum_left[-1]
        r = np.arange(min_size, hi - lo - min_size + 1)
        m = r.astype(float)
        k = (hi - lo) - m
        wl = cum_left[r]
        wr = cum_right[r]
        between = total - wl - wr
        energy = 2.0 * between / (m * k) - wl / (m * (m - 1) / 2.0) - wr / (k * (k - 1) / 2.0)
        q = m * k / (m + k) * energy
        return lo + int(r[int(np.argmax(q))])


Factor = Callable[[int, int], int]


def _search(sums: _Sums, n: int, alpha: float, min_size: int, best: Callable[[int, int], int]) -> list[int]:
    """Recursive binary segmentation with ``best(lo, hi)`` choosing each segment's split."""
    found = []
    stack = [(0, n)]
    while stack:
        lo, hi = stack.pop()
        if hi - lo < 2 * min_size:
            continue
        split = best(lo, hi)
        if _adjusted(sums.t_at(lo, split, hi), hi - lo, hi - lo - 2 * min_size + 1) <= alpha:
            found.append(split)
            stack += [(lo, split), (split, hi)]
    return sorted(found)


def seeded_intervals(n: int, min_length: int) -> list[tuple[int, int]]:
    """The deterministic intervals of seeded binary segmentation (decay 1/2), as ``(lo, hi)``.

    Layer ``k`` holds ``2**(k+1) - 1`` intervals of ``ceil(n / 2**k)`` points, evenly
    shifted so that neighbours overlap by half; layer 0 is the whole series.
    """
    found = {(0, n)}
    layer = 1
    while (length := math.ceil(n / 2**layer)) >= min_length:
        count = 2 ** (layer + 1) - 1
        shift = (n - length) / (count - 1)
        found.update((int(j * shift), int(j * shift) + length) for j in range(count))
        layer += 1
    return sorted(found)


def _seeded(sums: _Sums, n: int, alpha: float, min_size: int) -> tuple[list[int], int]:
    """Seeded binary segmentation: the greedy choice of splits, and the Bonferroni factor."""
    by_length: dict[int, list[int]] = {}
    for lo, hi in seeded_intervals(n, 2 * min_size):
        by_length.setdefault(hi - lo, []).append(lo)
    candidates: list[tuple[float, float, int, int, int]] = []
    factor = 0
    for length, starts in by_length.items():
        lows = np.asarray(starts, dtype=np.int64)[:, None]
        offsets = np.arange(min_size, length - min_size + 1, dtype=np.int64)[None, :]
        split = lows + offsets
        t = sums.t_grid(lows, split, lows + length)
        best = np.argmax(np.abs(t), axis=1)
        rows = np.arange(len(starts))
        t_best = t[rows, best]
        p = np.where(np.isinf(t_best), 0.0, 2.0 * special.stdtr(length - 2, -np.abs(t_best)))
        factor += len(starts) * offsets.size
        for j, start in enumerate(starts):
            candidates.append((float(p[j]), -abs(float(t_best[j])), start, start + length, int(split[j, best[j]])))
    candidates.sort()
    found: list[int] = []
    for p_value, _, lo_j, hi_j, split_j in candidates:
        if p_value * factor > alpha:
            break
        if not any(lo_j < f < hi_j for f in found):
            found.append(split_j)
    return sorted(found), factor


def _relative(before: float, after: float) -> float:
    if before != 0.0:
        return after / before - 1.0
    return 0.0 if after == before else math.copysign(math.inf, after - before)


def _merge(sums: _Sums, n: int, found: list[int], alpha: float, factor: Factor) -> list[ChangePoint]:
    """Otava's merge pass: re-test each point between its neighbours; drop the weakest while one fails."""
    points = list(found)
    while True:
        bounds = [0, *points, n]
        tested = []
        for j in range(len(points)):
            lo, split, hi = bounds[j], bounds[j + 1], bounds[j + 2]
            t = sums.t_at(lo, split, hi)
            tested.append((_adjusted(t, hi - lo, factor(lo, hi)), t, sums.mean(lo, split), sums.mean(split, hi)))
        weakest = max(range(len(points)), key=lambda j: tested[j][0], default=None)
        if weakest is None or tested[weakest][0] <= alpha:
            break
        del points[weakest]
    return [
        ChangePoint(index=index, before=before, after=after, change=_relative(before, after), p_value=p, t=t)
        for index, (p, t, before, after) in zip(points, tested, strict=True)
    ]


def detect(
    values: Sequence[float] | Array,
    *,
    method: str = "seeded",
    alpha: float = 0.001,
    min_size: int = 3,
    min_change: float = 0.0,
) -> list[ChangePoint]:
    """The significant change points of ``values`` (in time order), oldest first.

    Args:
        values: the series, e.g. one metric's median per run.
        method: ``seeded`` (default), ``binseg`` or ``edivisive``: how candidates are found.
        alpha: significance level, Bonferroni-corrected for the splits each candidate was chosen from.
        min_size: the fewest points a segment may have (>= 2).
        min_change: drop change points whose relative size is below this (0.05 = 5 %).

    Raises:
        ValueError: an unknown method, a bad parameter, or a value that is not finite.
    """
    if method not in METHODS:
        raise ValueError(f"unknown change-point method {method!r}; choose from {', '.join(METHODS)}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be between 0 and 1, got {alpha!r}")
    if min_size < 2:
        raise ValueError(f"min_size must be at least 2, got {min_size!r}")
    if min_change < 0:
        raise ValueError(f"min_change must be >= 0, got {min_change!r}")
    x = np.asarray(values, dtype=float)
    if x.ndim != 1:
        raise ValueError("values must be a one-dimensional series")
    if not np.all(np.isfinite(x)):
        raise ValueError("values must be finite numbers (no NaN or infinity)")
    if x.size < 2 * min_size:
        return []
    sums = _Sums(x)
    if method == "seeded":
        found, total = _seeded(sums, x.size, alpha, min_size)
        points = _merge(sums, x.size, found, alpha, lambda lo, hi: total)
    else:
        if method == "binseg":

            def best(lo: int, hi: int) -> int:
                split, t = sums.t_profile(lo, hi, min_size)
                return int(split[int(np.argmax(np.abs(t)))])

        else:
            energy = _Energy(x)

            def best(lo: int, hi: int) -> int:
                return energy.best_split(lo, hi, min_size)

        found = _search(sums, x.size, alpha, min_size, best)
        points = _merge(sums, x.size, found, alpha, lambda lo, hi: hi - lo - 2 * min_size + 1)
    return [cp for cp in points if abs(cp.change) >= min_change]
