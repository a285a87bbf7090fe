"""The reference pipeline's declaration (``perfgate.suites`` entry point ``pipeline``).

What perfgate knows about this suite before, and without, importing its stages: the metrics
of the original specification and the pipeline's own, their units, directions and gated
statistics; the models; the dashboard's panels with the original specification's targets
(DBN load under 10 ms, inference under 50 µs); and how many rounds ``perfgate bench`` runs.
It imports no torch.
"""

from __future__ import annotations

from perfgate.core.metrics import DashboardPanel, Direction, MetricInfo, RunnerMetrics, SuiteDeclaration
from perfgate_pipeline.models import MODELS

__all__ = ["DBN_LOAD_TARGET_MS", "INFERENCE_TARGET_US", "METRICS", "PANELS", "SUITE"]

DBN_LOAD_TARGET_MS = 10.0  # the original specification's "<10ms" DBN load target
INFERENCE_TARGET_US = 50.0  # the original specification's "<50μs" inference target (HFT requirement)

_TAILS = ("p50", "p95", "p99")

METRICS: dict[str, MetricInfo] = {
    "dbn_load_time_ms": MetricInfo(unit="ms", direction=Direction.LOWER, label="DBN data loading time"),
    "feature_extraction_time_ms": MetricInfo(unit="ms", direction=Direction.LOWER, label="Feature extraction time"),
    "training_step_time_ms": MetricInfo(unit="ms", direction=Direction.LOWER, label="Training step time"),
    "inference_latency_us": MetricInfo(
        unit="us", direction=Direction.LOWER, label="Inference latency", statistics=_TAILS
    ),
    "inference_latency_torch_us": MetricInfo(
        unit="us", direction=Direction.LOWER, label="Inference latency (torch eager)", statistics=_TAILS
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

_STAGES = "Pipeline stages"
_RESOURCES = "Resources and throughput"

PANELS = (
    DashboardPanel(
        metric="dbn_load_time_ms",
        title="DBN load time",
        description="Median time to load and validate one DBN file, one point per run; dashed: the 10 ms target.",
        budgets=True,
        target=DBN_LOAD_TARGET_MS,
        row=_STAGES,
    ),
    DashboardPanel(
        metric="inference_latency_us",
        title="Inference latency (p50 / p95 / p99)",
        description="Single-sample prediction latency per model, one point per run; the dashed line is the 50 µs "
        "target.",
        per_statistic=True,
        budgets=True,
        target=INFERENCE_TARGET_US,
        row=_STAGES,
    ),
    DashboardPanel(
        metric="training_step_time_ms",
        title="Training step time by model",
        description="Median time of one optimiser step (forward, backward, update), newest run of each model.",
        style="bars",
        row=_STAGES,
    ),
    DashboardPanel(
        metric="feature_extraction_time_ms",
        title="Feature extraction time",
        description="Median time of the 16 technical-indicator features over the loaded bars, one point per run.",
        row=_STAGES,
    ),
    DashboardPanel(
        metric="memory_usage_mb",
        title="Peak memory by model",
        description="memory_usage_mb, one point per run: the pipeline's peak resident memory (what its stages hold "
        "plus their peak above that), the figure of the README's tables; budgets as series where configured.",
        budgets=True,
        row=_RESOURCES,
    ),
    DashboardPanel(
        metric="throughput_samples_per_sec",
        title="Throughput",
        description="Median training samples processed per second, one point per run (higher is better).",
        row=_RESOURCES,
    ),
)

SUITE = SuiteDeclaration(
    name="pipeline",
    stages_module="perfgate_pipeline.stages",
    models=MODELS,  # the registry's live names: a model registered later is measured too
    metrics=METRICS,
    panels=PANELS,
    default=True,
    # More, shorter rounds: on a shared machine a burst of another tenant's work can slow one
    # round several-fold; spread over 5 rounds it reaches a fifth of the samples, not a third,
    # and a single-sample p99 follows it less (one such round moved a p99 +366 %).
    rounds=5,
    min_repeat=2,
    requires=("torch", "databento_dbn", "zstandard", "numba", "onnx", "onnxruntime"),
    install="pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu (the CPU build), then "
    "pip install 'perfgate[pipeline]'; a suite of your own needs neither (--suite NAME --stages-module MODULE)",
    # the original specification's names for the runner's peak memory and GPU utilisation
    runner_metrics=RunnerMetrics(
        peak_memory="memory_usage_mb",
        round_memory="round_memory_mb",
        gpu_memory="gpu_memory_mb",
        gpu_utilization="gpu_utilization_pct",
    ),
    dashboard_title="perfgate: ML pipeline performance",
)
