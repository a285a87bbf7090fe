"""Derived metrics: a rate computed from the times of the same calls.

The runner writes ``throughput_samples_per_sec`` as the batch divided by each timed call
of the training step, so its samples carry nothing the step's times do not: each pair's
product is the same number (the batch, in the units of both). Tested as a second metric
it would count twice in the family-wise correction, and a ``min`` budget on it would gate
on the single slowest call. A derived metric is recognised from the samples themselves, so
that runs written by other tools (and older files) are treated alike: a higher-is-better
metric is derived from a lower-is-better one of the same run when both have the same
number of samples, at least two different ones, and ``rate_i * time_i`` is one constant
to within :data:`_RELATIVE_TOLERANCE`.

Tested in ``tests/core/test_derived.py``.
"""

from __future__ import annotations

from collections.abc import Mapping

from perfgate.core.metrics import Direction
from perfgate.core.schema import Metric, Run

__all__ = ["derived_metrics", "is_derived_from"]

_RELATIVE_TOLERANCE = 1e-9


def is_derived_from(rate: Metric, source: Metric) -> bool:
    """Whether every sample of ``rate`` is one constant over the matching sample of ``source``."""
    if rate.direction is not Direction.HIGHER or source.direction is not Direction.LOWER:
        return False
    if len(rate.samples) != len(source.samples) or len(source.samples) < 2:
        return False
    first = rate.samples[0] * source.samples[0]
    if first <= 0 or abs(rate.samples[1] * source.samples[1] - first) > _RELATIVE_TOLERANCE * first:
        return False  # the cheap look first: most pairs of metrics part at their second sample
    if min(source.samples) == max(source.samples):
        return False  # constant samples: any other constant series would look derived
    pairs = zip(rate.samples, source.samples, strict=True)
    return all(abs(r * s - first) <= _RELATIVE_TOLERANCE * first for r, s in pairs)


def derived_metrics(run: Run, also: Run | None = None) -> dict[str, str]:
    """Derived metric -> the metric it is derived from, in ``run`` (and in ``also`` too, when given).

    A baseline and a current run are compared as derived only when the relation holds in
    both: an older file whose throughput was measured separately is tested on its own.
    """
    found: dict[str, str] = {}
    sources = [m for m in run.metrics.values() if m.direction is Direction.LOWER]
    for rate in run.metrics.values():
        if rate.direction is not Direction.HIGHER:
            continue
        for source in sources:
            if is_derived_from(rate, source) and _holds(also, rate.name, source.name):
                found[rate.name] = source.name
                break
    return found


def _holds(other: Run | None, rate: str, source: str) -> bool:
    if other is None:
        return True
    metrics: Mapping[str, Metric] = other.metrics
    if rate not in metrics or source not in metrics:
        return True  # one side lacks the pair: nothing there says otherwise
    return is_derived_from(metrics[rate], metrics[source])
