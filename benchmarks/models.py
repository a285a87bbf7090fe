"""Benchmark: the four models against their serving and training targets on this machine.

For each model this runs the same stages as ``perfgate bench --model M`` (synthetic bars,
the default configs, the same runner) and prints single-sample inference p50/p95/p99 of
the fast path next to torch eager (and the ratio), the training step's median and the
training stage's memory, each against its target:

============  ===================  ======================  ==================
model         inference p99        training step median    training memory
============  ===================  ======================  ==================
DQN           ≤ 10 µs              ≤ 20 ms (minibatch)     50–150 MB
PPO           ≤ 20 µs              ≤ 20 ms (minibatch)     50–200 MB
Mamba-2       ≤ 40 µs (step)       ≤ 200 ms                150–500 MB
TFT           ≤ 55 µs (streaming)  ≤ 500 ms                1.5–2.5 GB
============  ===================  ======================  ==================

DQN and PPO are also served through ONNX Runtime (an export with a bound input), timed
the same way (10,000 calls after 2,000 of warm-up, one timer per call), for comparison.
Memory is the training stage's own peak: what its set-up kept (model, optimiser, replay
or rollout buffers) plus the peak of a round of steps above the RSS before them.

    .venv/bin/python benchmarks/models.py [--model dqn ppo mamba2 tft] [--quick] [--threads N]
"""

from __future__ import annotations

import argparse
import gc
import time
from typing import Any

import numpy as np

from perfgate.bench.registry import StageContext
from perfgate.bench.runner import BenchOptions, run_benchmark
from perfgate.core.schema import GitInfo

__all__ = ["TARGETS", "main"]

# model: (inference p99 µs, training step median ms, training memory MB low, high)
TARGETS: dict[str, tuple[float, float, float, float]] = {
    "dqn": (10.0, 20.0, 50.0, 150.0),
    "ppo": (20.0, 20.0, 50.0, 200.0),
    "mamba2": (40.0, 200.0, 150.0, 500.0),
    "tft": (55.0, 500.0, 1536.0, 2560.0),
}


def _q(samples: tuple[float, ...] | list[float], q: float) -> float:
    return float(np.quantile(np.asarray(samples), q))


def _ort_latency(ctx: StageContext, calls: int = 10_000, warmup: int = 2_000) -> list[float] | None:
    """Per-call latency (µs) of the ONNX Runtime server of the run's trained DQN/PPO, or None."""
    try:
        from perfgate_pipeline.serve import OrtServer
    except ImportError:
        return None
    try:
        server = OrtServer(ctx.state["task"].model)
    except ImportError:  # onnxruntime or onnx not installed
        return None
    rows = np.ascontiguousarray(ctx.state["ort_inputs"])
    for i in range(warmup):
        server(rows[i % len(rows)])
    out = np.empty(calls)
    gc.collect()
    gc.disable()
    try:
        for i in range(calls):
            row = rows[i % len(rows)]
            start = time.perf_counter_ns()
            server(row)
            out[i] = (time.perf_counter_ns() - start) / 1e3
    finally:
        gc.enable()
    return out.tolist()


def _measure(model: str, quick: bool, threads: int) -> tuple[Any, list[float] | None]:
    import perfgate_pipeline.stages as stages

    extra: dict[str, Any] = {}
    if quick:
        extra = {"rounds": 2, "warmup_time": 0.02, "round_time": 0.05, "min_repeat": 2, "samples_cap": 1000}
    options = BenchOptions(model=model, params={"threads": threads}, **extra)
    kept: dict[str, Any] = {}

    def finish(ctx: StageContext) -> None:
        if model in ("dqn", "ppo"):
            ctx.state["ort_inputs"] = stages.inference_inputs(ctx)
            kept["ort"] = _ort_latency(ctx, calls=1_000 if quick else 10_000, warmup=200 if quick else 2_000)

    run = run_benchmark(
        options,
        run_id=f"models-{model}",
        created_at="1970-01-01T00:00:00Z",
        git=GitInfo(),
        machine={},
        on_finish=finish,
    )
    return run, kept.get("ort")


def _verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", nargs="+", default=list(TARGETS), choices=list(TARGETS))
    parser.add_argument("--quick", action="store_true", help="fewer calls: a smoke run, not a measurement")
    parser.add_argument("--threads", type=int, default=1, help="torch threads for training (default 1)")
    args = parser.parse_args(argv)
    print(f"{'model':<8} {'path':<13} {'p50 µs':>9} {'p95 µs':>9} {'p99 µs':>9} {'n':>6}  vs fast")
    summary = []
    for model in args.model:
        run, ort = _measure(model, args.quick, args.threads)
        m = run.metrics
        fast, eager = m["inference_latency_us"].samples, m["inference_latency_torch_us"].samples
        rows = [("fast (numba)", fast), *([("onnxruntime", ort)] if ort else []), ("torch eager", eager)]
        for name, s in rows:
            ratio = _q(s, 0.5) / _q(fast, 0.5)
            print(
                f"{model:<8} {name:<13} {_q(s, 0.5):9.1f} {_q(s, 0.95):9.1f} {_q(s, 0.99):9.1f} {len(s):6d}  "
                f"{ratio:5.1f}x"
            )
        p99_target, step_target, low, high = TARGETS[model]
        step = _q(m["training_step_time_ms"].samples, 0.5)
        memory = _q(m["training_memory_mb"].samples, 0.5)
        p99 = _q(fast, 0.99)
        summary.append(
            f"{model:<8} inference p99 {p99:7.1f} µs (≤ {p99_target:g}: {_verdict(p99 <= p99_target)}); "
            f"training step {step:8.1f} ms (≤ {step_target:g}: {_verdict(step <= step_target)}); "
            f"training memory {memory:7.0f} MB ({low:g}–{high:g}: {_verdict(low <= memory <= high)})"
        )
    print()
    print("\n".join(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
