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

When neither is there, the decision assumes a conservative default for this kind of
machine (:data:`ASSUMED_RAW`, :data:`ASSUMED_NORMALISED`), which the report names. The
spread between *consecutive* worker processes of one run is never taken as the run-to-run
noise: they share the machine's phase, so it understates the spread between runs several
fold; it only raises the per-process part of the assumption when it is larger.

The model of one side's location (log of its median, or of a tail quantile) is two terms:

* a **phase** term, shared by everything one run measured (the machine's speed that
  minute); it averages out only over runs spread in time (``R``: a baseline pooled from
  the history);
* a **process** term, each worker process's own offset (memory layout, cache placement);
  it averages out over the run's worker processes (``G``).

Var(side) = phase² / R + process² / G. Dividing each call by a reference kernel of the
stage's kind timed with it (the machine-speed index, :func:`normalised`) removes most of
the phase term, which is why the index lets a stored comparison see further.

That correction is only as good as the stage's time follows its kernel, and it does so
roughly: between two days on which the kernels ran 1.2× to 2.2× faster, this machine's
stages sped up 0.7 to 2.3 times as much as their kernels did (in log terms). So a normalised
comparison also carries a term proportional to how far the kernel moved between the two
runs (:func:`index_shift`, scaled by :data:`INDEX_SHIFT`): nothing when the machine ran at
the same speed, and across a large change of speed, a good part of the change itself.

Tested in ``tests/core/test_noise.py`` (hand values, seeded recovery of a known sigma,
seeded A/A simulations with phase-correlated processes).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from perfgate.core.metrics import Direction
from perfgate.core.schema import Metric, Reference, Run

_Key = TypeVar("_Key", bound=Hashable)

__all__ = [
    "ASSUMED_MEMORY",
    "ASSUMED_NORMALISED",
    "ASSUMED_RAW",
    "CALIBRATED_TAIL_DF",
    "INDEX_SHIFT",
    "MIN_CONTROL",
    "TAIL_FACTOR",
    "BetweenGroups",
    "NoiseModel",
    "between_groups",
    "calibrate_sigma",
    "combine_repetitions",
    "common_kernel",
    "concat_references",
    "group_locations",
    "independent_runs",
    "index_shift",
    "median_index",
    "normalised",
    "residual_sigmas",
    "residuals_of",
    "run_shifts",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class NoiseModel:
    """Run-to-run standard deviations of a log location: the phase and the process terms.

    ``tail_df``: the degrees of freedom of the Student t that the run-to-run term of a
    comparison (the difference of two runs' phases, or a calibrated run-to-run noise) follows,
    its middle matching the robust SD (:mod:`perfgate.core.decision._tail`); None: a normal."""

    phase: float
    process: float
    tail_df: float | None = None

    def variance(self, runs: int, processes: int) -> float:
        """Variance of one side's log location measured over ``runs`` runs and ``processes`` processes."""
        return self.phase**2 / max(runs, 1) + self.process**2 / max(processes, 1)

    def sigma(self, runs: int = 1, processes: int = 1) -> float:
        return math.sqrt(self.variance(runs, processes))


# Conservative defaults for a shared 2-core cloud VM, measured with benchmarks/accuracy.py
# (docs/noise.md): raw times of identical code in runs minutes apart, and the same times
# divided by their reference kernel. A user on quieter hardware lowers them under
# [tool.perfgate.assumed_noise], or replaces them with `perfgate calibrate`.
ASSUMED_RAW = NoiseModel(phase=0.12, process=0.08, tail_df=3.0)
ASSUMED_NORMALISED = NoiseModel(phase=0.03, process=0.06, tail_df=8.0)
# the t tail of a run-to-run SD learned by `perfgate calibrate` (a robust SD of quiet runs, so
# relative to it the tail is heavier than relative to the assumed SDs above): raw times,
# normalised times (docs/noise.md §4)
CALIBRATED_TAIL_DF = {"raw": 2.0, "normalised": 8.0}
# memory does not follow the machine's speed; what varies is the process (pages, allocator)
ASSUMED_MEMORY = NoiseModel(phase=0.0, process=0.03)
# a tail quantile moves more from run to run than the median
TAIL_FACTOR = {"p95": 1.5, "p99": 2.0}
# the SD of a normalised comparison's error per unit of the reference kernel's log change
# between the runs. A stage's log time moves with its kernel's by a factor (its elasticity):
# 0.72, 1.43, 1.33 and 2.03 for DBN load, features, inference and the training step between two days here
# (docs/noise.md §4), while within a day normalising removes half or more of the raw spread
# (elasticity within about 0.5 of 1). 0.5 keeps most of the index's power within a day and
# makes a comparison across a doubling of the machine's speed inconclusive rather than wrong.
INDEX_SHIFT = 0.5


def normalised(metric: Metric) -> Metric | None:
    """The metric in units of its reference kernel: each time divided by the reference timed
    with it (a rate multiplied by it); None when the metric has no reference."""
    ref = metric.reference
    if ref is None:
        return None
    if metric.direction is Direction.HIGHER:
        values = tuple(v * r for v, r in zip(metric.samples, ref.seconds, strict=True))
    else:
        values = tuple(v / r for v, r in zip(metric.samples, ref.seconds, strict=True))
    return Metric(name=metric.name, unit=metric.unit, direction=metric.direction, samples=values, groups=metric.groups)


def index_shift(baseline: Metric, current: Metric) -> float | None:
    """The log change of the reference kernel between two runs of a metric: log of the median
    kernel time of the current run over the baseline's; None unless both have a reference."""
    if baseline.reference is None or current.reference is None:
        return None
    before, after = float(np.median(baseline.reference.seconds)), float(np.median(current.reference.seconds))
    if before <= 0 or after <= 0:
        return None
    return math.log(after / before)


def common_kernel(baseline: Metric, current: Metric) -> str | None:
    """The reference kernel both sides were measured with, if they share one."""
    if baseline.reference is None or current.reference is None:
        return None
    if baseline.reference.kernel != current.reference.kernel:
        return None
    return baseline.reference.kernel


def independent_runs(run: Run) -> int:
    """How many runs spread out in time a run's groups are: a baseline pooled from the history
    has one group per pooled run (``config["pooled_run_ids"]``); any other run is one."""
    pooled = run.config.get("pooled_run_ids")
    if isinstance(pooled, list | tuple) and len(pooled) > 1:
        return len(pooled)
    return 1


# fewer timing medians on one clock than this make no control of a run (perfgate.core.decision._shared_phase)
MIN_CONTROL = 4


def run_shifts(medians: np.ndarray) -> np.ndarray:
    """Each run's (row's) common shift: the median over its metrics (columns) of their log
    locations, each centred on its own median over the runs."""
    centred = medians - np.median(medians, axis=0)
    shifts: np.ndarray = np.median(centred, axis=1)
    return shifts


def residual_sigmas(locations: np.ndarray, shifts: np.ndarray | None = None) -> np.ndarray:
    """Per metric (column), the SD over runs (rows) of its log location once each run's own
    shift is removed (:func:`run_shifts` of ``locations`` unless given, from the runs' medians);
    NaN with fewer than 3 runs."""
    if locations.shape[0] < 3 or (shifts is None and locations.shape[1] < 2):
        return np.full(locations.shape[1], np.nan)
    if shifts is None:
        shifts = run_shifts(locations)
    residual = locations - np.median(locations, axis=0) - shifts[:, None]
    sd: np.ndarray = residual.std(axis=0, ddof=1)
    return sd


def residuals_of(columns: Mapping[_Key, np.ndarray], medians: Collection[_Key]) -> dict[_Key, float]:
    """Each column's residual SD (:func:`residual_sigmas`), every run's shift taken from the
    ``medians`` columns; empty with fewer than :data:`MIN_CONTROL` of them. The one estimate the
    store's pooled baseline (:mod:`perfgate.core.decision._shared_phase`) and ``perfgate calibrate`` share."""
    shared = [columns[k] for k in medians if k in columns]
    if len(shared) < MIN_CONTROL:
        return {}
    keys = list(columns)
    sd = residual_sigmas(np.column_stack([columns[k] for k in keys]), run_shifts(np.column_stack(shared)))
    return {k: float(v) for k, v in zip(keys, sd, strict=True) if np.isfinite(v)}


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


def between_groups(baseline: Metric | None, current: Metric | None, q: float = 0.5) -> BetweenGroups | None:
    """Pooled SD of log group locations around each side's mean; a side may be left out (None).

    None when no side has a spare group (fewer than 2 groups on each given side).
    """
    a = group_locations(baseline, q) if baseline is not None else np.empty(0)
    b = group_locations(current, q) if current is not None else np.empty(0)
    df = (len(a) - 1 if len(a) > 1 else 0) + (len(b) - 1 if len(b) > 1 else 0)
    if df < 1:
        return None
    ss = (float(np.sum((a - a.mean()) ** 2)) if len(a) > 1 else 0.0) + (
        float(np.sum((b - b.mean()) ** 2)) if len(b) > 1 else 0.0
    )
    return BetweenGroups(sigma=math.sqrt(ss / df), df=df, groups_baseline=len(a), groups_current=len(b))


def calibrate_sigma(run_locations: Sequence[float], breaks: Sequence[int] = ()) -> float | None:
    """Between-run SD of log locations from a history of runs, in time order.

    Uses the median absolute successive difference (scaled for normal data), so a real
    step somewhere in the history inflates the estimate by at most one difference.
    ``breaks`` are the indices where a new segment starts (the history's change points:
    a change of the code, or of the machine): the differences across them are left out, so
    the estimate is the noise *within* the segments of unchanged code. Returns None with
    fewer than 2 differences within segments (3 positive values in one segment).
    """
    values = np.asarray(run_locations, dtype=float)
    keep = values > 0
    x = np.log(values[keep])
    if x.size < 3:
        return None
    segment = np.cumsum(np.isin(np.arange(values.size), np.asarray(breaks, dtype=int)))[keep]
    diffs = np.diff(x)[np.diff(segment) == 0]
    if diffs.size < 2:
        return None
    return float(np.median(np.abs(diffs)) / _MAD_DIFF)


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
            reference=concat_references(parts),
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
        machine_index=median_index(runs),
        software=first.software,
    )


def concat_references(parts: Sequence[Metric]) -> Reference | None:
    """The references of metrics whose samples are concatenated: kept only when every part has
    one, of the same kernel."""
    refs = [m.reference for m in parts]
    if not refs or any(r is None for r in refs) or len({r.kernel for r in refs if r is not None}) != 1:
        return None
    kernel = refs[0].kernel if refs[0] is not None else ""
    return Reference(kernel=kernel, seconds=tuple(s for r in refs if r is not None for s in r.seconds))


def median_index(runs: Sequence[Run]) -> dict[str, float]:
    """The machine-speed index of runs taken together: each kernel's median over the runs that have it."""
    kinds: dict[str, list[float]] = {}
    for run in runs:
        for kind, seconds in run.machine_index.items():
            kinds.setdefault(kind, []).append(seconds)
    return {kind: float(np.median(values)) for kind, values in kinds.items()}
