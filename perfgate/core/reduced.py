"""A metric's bounded form: per group, its evenly spaced order statistics and its true count.

A fast benchmark of pytest-benchmark keeps every round: a real suite's file holds millions of
samples, and a run that kept them all would cost hundreds of MB per run file and per stored
run. A group (a worker process, a pooled run) of more than :data:`POINTS` samples is kept as
:data:`POINTS` values instead: the type-7 quantiles of its samples at the levels
``j / (POINTS - 1)``, which are the order statistics at the ranks ``j (n - 1) / (POINTS - 1)``
(interpolated as ``numpy.percentile`` does), together with ``n`` (:attr:`Metric.sizes
<perfgate.core.schema.Metric.sizes>`).

What that keeps, and why it is enough for every test perfgate makes:

* **Every quantile to within 1/1000 of the ranks.** Linear interpolation over the kept
  values is the full sample's quantile function sampled at the levels and joined by
  straight lines: exact at the levels, between two neighbouring order statistics of the
  full sample elsewhere. The median (level 500), p95 (950) and p99 (990) are levels, so a
  group's median, p95 and p99 are the full sample's, to rounding; so are its minimum and
  maximum.
* **The standard errors of the full sample.** A location's within-run standard error comes
  from its order-statistic confidence interval (:func:`perfgate.core.stats.quantile_ci`),
  whose ranks depend on the sample count alone: they are taken from the true ``n`` and read
  off the kept values by interpolation, so the interval has the full sample's width, not the
  width of 1,001 samples'.
* **The tests' sample sizes.** 1,001 values exceed every minimum a test has (300 for p99),
  and the within-run degrees of freedom the tests use saturate at 1,000
  (:func:`perfgate.core.decision._estimate.unpaired_test` takes a normal tail from there), so a test
  on a bounded group has the degrees of freedom of the full sample.
* **The per-process spread.** Groups stay groups: each process (or pooled run) keeps its own
  order statistics, so the spread between processes is that of their true medians.

Several groups of one metric are pooled by their count functions (:func:`union_values`): each
group's number of samples at or below ``x``, interpolated between its kept values, summed over
the groups and inverted. For groups that keep every sample it is the plain pooled quantile up to
the interpolation between neighbouring samples; a metric whose groups keep every sample never
takes this path (its statistics are computed from its samples as before).

The mean, the standard deviation and the MAD of a bounded group are estimated from its kept
values, each weighted by the ranks it stands for; they are descriptive (shown in reports), never
tested. Sample order within a bounded group is lost (the values are sorted): a metric timed with
a reference kernel (one reference timing per sample) or taking part in a derived rate (a
throughput computed from the same calls' times, matched sample by sample) keeps every sample.

:class:`SampleReducer` makes the bounded form from a stream of samples in bounded memory: it
keeps up to :data:`_CHUNK` raw values, and bounds each full chunk to :data:`_CHUNK_POINTS`
order statistics of its own (2,048 ranks between two, against the 1/1000 of the final grid)
before pooling them at the end. A group of up to :data:`_CHUNK` samples is bounded exactly.
Tested in ``tests/core/test_reduced.py``.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Sequence
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from perfgate.core._derived import derived_metrics
from perfgate.core.schema import Metric, Run
from perfgate.core.stats import Summary, order_statistic_ranks

__all__ = [
    "POINTS",
    "SampleReducer",
    "bound_metric",
    "bound_run",
    "is_bounded",
    "metric_ci",
    "metric_quantile",
    "metric_summary",
    "order_statistics",
    "pooled_group",
    "total",
    "union_values",
]

# values kept of a group of more samples: levels 0, 1/1000, ..., 1 (the median, p95 and p99 are levels)
POINTS = 1001
# raw values a SampleReducer holds before it bounds them (8 bytes each: 16 MiB)
_CHUNK = 1 << 21
# order statistics kept of each full chunk, and how many chunks are kept before they are pooled
_CHUNK_POINTS = 1025
_MAX_PARTS = 64

_Group = tuple[NDArray[np.float64], NDArray[np.float64], int]  # sorted values, their 0-based ranks, n


def order_statistics(ordered: NDArray[np.float64], points: int = POINTS) -> NDArray[np.float64]:
    """The type-7 quantiles of a sorted sample at the levels ``j / (points - 1)``."""
    n = ordered.size
    h = np.arange(points, dtype=float) * (n - 1) / (points - 1)
    lo = np.floor(h).astype(np.int64)
    hi = np.minimum(lo + 1, n - 1)
    t = h - lo
    a, b = ordered[lo], ordered[hi]
    # numpy.percentile's interpolation, term for term
    out: NDArray[np.float64] = np.where(t >= 0.5, b - (b - a) * (1.0 - t), a + (b - a) * t)
    out[0], out[-1] = ordered[0], ordered[-1]
    return out


def _ranks(stored: int, n: int) -> NDArray[np.float64]:
    if stored == n:
        return np.arange(n, dtype=float)
    return np.arange(stored, dtype=float) * (n - 1) / (stored - 1)


def _groups(metric: Metric) -> list[_Group]:
    sizes = metric.sizes or tuple(len(g) for g in metric.group_samples())
    out = []
    for values, n in zip(metric.group_samples(), sizes, strict=True):
        v = np.asarray(values, dtype=float)
        if len(values) == n:
            v = np.sort(v)
        out.append((v, _ranks(len(values), n), n))
    return out


def is_bounded(metric: Metric) -> bool:
    """Whether some group of ``metric`` keeps only its order statistics."""
    return metric.sizes is not None


def total(metric: Metric) -> int:
    """How many samples ``metric`` measured (its stored values, when it keeps every one)."""
    return sum(metric.sizes) if metric.sizes is not None else len(metric.samples)


def _counts(
    v: NDArray[np.float64], r: NDArray[np.float64], n: int, x: NDArray[np.float64], side: Literal["left", "right"]
) -> NDArray[np.float64]:
    """A group's number of samples at or below ``x`` (``side="right"``) or below it (``"left"``),
    interpolated linearly in rank between its kept values."""
    idx = np.searchsorted(v, x, side=side)
    k = v.size
    out = np.where(idx >= k, float(n), 0.0)
    inside = (idx > 0) & (idx < k)
    if inside.any():
        a = idx[inside] - 1
        b = a + 1
        frac = (x[inside] - v[a]) / (v[b] - v[a])
        out[inside] = 1.0 + r[a] + frac * (r[b] - r[a])
    return out


def union_values(groups: Sequence[_Group], targets: NDArray[np.float64]) -> NDArray[np.float64]:
    """The values at which the pooled count function of ``groups`` reaches ``targets``.

    A target ``t`` is a 1-based rank: ``1 + (N - 1) q`` for the type-7 q-quantile of ``N``
    pooled samples, ``l`` for the l-th order statistic. One group is read off directly.
    """
    if len(groups) == 1:
        v, r, _ = groups[0]
        result: NDArray[np.float64] = np.interp(targets - 1.0, r, v)
        return result
    knots = np.unique(np.concatenate([g[0] for g in groups]))
    right = np.zeros(knots.size)
    left = np.zeros(knots.size)
    for v, r, n in groups:
        right += _counts(v, r, n, knots, "right")
        left += _counts(v, r, n, knots, "left")
    # between knots i-1 and i the count rises linearly from right[i-1] to left[i]; at knot i it
    # jumps from left[i] to right[i] (the samples equal to it)
    i = np.clip(np.searchsorted(right, targets, side="left"), 0, knots.size - 1)
    out = knots[i].astype(float)
    between = (left[i] > targets) & (i > 0)
    if between.any():
        j = i[between]
        lo_count, hi_count = right[j - 1], left[j]
        span = np.where(hi_count > lo_count, hi_count - lo_count, 1.0)
        frac = np.clip((targets[between] - lo_count) / span, 0.0, 1.0)
        out[between] = knots[j - 1] + frac * (knots[j] - knots[j - 1])
    return out


def metric_quantile(metric: Metric, q: float) -> float:
    """The type-7 q-quantile of all of ``metric``'s samples."""
    groups = _groups(metric)
    n = sum(g[2] for g in groups)
    return float(union_values(groups, np.array([1.0 + (n - 1) * q]))[0])


def metric_ci(metric: Metric, statistic: str, confidence: float) -> tuple[float, float]:
    """The order-statistic confidence interval of ``statistic`` (:func:`perfgate.core.stats.quantile_ci`),
    its ranks taken from the true sample count."""
    groups = _groups(metric)
    n = sum(g[2] for g in groups)
    lo, hi = order_statistic_ranks(n, statistic, confidence)
    a, b = union_values(groups, np.array([float(lo), float(hi)]))
    return float(a), float(b)


def _weights(stored: int, n: int) -> NDArray[np.float64]:
    """The samples each kept value stands for: the ranks between its neighbours, shared halfway."""
    if stored == n:
        return np.ones(n)
    d = (n - 1) / (stored - 1)
    w = np.full(stored, d)
    w[0] = w[-1] = (d + 1.0) / 2.0
    return w


def metric_summary(metric: Metric) -> Summary:
    """:func:`perfgate.core.stats.summarize` of the samples ``metric`` stands for (``n`` the true count)."""
    groups = _groups(metric)
    n = sum(g[2] for g in groups)
    med, p95, p99 = union_values(groups, 1.0 + (n - 1) * np.array([0.5, 0.95, 0.99]))
    values = np.concatenate([g[0] for g in groups])
    weights = np.concatenate([_weights(g[0].size, g[2]) for g in groups])
    # about the median: equal samples give their value exactly, whatever order the BLAS dot product adds in
    mean = float(med) + float(np.dot(weights, values - med) / n)
    var = float(np.dot(weights, (values - mean) ** 2) / (n - 1)) if n > 1 else 0.0
    deviations = np.abs(values - med)
    order = np.argsort(deviations, kind="stable")
    cumulative = np.cumsum(weights[order])
    mad = float(deviations[order][min(int(np.searchsorted(cumulative, n / 2.0)), n - 1, order.size - 1)])
    return Summary(
        n=n,
        mean=mean,
        median=float(med),
        stdev=math.sqrt(max(var, 0.0)),
        mad=mad,
        min=float(values.min()),
        max=float(values.max()),
        p50=float(med),
        p95=float(p95),
        p99=float(p99),
    )


def pooled_group(metric: Metric, points: int = POINTS) -> tuple[tuple[float, ...], int]:
    """All of ``metric``'s samples as one group: every sample when it keeps them all and they are
    at most ``points``, else the order statistics of the pooled groups. Returns (values, true n)."""
    if metric.sizes is None and len(metric.samples) <= points:
        return tuple(metric.samples), len(metric.samples)
    groups = _groups(metric)
    n = sum(g[2] for g in groups)
    if metric.sizes is None or (len(groups) == 1 and groups[0][0].size == n):
        ordered = np.sort(np.asarray(metric.samples, dtype=float))
        return tuple(order_statistics(ordered, points).tolist()), n
    if len(groups) == 1:
        return tuple(groups[0][0].tolist()), n
    targets = 1.0 + np.arange(points, dtype=float) * (n - 1) / (points - 1)
    return tuple(union_values(groups, targets).tolist()), n


def bound_metric(metric: Metric, points: int = POINTS) -> Metric:
    """``metric`` with every group of more than ``points`` samples kept as its order statistics.

    A metric timed with a reference kernel keeps every sample (each has its own reference
    timing); so does one whose groups are all small enough. Bounding a bounded metric changes nothing.
    """
    if metric.reference is not None:
        return metric
    parts = metric.group_samples()
    sizes = list(metric.sizes or (len(g) for g in parts))
    if all(len(g) <= points for g in parts):
        return metric
    samples: list[float] = []
    stored: list[int] = []
    for _i, values in enumerate(parts):
        if len(values) > points:
            values = tuple(order_statistics(np.sort(np.asarray(values, dtype=float)), points).tolist())
        samples.extend(values)
        stored.append(len(values))
    return Metric(
        name=metric.name,
        unit=metric.unit,
        direction=metric.direction,
        samples=tuple(samples),
        groups=tuple(stored) if len(stored) > 1 else None,
        sizes=tuple(sizes),
    )


def bound_run(run: Run, points: int = POINTS) -> Run:
    """``run`` with each metric in its bounded form (:func:`bound_metric`), except a derived rate
    and the times it is derived from, whose samples are matched one by one
    (:mod:`perfgate.core._derived`). The same run when nothing changes."""
    large = {name for name, m in run.metrics.items() if any(len(g) > points for g in m.group_samples())}
    if not large:
        return run
    derived = derived_metrics(run)
    keep = set(derived) | set(derived.values())
    metrics = {
        name: bound_metric(m, points) if name in large and name not in keep else m for name, m in run.metrics.items()
    }
    if all(metrics[name] is run.metrics[name] for name in metrics):
        return run
    return Run(
        model=run.model,
        metrics=metrics,
        schema_version=run.schema_version,
        run_id=run.run_id,
        suite=run.suite,
        created_at=run.created_at,
        git=run.git,
        machine=run.machine,
        config=run.config,
        single_sample_format=run.single_sample_format,
        machine_index=run.machine_index,
        software=run.software,
        measure=run.measure,
    )


class SampleReducer:
    """One group's samples taken as they stream in, kept in bounded memory, then bounded.

    Holds at most :data:`_CHUNK` raw values; each full chunk is kept as its
    :data:`_CHUNK_POINTS` order statistics, and more than :data:`_MAX_PARTS` such chunks are
    pooled into one. :meth:`result` gives the group's values and true count: every sample, in
    the order given, when there are at most ``points``; else the ``points`` order statistics
    (exact when the group fitted in one chunk).
    """

    def __init__(self, points: int = POINTS) -> None:
        self.points = points
        self.count = 0
        self._raw = array("d")
        self._parts: list[_Group] = []

    def extend(self, values: Iterable[float]) -> None:
        """Take ``values`` (an ``array("d")`` is taken at C speed)."""
        before = len(self._raw)
        self._raw.extend(values if isinstance(values, array) else array("d", values))
        self.count += len(self._raw) - before
        while len(self._raw) >= _CHUNK:
            self._spill()

    def _spill(self) -> None:
        chunk, self._raw = self._raw[:_CHUNK], self._raw[_CHUNK:]
        ordered = np.sort(np.frombuffer(chunk, dtype=float))
        kept = order_statistics(ordered, _CHUNK_POINTS)
        self._parts.append((kept, _ranks(kept.size, ordered.size), ordered.size))
        if len(self._parts) > _MAX_PARTS:
            n = sum(p[2] for p in self._parts)
            targets = 1.0 + np.arange(_CHUNK_POINTS, dtype=float) * (n - 1) / (_CHUNK_POINTS - 1)
            pooled = union_values(self._parts, targets)
            self._parts = [(pooled, _ranks(pooled.size, n), n)]

    def result(self) -> tuple[tuple[float, ...], int]:
        """(values, true count); raises ValueError when nothing was added."""
        if self.count == 0:
            raise ValueError("no samples")
        raw = np.frombuffer(self._raw, dtype=float)
        if not self._parts:
            if raw.size <= self.points:
                return tuple(raw.tolist()), self.count
            return tuple(order_statistics(np.sort(raw), self.points).tolist()), self.count
        groups = list(self._parts)
        if raw.size:
            ordered = np.sort(raw)
            groups.append((ordered, _ranks(ordered.size, ordered.size), ordered.size))
        n = self.count
        targets = 1.0 + np.arange(self.points, dtype=float) * (n - 1) / (self.points - 1)
        values = union_values(groups, targets)
        values[0] = min(float(g[0][0]) for g in groups)
        values[-1] = max(float(g[0][-1]) for g in groups)
        return tuple(values.tolist()), n
