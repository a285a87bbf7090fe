"""What the backends share to fill their tables: the metric summary rows and the created_at sort key.

Private to :mod:`perfgate.store`; :func:`created_key` is also exported by the package, for
callers that sort runs the way the store does.
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple

from perfgate.core.reduced import metric_summary
from perfgate.core.schema import Run

__all__ = ["MetricRow", "created_from_key", "created_key", "metric_rows"]


class MetricRow(NamedTuple):
    """The summary row kept next to a run document, one per metric."""

    metric: str
    unit: str
    direction: str
    n: int
    mean: float
    median: float
    p95: float
    p99: float
    min: float
    max: float


_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?Z$")


def created_key(created_at: str | None) -> str:
    """A sort key for ``created_at``: fixed-width microseconds, so text order is time order.

    ``"2026-11-29T18:00:00Z"`` and ``"2026-11-29T18:00:00.5Z"`` differ in width, and ``.``
    sorts before ``Z``; the key pads both to ``...:00.000000Z``. No timestamp sorts first.
    """
    if not created_at:
        return ""
    match = _STAMP.match(created_at)
    if match is None:
        return created_at
    return f"{match.group(1)}.{(match.group(2) or '').ljust(6, '0')}Z"


def created_from_key(key: str) -> str | None:
    """The inverse of :func:`created_key` for keys it wrote (as the codec writes timestamps)."""
    if not key:
        return None
    if key.endswith(".000000Z"):
        return key[: -len(".000000Z")] + "Z"
    return key


def _quantile(ordered: list[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default, "type 7")."""
    h = (len(ordered) - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (h - lo) * (ordered[hi] - ordered[lo])


def metric_rows(run: Run) -> list[MetricRow]:
    """The summary rows of ``run``'s metrics (quantiles as numpy's default, like core.stats).

    Plain Python: for the few dozen samples of a metric it is ~50x faster than numpy's
    per-call overhead, which would dominate recording (benchmarks/store.py).
    """
    rows = []
    for name, metric in run.metrics.items():
        if metric.sizes is not None:  # the bounded form: the summary of the samples it stands for
            s = metric_summary(metric)
            rows.append(
                MetricRow(name, metric.unit, metric.direction.value, s.n, s.mean, s.median, s.p95, s.p99, s.min, s.max)
            )
            continue
        ordered = sorted(metric.samples)
        rows.append(
            MetricRow(
                metric=name,
                unit=metric.unit,
                direction=metric.direction.value,
                n=len(ordered),
                mean=math.fsum(ordered) / len(ordered),
                median=_quantile(ordered, 0.5),
                p95=_quantile(ordered, 0.95),
                p99=_quantile(ordered, 0.99),
                min=float(ordered[0]),
                max=float(ordered[-1]),
            )
        )
    return rows
