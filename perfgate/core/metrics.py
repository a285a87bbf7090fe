"""The built-in metric table: canonical names of the pipeline suite.

A run file may omit ``unit`` and ``direction`` for these names; for any other name both
must be given (in the file or in the configuration).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["BUILTIN_METRICS", "Direction", "MetricInfo", "describe"]


class Direction(StrEnum):
    """Which way is better. ``informational`` metrics are reported but never gate."""

    LOWER = "lower_is_better"
    HIGHER = "higher_is_better"
    INFO = "informational"


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricInfo:
    """What perfgate knows about a metric name."""

    unit: str
    direction: Direction
    label: str  # noun phrase for report sentences ("DBN data loading time")
    statistics: tuple[str, ...] = ("median",)  # the location statistics that gate


BUILTIN_METRICS: dict[str, MetricInfo] = {
    "dbn_load_time_ms": MetricInfo(unit="ms", direction=Direction.LOWER, label="DBN data loading time"),
    "feature_extraction_time_ms": MetricInfo(unit="ms", direction=Direction.LOWER, label="Feature extraction time"),
    "training_step_time_ms": MetricInfo(unit="ms", direction=Direction.LOWER, label="Training step time"),
    "inference_latency_us": MetricInfo(
        unit="us", direction=Direction.LOWER, label="Inference latency", statistics=("p50", "p95", "p99")
    ),
    "inference_latency_torch_us": MetricInfo(
        unit="us",
        direction=Direction.LOWER,
        label="Inference latency (torch eager)",
        statistics=("p50", "p95", "p99"),
    ),
    "training_memory_mb": MetricInfo(unit="MB", direction=Direction.LOWER, label="Training memory (stage peak)"),
    "throughput_samples_per_sec": MetricInfo(unit="samples/s", direction=Direction.HIGHER, label="Throughput"),
    "memory_usage_mb": MetricInfo(unit="MB", direction=Direction.LOWER, label="Memory usage"),
    "round_memory_mb": MetricInfo(
        unit="MB", direction=Direction.INFO, label="Round memory (peak above the round's start)"
    ),
    "gpu_utilization_pct": MetricInfo(unit="%", direction=Direction.INFO, label="GPU utilisation"),
    "gpu_memory_mb": MetricInfo(unit="MB", direction=Direction.LOWER, label="GPU memory (peak allocated)"),
}


def describe(name: str) -> str:
    """A readable label for a metric name: the built-in one, or the name itself."""
    info = BUILTIN_METRICS.get(name)
    return info.label if info else name
