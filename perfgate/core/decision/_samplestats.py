"""Per-metric sample statistics for the decision, one metric at a time or all at once.

The decision asks four things of each metric's samples: its summary, a location statistic
(median, p50, p95, p99), that statistic's order-statistic confidence interval and the log
locations of its groups. :class:`ReferenceStats` answers with the functions of
:mod:`perfgate.core.stats` on each metric in turn. :class:`BatchStats` stacks the metrics
of one sample count into a matrix, sorts it once and reads every answer off the sorted
rows, so a check of a thousand metrics costs a few numpy calls instead of a few thousand
(the order-statistic ranks of an interval depend only on the sample count, and are
computed once per count). Both give the same figures to rounding; a seeded test on random
data holds them to that (``tests/core/test_vectorised.py``).

A metric in its bounded form (:mod:`perfgate.core.reduced`: per group its order statistics
and its true count) is answered by that module's functions in both, with the ranks of its true
sample count.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from perfgate.core import reduced
from perfgate.core.noise import group_locations
from perfgate.core.schema import Metric
from perfgate.core.stats import QUANTILES, Summary, order_statistic_ranks, quantile, quantile_ci, summarize

__all__ = ["BatchStats", "ReferenceStats", "SampleStats"]


class SampleStats(Protocol):
    """What the decision reads from a metric's samples."""

    def summary(self, metric: Metric) -> Summary: ...

    def value(self, metric: Metric, statistic: str) -> float: ...

    def ci(self, metric: Metric, statistic: str) -> tuple[float, float]: ...

    def group_logs(self, metric: Metric, q: float) -> NDArray[np.float64]: ...


class ReferenceStats:
    """Each statistic computed on its own metric's samples (the reference path)."""

    def __init__(self, confidence: float) -> None:
        self.confidence = confidence

    def summary(self, metric: Metric) -> Summary:
        if metric.sizes is not None:
            return reduced.metric_summary(metric)
        return summarize(metric.samples)

    def value(self, metric: Metric, statistic: str) -> float:
        if metric.sizes is not None:
            return reduced.metric_quantile(metric, QUANTILES[statistic])
        return quantile(metric.samples, statistic)

    def ci(self, metric: Metric, statistic: str) -> tuple[float, float]:
        if metric.sizes is not None:
            return reduced.metric_ci(metric, statistic, self.confidence)
        return quantile_ci(metric.samples, statistic, self.confidence)

    def group_logs(self, metric: Metric, q: float) -> NDArray[np.float64]:
        return group_locations(metric, q)


def _lerp(a: NDArray[np.float64], b: NDArray[np.float64], t: float) -> NDArray[np.float64]:
    # numpy.percentile's interpolation, term for term, so both paths agree to the last bit
    diff = b - a
    out: NDArray[np.float64] = b - diff * (1.0 - t) if t >= 0.5 else a + diff * t
    return out


def _quantile_rows(s: NDArray[np.float64], q: float) -> NDArray[np.float64]:
    """Type-7 q-quantile of each row of a row-sorted matrix."""
    n = s.shape[1]
    h = (n - 1) * q
    lo = int(np.floor(h))
    hi = min(lo + 1, n - 1)
    return _lerp(s[:, lo], s[:, hi], h - lo)


class _Block:
    """The metrics of one sample count: their sorted samples and everything read off them."""

    def __init__(self, metrics: list[Metric], confidence: float) -> None:
        x = np.array([m.samples for m in metrics], dtype=float)
        s = np.sort(x, axis=1)
        n = s.shape[1]
        self.quantiles = {name: _quantile_rows(s, q) for name, q in QUANTILES.items()}
        median = self.quantiles["median"]
        deviations = np.sort(np.abs(x - median[:, None]), axis=1)
        self.mean = x.mean(axis=1)
        self.stdev = x.std(axis=1, ddof=1) if n > 1 else np.zeros(len(metrics))
        self.mad = _quantile_rows(deviations, 0.5)
        self.min = s[:, 0]
        self.max = s[:, -1]
        self.ci: dict[str, tuple[NDArray[np.float64], NDArray[np.float64]]] = {}
        for name in QUANTILES:
            lo, hi = order_statistic_ranks(n, name, confidence)
            self.ci[name] = (s[:, lo - 1], s[:, hi - 1])
        self.n = n


class BatchStats:
    """Every statistic of many metrics at once, from one sorted matrix per sample count.

    A metric it was not built with is answered by the reference functions.
    """

    def __init__(self, metrics: Iterable[Metric], confidence: float) -> None:
        self.confidence = confidence
        self._reference = ReferenceStats(confidence)
        by_n: dict[int, list[Metric]] = {}
        seen: set[int] = set()
        for m in metrics:
            if m.sizes is not None:
                continue  # a bounded metric: answered by the reference path (perfgate.core.reduced)
            if id(m) not in seen:
                seen.add(id(m))
                by_n.setdefault(len(m.samples), []).append(m)
        self._where: dict[int, tuple[_Block, int]] = {}
        self._keep = [m for ms in by_n.values() for m in ms]  # the ids stay valid while the batch lives
        for ms in by_n.values():
            block = _Block(ms, confidence)
            for row, m in enumerate(ms):
                self._where[id(m)] = (block, row)

    def summary(self, metric: Metric) -> Summary:
        found = self._where.get(id(metric))
        if found is None:
            return self._reference.summary(metric)
        b, i = found
        return Summary(
            n=b.n,
            mean=float(b.mean[i]),
            median=float(b.quantiles["median"][i]),
            stdev=float(b.stdev[i]),
            mad=float(b.mad[i]),
            min=float(b.min[i]),
            max=float(b.max[i]),
            p50=float(b.quantiles["p50"][i]),
            p95=float(b.quantiles["p95"][i]),
            p99=float(b.quantiles["p99"][i]),
        )

    def value(self, metric: Metric, statistic: str) -> float:
        found = self._where.get(id(metric))
        if found is None:
            return self._reference.value(metric, statistic)
        return float(found[0].quantiles[statistic][found[1]])

    def ci(self, metric: Metric, statistic: str) -> tuple[float, float]:
        found = self._where.get(id(metric))
        if found is None:
            return self._reference.ci(metric, statistic)
        lo, hi = found[0].ci[statistic]
        return float(lo[found[1]]), float(hi[found[1]])

    def group_logs(self, metric: Metric, q: float) -> NDArray[np.float64]:
        found = self._where.get(id(metric))
        if found is None or (metric.groups is not None and len(metric.groups) > 1):
            return self._reference.group_logs(metric, q)
        name = next((k for k, v in QUANTILES.items() if v == q), None)
        if name is None:
            return self._reference.group_logs(metric, q)
        value = float(found[0].quantiles[name][found[1]])
        return np.log(np.array([value])) if value > 0 else np.empty(0)
