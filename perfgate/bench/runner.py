"""The benchmark runner: set-up and warm-up, then rounds of timed calls of every stage.

Per model the runner does, in order:

1. for each stage (registration order): its set-up, then warm-up calls (which also leave
   the stage's outputs in ``ctx.state`` for the stages after it); without a fixed count,
   warm-up runs for :attr:`BenchOptions.warmup_time` seconds (at least one call);
2. ``rounds`` rounds; in each, every stage is called ``repeat`` times, each call timed on
   its own with ``perf_counter_ns`` (and a CUDA synchronise on both sides when the stage
   runs on a GPU); without a fixed count, ``repeat`` is chosen from the warm-up speed so a
   round of the stage lasts about :attr:`BenchOptions.round_time` seconds;
3. peak memory: per round, the pipeline's peak resident memory: the highest RSS of
   the stages' set-ups and that round, above the RSS the process had after its imports and
   before the first set-up (freed heap released) — so what the stages hold (models,
   optimisers, buffers, data) counts, see :class:`perfgate.bench.memory.PipelineMemory`;
   round memory (informational) is the round's peak above the RSS at its own start:
   what the calls allocate on top of what the set-ups hold; on a CUDA device also the peak
   GPU memory and the GPU's utilisation. The suite's declaration names these figures
   (:class:`perfgate.core.metrics.RunnerMetrics`: the reference pipeline's ``memory_usage_mb``,
   ``round_memory_mb``, ``gpu_memory_mb``, ``gpu_utilization_pct``); a suite that declares
   none gets the generic names (``peak_memory_mb`` and the same other three);
4. for a stage with a ``memory_metric``, per round, its own peak: the resident memory its
   set-up and warm-up kept (RSS after minus before them, freed heap released both times)
   plus the peak of its calls in the round above the RSS just before them (high-water
   mark reset there, freed heap released first, so memory an earlier call freed is not
   counted as already there). For a training stage that is model, optimiser, buffers and
   the activations of a step. Such a stage makes one untimed call first in each round:
   with the heap just handed back it page-faults its whole working set again, which is
   the memory figure's business, not the timing's.

Spreading samples over rounds, rather than one block per stage, lets slow phases of a
shared machine hit every stage alike.

5. the machine-speed index: a stage that declares its ``kind`` has its calls taken in blocks
   of about :data:`BLOCK_SECONDS`, and the reference kernel of that kind
   (:mod:`perfgate.bench.reference`) is timed right before each block; each sample keeps
   the reference time of its block (``Metric.reference``). Each round also starts with one
   timing of every kernel; the run's ``machine_index`` is each kernel's median time.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from perfgate.bench.gpu import GpuRound, cuda_torch
from perfgate.bench.memory import PeakMemory, PipelineMemory, current_rss_bytes, release_free_memory
from perfgate.bench.reference import KINDS, ReferenceKernels
from perfgate.bench.registry import Stage, StageContext, stages_and_context
from perfgate.core.metrics import Direction, default_suite, metric_info, runner_metrics
from perfgate.core.schema import GitInfo, Machine, Metric, Reference, Run
from perfgate.errors import InputError

__all__ = ["BenchOptions", "ProgressFn", "memory_round", "prepare", "run_benchmark", "time_call", "timed_for"]

ProgressFn = Callable[[str, int, int], None]  # (what, done, total)

# calls of a stage per reference timing: a block lasts about this long (at least one call);
# short against the machine's phases (seconds); the kernel timed before it takes 1-3 ms
BLOCK_SECONDS = 0.005

_MEMORY = (
    "per round: the highest RSS of the stages' set-ups and the round, above the RSS before the first set-up "
    "(after the imports, freed heap released): what the stages hold plus their peak above that"
)
_ROUND_MEMORY = "per round: the round's peak RSS above the RSS at its start (what the calls allocate on top)"
_STAGE_MEMORY = (
    "per round: resident memory the stage's set-up and warm-up kept, plus the peak RSS of its calls above the "
    "RSS just before them (VmHWM reset there, freed heap released first)"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchOptions:
    """What ``perfgate bench`` was asked to do."""

    model: str
    suite: str = field(default_factory=default_suite)
    data_path: Path | None = None
    seed: int = 0
    device: str = "cpu"
    rounds: int = 3
    warmup: int | None = None
    repeat: int | None = None
    warmup_time: float = 0.05
    round_time: float = 0.25
    max_repeat: int = 5000
    min_repeat: int = 5
    samples_cap: int | None = None
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.rounds < 1:
            raise InputError(f"rounds must be >= 1, got {self.rounds}", field="--rounds")
        if self.repeat is not None and self.repeat < 1:
            raise InputError(f"repeat must be >= 1, got {self.repeat}", field="--repeat")
        if self.warmup is not None and self.warmup < 0:
            raise InputError(f"warmup must be >= 0, got {self.warmup}", field="--warmup")
        if self.min_repeat < 1:
            raise InputError(f"min_repeat must be >= 1, got {self.min_repeat}", field="min_repeat")


def _synchronizer(stage: Stage, device: str) -> Callable[[], None] | None:
    if not stage.synchronize or not device.startswith("cuda"):
        return None
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    return lambda: torch.cuda.synchronize()


def time_call(fn: Callable[[], object], sync: Callable[[], None] | None) -> float:
    if sync is not None:
        sync()
        start = time.perf_counter_ns()
        fn()
        sync()
    else:
        start = time.perf_counter_ns()
        fn()
    return (time.perf_counter_ns() - start) / 1e9


@dataclass(slots=True)
class _Prepared:
    stage: Stage
    call: Callable[[], object]
    sync: Callable[[], None] | None
    repeat: int
    held_bytes: int = 0
    block: int = 1
    seconds: list[float] = field(default_factory=list)
    references: list[float] = field(default_factory=list)  # one per sample, when the stage has a kind
    memory_mb: list[float] = field(default_factory=list)


def timed_for(call: Callable[[], object], sync: Callable[[], None] | None, seconds: float, cap: int) -> list[float]:
    """Call repeatedly for about ``seconds`` (at least once, at most ``cap`` times)."""
    spent: list[float] = []
    deadline = time.perf_counter() + seconds
    while not spent or (time.perf_counter() < deadline and len(spent) < cap):
        spent.append(time_call(call, sync))
    return spent


def prepare(stage: Stage, ctx: StageContext, options: BenchOptions) -> _Prepared:
    if stage.memory_metric:
        release_free_memory()
    before = current_rss_bytes()
    with stage.running("its set-up"):
        call = stage.setup(ctx)
    sync = _synchronizer(stage, options.device)
    warmup = stage.warmup if stage.warmup is not None else options.warmup
    with stage.running("its warm-up calls"):
        if warmup is not None:
            warm = [time_call(call, sync) for _ in range(warmup)]
        else:
            warm = timed_for(call, sync, options.warmup_time, options.max_repeat)
    typical = sorted(warm)[len(warm) // 2] if warm else BLOCK_SECONDS
    repeat = stage.repeat if stage.repeat is not None else options.repeat
    if repeat is None:
        # calibrate on calls after the warm-up: a first call that compiles or fills caches
        # must not make the stage look slow and starve it of samples
        with stage.running("its warm-up calls"):
            calibration = sorted(timed_for(call, sync, options.warmup_time, options.max_repeat))
        typical = calibration[len(calibration) // 2]
        repeat = max(options.min_repeat, min(options.max_repeat, math.ceil(options.round_time / max(typical, 1e-9))))
        if stage.samples is not None:
            wanted = min(stage.samples, options.samples_cap) if options.samples_cap else stage.samples
            repeat = max(repeat, math.ceil(wanted / options.rounds))
    held = 0
    if stage.memory_metric:
        release_free_memory()
        held = max(0, current_rss_bytes() - before)
    block = max(1, min(repeat, math.ceil(BLOCK_SECONDS / max(typical, 1e-9))))
    return _Prepared(stage=stage, call=call, sync=sync, repeat=repeat, held_bytes=held, block=block)


def _timed_calls(p: _Prepared, kernels: ReferenceKernels | None) -> None:
    """The round's timed calls of one stage, in blocks led by a reference timing when it has a kind."""
    if kernels is None or p.stage.kind is None or p.sync is not None:
        # a stage synchronised with a GPU runs on the device's clock: a CPU kernel does not measure it
        p.seconds.extend(time_call(p.call, p.sync) for _ in range(p.repeat))
        return
    done = 0
    while done < p.repeat:
        reference = kernels.time(p.stage.kind)
        k = min(p.block, p.repeat - done)
        p.seconds.extend(time_call(p.call, p.sync) for _ in range(k))
        p.references.extend([reference] * k)
        done += k


def _round(prepared: list[_Prepared], kernels: ReferenceKernels | None = None) -> tuple[int, int]:
    """One round over every stage; returns (RSS at its start, its peak RSS), in bytes."""
    release_free_memory()  # or the start would hold whatever the round before freed, differently each time
    start = current_rss_bytes()
    top = start
    for p in prepared:
        if p.stage.memory_metric:
            release_free_memory()
        with p.stage.running("its timed calls"), PeakMemory() as peak:
            if p.stage.memory_metric:
                time_call(p.call, p.sync)  # untimed: refaults the released heap (module docstring, 4.)
            _timed_calls(p, kernels)
        top = max(top, peak.before + peak.peak_bytes)
        if p.stage.memory_metric:
            p.memory_mb.append((p.held_bytes + peak.peak_bytes) / 2**20)
    return start, top


def memory_round(prepared: list[_Prepared], memory: PipelineMemory) -> dict[str, float]:
    """One round of a single call per stage, for its memory figures only (its timings are dropped).

    Returns the peak memory under the suite's name for it (``memory`` is the tracker the stages
    were set up under, module docstring 3.) and each stage's own ``memory_metric``. The resident
    workers of ``perfgate ab`` measure memory this way once per process.
    """
    saved = [(p.repeat, len(p.seconds), len(p.memory_mb)) for p in prepared]
    for p in prepared:
        p.repeat = 1
    try:
        _, top = _round(prepared)
        peak = runner_metrics(prepared[0].stage.suite).peak_memory if prepared else None
        figures = {peak: memory.round_mb(top)} if peak else {}
        for p in prepared:
            if p.stage.memory_metric:
                figures[p.stage.memory_metric] = p.memory_mb[-1]
    finally:
        for p, (repeat, n_seconds, n_memory) in zip(prepared, saved, strict=True):
            p.repeat = repeat
            del p.seconds[n_seconds:]
            del p.memory_mb[n_memory:]
    return figures


def _metric(
    name: str, unit: str, direction: Direction, samples: list[float], reference: Reference | None = None
) -> Metric:
    info = metric_info(name)
    return Metric(
        name=name,
        unit=info.unit if info else unit,
        direction=info.direction if info else direction,
        samples=tuple(samples),
        reference=reference,
    )


def _drop_warmup(p: _Prepared) -> dict[str, Any]:
    """Drop the warm-up the timed calls still show, and describe the drift of the rest.

    The fixed warm-up before the rounds catches most of it; what remains (a stage whose
    caches or allocator settle later) is found by :func:`perfgate.core.stability.steady_state`
    on the samples in the order they were taken, never more than half of them.
    """
    from perfgate.core.stability import steady_state  # here, not at the top: scipy, 0.15 s of every worker's start

    if len(p.seconds) < 3:
        return {}
    state = steady_state(p.seconds)
    p.seconds = p.seconds[state.start :]
    p.references = p.references[state.start :]
    return {
        "warmup_dropped": state.start,
        "drift_across_run": round(state.relative_drift, 4),
        "drifting": state.drifting,
        "settled": state.settled,
    }


def run_benchmark(
    options: BenchOptions,
    *,
    run_id: str,
    created_at: str,
    git: GitInfo,
    machine: dict[str, Any],
    software: Mapping[str, str] | None = None,
    config: dict[str, Any] | None = None,
    progress: ProgressFn | None = None,
    on_finish: Callable[[StageContext], None] | None = None,
) -> Run:
    """Measure every stage of ``options.suite`` that applies to ``options.model``.

    ``software`` is recorded as the run's :attr:`~perfgate.core.schema.Run.software` (None:
    this process's, :func:`perfgate.bench.machine.collect_software`). ``on_finish(ctx)`` runs
    after the last round, with what the stages left in ``ctx.state`` (the CLI saves the
    trained model from there).
    """
    stages, ctx = stages_and_context(
        suite=options.suite,
        model=options.model,
        data_path=options.data_path,
        seed=options.seed,
        device=options.device,
        params=options.params,
    )
    if software is None:
        from perfgate.bench.machine import collect_software

        software = collect_software()
    total = len(stages) + options.rounds
    prepared = []
    whole_memory = PipelineMemory()  # the stages' modules are imported: this is the state before them
    for i, stage in enumerate(stages):
        if progress:
            progress(f"set-up and warm-up of stage {stage.name!r}", i, total)
        with whole_memory.setup():
            prepared.append(prepare(stage, ctx, options))
    memory: list[float] = []
    round_memory: list[float] = []
    gpu_memory: list[float] = []
    gpu_util: list[float] = []
    torch = cuda_torch(options.device)
    kernels = ReferenceKernels()
    index: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for r in range(options.rounds):
        if progress:
            progress(f"round {r + 1}/{options.rounds}", len(stages) + r, total)
        for kind in KINDS:
            index[kind].append(kernels.time(kind))
        gpu_round = GpuRound(torch, options.device) if torch is not None else nullcontext()
        with gpu_round as gpu:
            start, top = _round(prepared, kernels)
        memory.append(whole_memory.round_mb(top))
        round_memory.append(max(0, top - start) / 2**20)
        if gpu is not None:
            gpu_memory.append(gpu.peak_mb)
            if gpu.utilization_pct is not None:
                gpu_util.append(gpu.utilization_pct)
    if on_finish is not None:
        on_finish(ctx)
    if progress:
        progress("done", total, total)
    stability = {p.stage.name: _drop_warmup(p) for p in prepared}
    metrics: dict[str, Metric] = {}
    for p in prepared:
        st = p.stage
        reference = None
        if st.kind is not None and len(p.references) == len(p.seconds):
            reference = Reference(kernel=st.kind, seconds=tuple(p.references))
            index[st.kind].extend(p.references)
        metrics[st.metric] = _metric(st.metric, st.unit, Direction.LOWER, [s * st.scale for s in p.seconds], reference)
        if st.throughput_metric and st.items_per_call:
            kept = [i for i, s in enumerate(p.seconds) if s > 0]
            rate = [st.items_per_call / p.seconds[i] for i in kept]
            rate_reference = None
            if reference is not None:
                rate_reference = Reference(kernel=reference.kernel, seconds=tuple(reference.seconds[i] for i in kept))
            metrics[st.throughput_metric] = _metric(
                st.throughput_metric, "samples/s", Direction.HIGHER, rate, rate_reference
            )
        if st.memory_metric:
            metrics[st.memory_metric] = _metric(st.memory_metric, "MB", Direction.LOWER, p.memory_mb)
    names = runner_metrics(options.suite)  # the suite's names for the runner's own figures, module docstring 3.
    if names.peak_memory:
        metrics[names.peak_memory] = _metric(names.peak_memory, "MB", Direction.LOWER, memory)
    if names.round_memory:
        metrics[names.round_memory] = _metric(names.round_memory, "MB", Direction.INFO, round_memory)
    if gpu_memory and names.gpu_memory:
        metrics[names.gpu_memory] = _metric(names.gpu_memory, "MB", Direction.LOWER, gpu_memory)
    if gpu_util and names.gpu_utilization:
        metrics[names.gpu_utilization] = _metric(names.gpu_utilization, "%", Direction.INFO, gpu_util)
    run_config: dict[str, Any] = {
        "rounds": options.rounds,
        "seed": options.seed,
        "device": options.device,
        "stages": {
            p.stage.name: {
                "metric": p.stage.metric,
                "repeat_per_round": p.repeat,
                **stability[p.stage.name],
                **(
                    {
                        "clock": "cuda",
                        **({"throughput_metric": p.stage.throughput_metric} if p.stage.throughput_metric else {}),
                    }
                    if p.sync is not None
                    else {}
                ),
            }
            for p in prepared
        },
        "memory_definition": _MEMORY,
        "round_memory_definition": _ROUND_MEMORY,
        # vmhwm: the kernel's exact high-water mark; sampled: RSS read every millisecond (may miss short peaks)
        "memory_method": whole_memory.method,
        **({"stage_memory_definition": _STAGE_MEMORY} if any(p.stage.memory_metric for p in prepared) else {}),
        **(config or {}),
    }
    if options.data_path is not None:
        run_config.setdefault("data", str(options.data_path))
    return Run(
        run_id=run_id,
        suite=options.suite,
        model=options.model,
        created_at=created_at,
        git=git,
        machine=Machine.of(machine),
        config=run_config,
        metrics=metrics,
        machine_index={kind: float(np.median(values)) for kind, values in index.items() if values},
        software=dict(software),
    )
