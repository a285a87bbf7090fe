"""Run-to-run noise: the spread between independent repetitions of a whole measurement.

Samples from one process understate the noise that matters on a shared machine: a
process, its memory layout and the machine's phase shift all its samples together
(``docs/noise.md``: identical work measured a minute apart differs by up to 2×).
Two estimates of the between-run standard deviation of a metric's log location make that
noise visible to the decision:

* **from the runs themselves** — runs measured in several worker processes carry
  ``Metric.groups``; the pooled standard deviation of the log group medians around each
  side's mean (:func:`between_groups`);
* **from the history** — ``perfgate calibrate`` takes unchanged runs of one machine and
  estimates the standard deviation of their log medians with the successive-difference
  estimator (:func:`calibrate_sigma`), which a genuine step in the history barely moves.

Tested in ``tests/core/test_noise.py`` (hand values, seeded recovery of a known sigma).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from perfgate.core.schema import Metric, Run

__all__ = ["BetweenGroups", "between_groups", "calibrate_sigma", "combine_repetitions", "group_locations"]

# median(|X - Y|) for X, Y iid N(0, s^2) is 0.6745 * sqrt(2) * s
_MAD_DIFF = 0.6744897501960817 * math.sqrt(2.0)


@dataclass(frozen=True, slots=True, kw_only=True)
class BetweenGroups:
    """Pooled between-group standard deviation of log locations, with its degrees of freedom."""

    sigma: float
    df: int
    groups_baseline: int
    groups_current: int


def group_locations(metric: Metric, q: float) -> np.ndarray:
    """Log of each group's q-quantile (groups with a non-positive value are left out)."""
    values = np.array([np.percentile(np.asarray(g, dtype=float), 100.0 * q) for g in metric.group_samples()])
    values = values[values > 0]
    logs: np.ndarray = np.log(values)
    return logs


def between_groups(baseline: Metric, current: Metric, q: float = 0.5) -> BetweenGroups | None:
    """Pooled SD of log group locations across both sides; None with fewer than 3 groups in all."""
    a, b = group_locations(baseline, q), group_locations(current, q)
    df = (len(a) - 1 if len(a) > 1 else 0) + (len(b) - 1 if len(b) > 1 else 0)
    if df < 1:
        return None
    ss = (float(np.sum((a - a.mean()) ** 2)) if len(a) > 1 else 0.0) + (
        float(np.sum((b - b.mean()) ** 2)) if len(b) > 1 else 0.0
    )
    return BetweenGroups(sigma=math.sqrt(ss / df), df=df, groups_baseline=len(a), groups_current=len(b))


def calibrate_sigma(run_locations: Sequence[float]) -> float | None:
    """Between-run SD of log locations from a history of unchanged runs, in time order.

    Uses the median absolute successive difference (scaled for normal data), so a real
    step somewhere in the history inflates the estimate by at most one difference.
    Returns None with fewer than 3 positive values.
    """
    x = np.log(np.asarray([v for v in run_locations if v > 0], dtype=float))
    if x.size < 3:
        return None
    return float(np.median(np.abs(np.diff(x))) / _MAD_DIFF)


def combine_repetitions(runs: Sequence[Run], *, run_id: str | None = None) -> Run:
    """One run from independent repetitions of the same benchmark (worker processes).

    Each metric's samples are concatenated in order and ``groups`` records where each
    repetition starts, so the decision can see the spread between them. Provenance is the
    first run's; ``config["processes"]`` says how many were combined.
    """
    if not runs:
        raise ValueError("cannot combine an empty list of runs")
    first = runs[0]
    metrics: dict[str, Metric] = {}
    for name, metric in first.metrics.items():
        parts = [r.metrics[name] for r in runs if name in r.metrics]
        metrics[name] = Metric(
            name=name,
            unit=metric.unit,
            direction=metric.direction,
            samples=tuple(s for m in parts for s in m.samples),
            groups=tuple(g for m in parts for g in (m.groups or (len(m.samples),))),
        )
    config = {**first.config, "processes": len(runs)}
    return Run(
        model=first.model,
        suite=first.suite,
        run_id=run_id or first.run_id,
        created_at=first.created_at,
        git=first.git,
        machine=first.machine,
        config=config,
        metrics=metrics,
    )
