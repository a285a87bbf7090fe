"""How long a measurement would have to run to decide an inconclusive metric.

A check says "about 6 min of measurement per side", not "85 processes per side": a count
of repetitions means nothing to a reader until it is turned into the time it costs. The
estimate is built from what the run itself recorded: the time of every timed call (the
samples of its time metrics, plus the reference kernel timed beside them). Set-up, warm-up
and process start-up are not in a run file, so the estimate is a lower bound, and the
report says so.

Internal: shared with ``report``; not part of the Python API (README, "Python API").
"""

from __future__ import annotations

import math

from perfgate.core.metrics import Direction
from perfgate.core.reduced import metric_summary
from perfgate.core.schema import Run

__all__ = ["TIME_UNIT_SECONDS", "measured_seconds", "repetitions", "seconds_to_decide"]

TIME_UNIT_SECONDS: dict[str, float] = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,  # micro sign
    "μs": 1e-6,  # Greek mu
    "ms": 1e-3,
    "s": 1.0,
    "sec": 1.0,
    "seconds": 1.0,
    "min": 60.0,
}


def measured_seconds(run: Run) -> float | None:
    """Seconds the run spent in timed calls, summed over its time metrics; None when it has none.

    Each sample of a lower-is-better metric in a time unit is the duration of one timed call
    (or of one repetition of the whole measurement), so their sum is time the run really
    spent measuring. A metric's reference kernel, timed with each block of its calls, adds
    its own seconds.
    """
    total = 0.0
    for metric in run.metrics.values():
        scale = TIME_UNIT_SECONDS.get(metric.unit)
        if scale is None or metric.direction is not Direction.LOWER:
            continue
        if metric.sizes is not None:  # the bounded form: its mean times the samples it stands for
            total += scale * max(metric_summary(metric).mean, 0.0) * metric.n
        else:
            total += scale * math.fsum(s for s in metric.samples if math.isfinite(s) and s > 0)
        if metric.reference is not None:
            total += math.fsum(s for s in metric.reference.seconds if math.isfinite(s) and s > 0)
    return total if total > 0 else None


def repetitions(run: Run, metric: str, unit: str) -> int:
    """How many of ``unit`` ("samples" or "processes") the run measured of ``metric`` (at least 1)."""
    m = run.metrics.get(metric)
    if m is None:
        return 1
    if unit == "processes":
        return max(len(m.groups) if m.groups is not None else 1, 1)
    return max(m.n, 1)


def seconds_to_decide(required: int, have: int, seconds: float) -> float:
    """Measurement time per side for ``required`` repetitions, when ``have`` took ``seconds``.

    Repetitions of the same measurement cost the same time each, so the time grows in
    proportion: 20 samples in 30 s, 80 required, gives 120 s.

    >>> seconds_to_decide(80, 20, 30.0)
    120.0
    """
    if required < 1 or have < 1 or seconds < 0:
        raise ValueError(f"need required >= 1, have >= 1, seconds >= 0; got {required}, {have}, {seconds}")
    return seconds * required / have
