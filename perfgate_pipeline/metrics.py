"""The original specification's ``PerformanceMetrics``: the pipeline's six numbers for one run.

A training script that measured the six figures itself hands them to perfgate as a run::

    from perfgate import PerformanceTracker
    from perfgate_pipeline.metrics import PerformanceMetrics

    tracker = PerformanceTracker("dqn")
    tracker.record_metrics(PerformanceMetrics(dbn_load_time_ms=0.7, ..., model_type="DQN"))

Units and directions come from the pipeline's own declaration (:data:`perfgate_pipeline.suite.METRICS`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from perfgate.core.codec import format_timestamp
from perfgate.core.schema import GitInfo, Metric, Run
from perfgate_pipeline.suite import METRICS

__all__ = ["PerformanceMetrics"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PerformanceMetrics:
    """The original specification's six numbers for one run; :meth:`to_run` makes a one-sample-per-metric run."""

    dbn_load_time_ms: float
    feature_extraction_time_ms: float
    training_step_time_ms: float
    inference_latency_us: float
    throughput_samples_per_sec: float
    memory_usage_mb: float
    model_type: str
    git_commit: str | None = None
    timestamp: datetime | None = None

    def to_run(self) -> Run:
        """The six numbers as a run of one sample per metric, in the units the pipeline declares."""
        metrics = {}
        for name, info in METRICS.items():
            if hasattr(self, name):
                metrics[name] = Metric(
                    name=name, unit=info.unit, direction=info.direction, samples=(float(getattr(self, name)),)
                )
        created = format_timestamp(self.timestamp or datetime.now(UTC))
        return Run(
            model=self.model_type,
            metrics=metrics,
            created_at=created,
            git=GitInfo(commit=self.git_commit),
            run_id=uuid.uuid4().hex,
        )
