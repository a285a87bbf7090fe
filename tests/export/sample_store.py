"""A fixed, realistic store content for the export and HTML-report tests (no randomness).

Four models on machine ``ci-runner-a`` with ten runs each on ``main``, one hour apart; DQN's
training step gets 25 % slower from run 7 on (a regression and a change point), TFT's
inference p99 is over its 50 µs budget, and DQN has one more run on ``laptop-b`` with no
baseline there. Samples follow a sine pattern, so every figure is exact and portable.

Apart from the store, :func:`counts_runs`: three runs of ``--measure counts`` each of DQN and
PPO on their own machine (``counts-`` and a hash, as a counts run's machine is), at the hours
of the last three runs; DQN's training step does 4 % more work (both counts) in the newest.
"""

from __future__ import annotations

import math
from typing import Any

from perfgate.core.codec import run_from_dict
from perfgate.core.policy import Budget, Policy
from perfgate.core.schema import Run
from perfgate.store.base import RunStatus
from perfgate.store.memory import MemoryStore

__all__ = [
    "COUNTS_MACHINE",
    "HOSTILE_METRIC",
    "HOSTILE_MODEL",
    "counts_runs",
    "hostile_runs",
    "sample_policy",
    "sample_runs",
    "sample_store",
]

MACHINE = "ci-runner-a"
LAPTOP = "laptop-b"
COUNTS_MACHINE = "counts-5f2c1a9e7b30"

# median per model: (dbn load ms, features ms, train step ms, inference us, throughput/s, memory MB)
MODELS = {
    "dqn": (0.7, 5.0, 100.0, 45.0, 1000.0, 120.0),
    "ppo": (0.7, 5.0, 150.0, 48.0, 700.0, 160.0),
    "mamba2": (0.7, 5.0, 200.0, 40.0, 500.0, 300.0),
    "tft": (0.7, 5.0, 500.0, 55.0, 200.0, 2000.0),
}
NAMES = (
    "dbn_load_time_ms",
    "feature_extraction_time_ms",
    "training_step_time_ms",
    "inference_latency_us",
    "throughput_samples_per_sec",
    "memory_usage_mb",
)
RUNS = 10
STEP_AT = 7  # DQN's training step is 25 % slower from this run on

# instructions per call of each counted stage, per model; estimated cycles are 1.5 times as many
COUNTED = {
    "dqn": {"dbn_load": 4_100_000, "feature_extraction": 2_600_000, "training_step": 61_000_000},
    "ppo": {"dbn_load": 4_100_000, "feature_extraction": 2_600_000, "training_step": 83_000_000},
}
COUNTS_AT = (7, 8, 9)  # the counts runs come at the hours of these runs
COUNTS_STEP = 1.04  # DQN's training step in the newest counts run

HOSTILE_MODEL = "<script>window.__pwned = 1</script>"
HOSTILE_METRIC = '"><img src=x onerror="window.__pwned=2">_ms'


def _samples(median: float, n: int, phase: int, cv: float = 0.03) -> list[float]:
    return [round(median * (1.0 + cv * math.sin(1.3 * i + phase)), 6) for i in range(n)]


def _stamp(run: int, minute: int = 0) -> str:
    return f"2026-11-29T{8 + run:02d}:{minute:02d}:00Z"


def _doc(model: str, run: int, machine: str, medians: tuple[float, ...], minute: int = 0) -> dict[str, Any]:
    metrics = {}
    for name, median in zip(NAMES, medians, strict=True):
        if model == "dqn" and name == "training_step_time_ms" and run >= STEP_AT:
            median *= 1.25
        n = 400 if name == "inference_latency_us" else 10 if name == "memory_usage_mb" else 40
        metrics[name] = {"samples": _samples(median, n, phase=run)}
    # the machine-speed index: reference kernels a few per cent slower in some hours than others
    slow = 1.0 + 0.05 * math.sin(0.9 * run)
    index = {
        kernel: round(base * slow, 9)
        for kernel, base in (("compute", 3.5e-4), ("interpreter", 3.3e-4), ("memory", 6e-4))
    }
    return {
        "schema_version": 2,
        "machine_index": index,
        "run_id": f"{model}-{machine}-{run:02d}",
        "suite": "pipeline",
        "model": model,
        "created_at": _stamp(run, minute),
        "git": {"commit": f"c0ffee{run:02d}", "branch": "main", "dirty": False},
        "machine": {"fingerprint": machine, "cpu": "Example CPU", "cores": 2},
        "metrics": metrics,
    }


def sample_runs() -> list[Run]:
    runs = [run_from_dict(_doc(m, r, MACHINE, med)) for m, med in MODELS.items() for r in range(RUNS)]
    runs.append(run_from_dict(_doc("dqn", RUNS - 1, LAPTOP, MODELS["dqn"], minute=30)))
    return runs


def sample_policy() -> Policy:
    budgets = []
    for model in MODELS:
        budgets.append(Budget(model=model, metric="dbn_load_time_ms", statistic="median", limit=10.0))
        budgets.append(Budget(model=model, metric="inference_latency_us", statistic="p99", limit=50.0))
    budgets.append(Budget(model="dqn", metric="memory_usage_mb", statistic="max", limit=150.0))
    return Policy(budgets=tuple(budgets))


def sample_store() -> MemoryStore:
    """The sample runs, with DQN's slow runs before the newest flagged by their checks (as the gate does)."""
    store = MemoryStore()
    store.add_runs(sample_runs())
    for r in range(STEP_AT, RUNS - 1):
        store.set_status(f"dqn-{MACHINE}-{r:02d}", RunStatus.FLAGGED, "training_step_time_ms +25.0%")
    return store


def counted_median(model: str, stem: str, unit: str, run: int) -> float:
    """The median of a counts run's metric: ``unit`` is ``instructions`` or ``cycles``."""
    count = COUNTED[model][stem] * (COUNTS_STEP if (model, stem, run) == ("dqn", "training_step", RUNS - 1) else 1)
    return float(round(count * (1.5 if unit == "cycles" else 1.0)))


def counts_runs() -> list[Run]:
    """Runs of ``--measure counts``: two processes of five calls per stage, 100 apart (the median is exact)."""
    runs = []
    for model, stages in COUNTED.items():
        for run in COUNTS_AT:
            metrics = {}
            for stem in stages:
                for suffix, unit in (("instructions", "instructions"), ("est_cycles", "cycles")):
                    median = counted_median(model, stem, unit, run)
                    metrics[f"{stem}_{suffix}"] = {
                        "unit": unit,
                        "direction": "lower_is_better",
                        "samples": [median - 100] * 5 + [median + 100] * 5,
                        "groups": [5, 5],
                    }
            doc = {
                "schema_version": 4,
                "measure": "counts",
                "run_id": f"{model}-{COUNTS_MACHINE}-{run:02d}",
                "suite": "pipeline",
                "model": model,
                "created_at": _stamp(run),
                "git": {"commit": f"c0ffee{run:02d}", "branch": "main", "dirty": False},
                "machine": {"fingerprint": COUNTS_MACHINE, "arch": "x86_64"},
                "metrics": metrics,
            }
            runs.append(run_from_dict(doc))
    return runs


def hostile_runs() -> list[Run]:
    """Runs whose model and metric names try to inject markup into a report."""
    runs = []
    for r in range(6):
        doc = _doc("dqn", r, MACHINE, MODELS["dqn"])
        doc["model"] = HOSTILE_MODEL
        doc["run_id"] = f"hostile-{r:02d}"
        doc["metrics"][HOSTILE_METRIC] = {
            "unit": "ms",
            "direction": "lower_is_better",
            "samples": _samples(3.0 if r < 5 else 4.0, 40, phase=r),
        }
        runs.append(run_from_dict(doc))
    return runs
