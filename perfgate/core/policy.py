"""What a check decides with: thresholds, the family-wise alpha and budgets.

Built from the configuration by the shell; validated here so that a bad value is caught
before any comparison runs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from perfgate.core.metrics import MetricCatalogue, MetricInfo
from perfgate.core.noise import ASSUMED_MEMORY, ASSUMED_NORMALISED, ASSUMED_RAW, INDEX_SHIFT, NoiseModel
from perfgate.core.schema import normalize_model

__all__ = [
    "BUDGET_STATISTICS",
    "MIN_LEARNED_RUNS",
    "MISSING_METRIC_RULES",
    "Budget",
    "Policy",
    "noise_key",
    "residual_key",
]

BUDGET_STATISTICS = ("median", "mean", "p50", "p95", "p99", "max", "min")
# what a gated metric missing from the current run does: fail the check (exit 1), or make it
# refuse to decide (exit 2)
MISSING_METRIC_RULES = ("fail", "refuse")
# a run-to-run SD learned from fewer recorded runs than this is not used by a check: with five
# runs (four differences) a p99's SD came out at 0.6 % and A/A checks claimed a change in 5 of 7
# (benchmarks/accuracy.py history); with ten or more they did not
MIN_LEARNED_RUNS = 10


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """An absolute limit on one statistic of one metric of one model.

    The comparison follows the metric's direction: a lower-is-better metric must stay at or
    below ``limit``, a higher-is-better one at or above it. On a derived rate (a throughput:
    the batch over the time of the same calls), ``min`` and ``mean`` are the run's overall
    rate, total items over total time, not the slowest single call
    (:mod:`perfgate.core.decision._budgets`).
    """

    model: str
    metric: str
    statistic: str
    limit: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "model", normalize_model(self.model))  # "DQN" budgets apply to dqn runs
        if self.statistic not in BUDGET_STATISTICS:
            raise ValueError(
                f"budget {self.model}.{self.metric}: statistic must be one of {', '.join(BUDGET_STATISTICS)}, "
                f"got {self.statistic!r}"
            )
        if isinstance(self.limit, bool) or not isinstance(self.limit, int | float) or not math.isfinite(self.limit):
            raise ValueError(f"budget {self.model}.{self.metric}.{self.statistic}: limit must be a finite number")


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """The decision parameters of one check.

    Attributes:
        threshold_pct: the global threshold, in percent of the baseline.
        alpha: the family-wise error rate over all comparisons of one check.
        thresholds_pct: per-metric thresholds in percent, overriding the global one.
        budgets: absolute limits; only those of the checked model apply.
        metric_info: definitions of metrics outside the built-in table.
        catalogue: what the check knows of each metric: ``metric_info`` over the declared suites
            (:class:`~perfgate.core.metrics.MetricCatalogue`), made once with the policy; the decision,
            the budgets and a run file's decoding read a metric's unit, direction and statistics there.
        confidence: level of the confidence intervals shown in reports.
        power: the power the "samples that would decide" figure is computed for.
        noise: this machine's run-to-run SD of each metric's log location, from
            ``perfgate calibrate``; keyed ``metric`` (median) or ``metric:p95``, with
            ``@normalised`` appended for the values in units of their reference kernel.
        noise_runs: how many recorded runs of this machine ``noise`` was learned from, which
            the reports name (0: not known). Noise learned from fewer than
            :data:`MIN_LEARNED_RUNS` runs is not used: an SD from a handful of differences is
            itself too uncertain to be taken as known.
        assumed_raw, assumed_normalised, assumed_memory: the run-to-run noise assumed when
            nothing was measured (:mod:`perfgate.core.noise`), for raw times, for times in
            units of their reference kernel, and for memory.
        index_shift: how far a normalised comparison may be off per unit of the reference
            kernel's log change between the two runs (an SD; 0.5: half as far as the kernel moved).
            0 trusts the normalisation whatever the change of the machine's speed.
        missing_metric: what a gated metric (in the baseline, or under a budget) that the
            current run lacks does: ``"fail"`` the check (exit 1) or ``"refuse"`` to decide
            (exit 2).
        memory_floor_mb: the smallest change of a memory metric (unit ``MB``) that may count
            as a regression; a few pages of allocator noise on a stage that holds almost nothing
            is a large relative change and no finding.
    """

    threshold_pct: float = 10.0
    alpha: float = 0.01
    thresholds_pct: Mapping[str, float] = field(default_factory=dict)
    budgets: tuple[Budget, ...] = ()
    metric_info: Mapping[str, MetricInfo] = field(default_factory=dict)
    confidence: float = 0.95
    power: float = 0.8
    noise: Mapping[str, float] = field(default_factory=dict)
    noise_runs: int = 0  # how many recorded runs ``noise`` was learned from (0: not said)
    assumed_raw: NoiseModel = ASSUMED_RAW
    assumed_normalised: NoiseModel = ASSUMED_NORMALISED
    assumed_memory: NoiseModel = ASSUMED_MEMORY
    index_shift: float = INDEX_SHIFT
    missing_metric: str = "fail"
    memory_floor_mb: float = 1.0
    catalogue: MetricCatalogue = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if (
            isinstance(self.memory_floor_mb, bool)
            or not math.isfinite(self.memory_floor_mb)
            or self.memory_floor_mb < 0
        ):
            raise ValueError(f"memory_floor_mb must be a finite number of MB ≥ 0, got {self.memory_floor_mb!r}")
        if isinstance(self.index_shift, bool) or not math.isfinite(self.index_shift) or self.index_shift < 0:
            raise ValueError(f"index_shift must be a finite number ≥ 0, got {self.index_shift!r}")
        if self.missing_metric not in MISSING_METRIC_RULES:
            raise ValueError(
                f"missing_metric must be one of {', '.join(repr(r) for r in MISSING_METRIC_RULES)}, "
                f"got {self.missing_metric!r}"
            )
        _check_threshold("threshold", self.threshold_pct)
        for name, value in self.thresholds_pct.items():
            _check_threshold(f"thresholds.{name}", value)
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must be between 0 and 1 (exclusive), got {self.alpha!r}")
        if not 0.5 <= self.confidence < 1.0:
            raise ValueError(f"confidence must be in [0.5, 1), got {self.confidence!r}")
        if not 0.5 <= self.power < 1.0:
            raise ValueError(f"power must be in [0.5, 1), got {self.power!r}")
        object.__setattr__(self, "thresholds_pct", MappingProxyType(dict(self.thresholds_pct)))
        object.__setattr__(self, "metric_info", MappingProxyType(dict(self.metric_info)))
        object.__setattr__(self, "catalogue", MetricCatalogue(self.metric_info))
        for key, sigma in self.noise.items():
            if isinstance(sigma, bool) or not isinstance(sigma, int | float) or not math.isfinite(sigma) or sigma < 0:
                raise ValueError(f"noise.{key} must be a non-negative number, got {sigma!r}")
        object.__setattr__(self, "noise", MappingProxyType(dict(self.noise)))
        if isinstance(self.noise_runs, bool) or not isinstance(self.noise_runs, int) or self.noise_runs < 0:
            raise ValueError(f"noise_runs must be a whole number ≥ 0, got {self.noise_runs!r}")
        for name, model in (
            ("assumed_raw", self.assumed_raw),
            ("assumed_normalised", self.assumed_normalised),
            ("assumed_memory", self.assumed_memory),
        ):
            for part in (model.phase, model.process):
                if not math.isfinite(part) or part < 0:
                    raise ValueError(f"{name}: noise must be non-negative, got {part!r}")

    def threshold_for(self, metric: str) -> float:
        """The threshold of ``metric`` as a fraction (10 % -> 0.10)."""
        return self.thresholds_pct.get(metric, self.threshold_pct) / 100.0

    @property
    def noise_too_young(self) -> bool:
        """The calibration was learned from fewer recorded runs than :data:`MIN_LEARNED_RUNS`."""
        return 0 < self.noise_runs < MIN_LEARNED_RUNS

    def noise_for(self, metric: str, statistic: str, *, normalised: bool = False) -> float | None:
        """The calibrated run-to-run SD for a metric's statistic (raw or normalised), if there is
        one learned from enough runs (a count of 0, not said, is taken as enough)."""
        if self.noise_too_young:
            return None
        return self.noise.get(noise_key(metric, statistic, normalised=normalised))

    @classmethod
    def quiet(cls, **kwargs: object) -> Policy:
        """A policy for a machine without run-to-run noise (no phase, no process offsets): the
        within-run test alone. Right for simulated independent samples, wrong for real runs."""
        zero = NoiseModel(phase=0.0, process=0.0)
        kwargs.setdefault("index_shift", 0.0)
        return cls(assumed_raw=zero, assumed_normalised=zero, assumed_memory=zero, **kwargs)  # type: ignore[arg-type]

    def budgets_for(self, model_key: str) -> tuple[Budget, ...]:
        return tuple(b for b in self.budgets if b.model == model_key)


def noise_key(metric: str, statistic: str, *, normalised: bool = False) -> str:
    """The calibration file's key for a statistic of a metric: ``metric``, ``metric:p99``,
    ``metric@normalised``, ``metric:p99@normalised``."""
    key = metric if statistic in ("median", "p50") else f"{metric}:{statistic}"
    return f"{key}@normalised" if normalised else key


def residual_key(metric: str, statistic: str, *, normalised: bool = False) -> str:
    """The calibration file's key for a statistic's residual noise: what it moves from run to run
    once each run's common shift is taken out (``metric@residual``, ``metric:p99@residual``,
    ``metric@normalised@residual`` in units of its reference kernel)."""
    return f"{noise_key(metric, statistic, normalised=normalised)}@residual"


def _check_threshold(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a non-negative percentage, got {value!r}")
