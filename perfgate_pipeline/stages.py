"""The reference pipeline's stages, registered for ``perfgate bench`` .

load (DBN file -> one instrument's OHLCV bars) -> features (the 16 indicators) ->
training step of the model -> single-sample inference, served the fast way
(:func:`perfgate_pipeline.models.fast_server`) and, as its own metric, in torch eager.
Without ``--data`` a synthetic one-instrument OHLCV-1m file is written once (outside any
timing) into ``.perfgate/data/`` and reused.

What one timed call is, per model (the training configs are the dataclass defaults of
:mod:`perfgate_pipeline.models`):

* DQN: one step of 16 episodes into the replay buffer and one Double-DQN update on a
  minibatch of 128; PPO: one clipped-objective update on a minibatch of 256 (every
  ``epochs × rollout / minibatch`` calls one also collects the next rollout); Mamba-2 and
  TFT: one AdamW step on a batch of sequences;
* inference: one new bar -> the model's output, at batch 1, over at least 10,000 calls
  (DQN/PPO: an observation window; Mamba-2/TFT: the next bar of a stream, state carried).

Training uses ``params["threads"]`` torch threads (default: 1) and puts torch back to
one thread after each step, so torch eager inference always runs single-threaded: with
two, its p99 jumps to milliseconds as OpenMP workers wake and sleep (measured on a
2-core runner).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import torch

from perfgate.bench.registry import Stage, StageContext, clear, register, registered, stage, unmeasured
from perfgate.errors import InputError
from perfgate_pipeline import models
from perfgate_pipeline.env import MarketData
from perfgate_pipeline.models import build_task, default_config
from perfgate_pipeline.models.dqn import DQNTask
from perfgate_pipeline.models.ppo import PPOTask
from perfgate_pipeline.suite import SUITE
from perfgate_pipeline.train import SequenceTask, Task, Trainer

__all__ = [
    "DEFAULT_BARS",
    "INFERENCE_SAMPLES",
    "default_data_path",
    "inference_inputs",
    "load_checkpoint",
    "one_instrument",
    "resolve_device",
    "save_checkpoint",
    "training_config",
]

DEFAULT_BARS = 50_000
INFERENCE_SAMPLES = 10_000  # timed calls of the fast path: enough for a stable p99
_EAGER_SAMPLES = 2_000  # torch eager is 10-100x slower; 2,000 calls still give a p99
_STREAM = 4_096  # inputs the inference stages cycle through


def _prime_torch() -> None:
    """Do torch's one-time lazy work now, so no model's training memory counts it.

    The first optimiser step imports ``torch._dynamo`` and some 800 other modules (about
    80 MB resident); whichever model's training stage ran it first would look 80 MB heavier.
    """
    p = torch.nn.Parameter(torch.zeros(4))
    opt = torch.optim.AdamW([p])
    p.sum().backward()
    torch.nn.utils.clip_grad_norm_([p], 1.0)
    opt.step()


_prime_torch()


def _keep_freed_heap() -> None:
    """Let glibc reuse big freed blocks instead of unmapping them (a no-op without glibc).

    torch's CPU tensors come from malloc, which maps every block over 32 MB afresh and
    unmaps it on free, so each training step page-faults its whole activation set again:
    about 40 % of a TFT step here. Keeping them (as jemalloc or tcmalloc would) changes no
    result; the runner's memory figures release freed heap before they measure, so they
    still see each step's full peak.
    """
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return
    m_trim_threshold, m_mmap_threshold = -1, -3
    mallopt(m_mmap_threshold, 1 << 30)
    mallopt(m_trim_threshold, (1 << 31) - 1)


def default_data_path(seed: int, bars: int = DEFAULT_BARS) -> Path:
    """The cached synthetic data file for a seed (one instrument), written on first use."""
    path = Path(".perfgate") / "data" / f"synth-ohlcv-1m-1inst-{bars}-seed{seed}.dbn"
    if not path.exists():
        from perfgate_pipeline.synth import write_synthetic

        path.parent.mkdir(parents=True, exist_ok=True)
        with unmeasured():  # once per machine, not the pipeline: a first run must not look heavier
            write_synthetic(path, schema="ohlcv-1m", records=bars, seed=seed, instruments=1)
    return path


def write_shared_data(folder: Path, seed: int = 0) -> Path:
    """The synthetic bars the stages read without ``--data``, written once into ``folder`` for both
    sides of a ``perfgate ab`` check (the ``write_shared_data`` hook of :mod:`perfgate.suites`)."""
    from perfgate_pipeline.synth import write_synthetic

    path = folder / f"synth-ohlcv-1m-1inst-{DEFAULT_BARS}-seed{seed}.dbn"
    write_synthetic(path, schema="ohlcv-1m", records=DEFAULT_BARS, seed=seed, instruments=1)
    return path


def resolve_device(device: str) -> str:
    """``cpu`` or ``cuda[:N]``, checked against this machine; an InputError otherwise."""
    if device == "cpu":
        return device
    if device == "cuda" or (device.startswith("cuda:") and device[5:].isdigit()):
        if not torch.cuda.is_available():
            raise InputError(
                "CUDA is not available on this machine (torch sees no GPU); use --device cpu", field="--device"
            )
        index = int(device[5:]) if ":" in device else 0
        if index >= torch.cuda.device_count():
            raise InputError(f"there is no GPU {index}: torch sees {torch.cuda.device_count()}", field="--device")
        return device
    raise InputError(f"unknown device {device!r}; use cpu, cuda or cuda:N", field="--device")


def one_instrument(dbn: Any) -> np.ndarray:
    """The records of the instrument with the most bars (features need one price series)."""
    rec = dbn.records
    if rec is None or len(rec) == 0:
        return rec
    ids, counts = np.unique(rec["instrument_id"], return_counts=True)
    if len(ids) == 1:
        return rec
    return rec[rec["instrument_id"] == ids[np.argmax(counts)]]


# Measured (benchmarks/counts_results.txt, +5 % of each stage's own kind of work): the DBN load's
# instructions moved 3.0x its paired wall time, the features' 2.5x, the training step's 1.02x and
# the fast inference path's 0.88x. Counts gate only where they track time.
_LOAD_UNTRACKED = (
    "a copy bound by memory bandwidth: its instructions moved 3.0x its wall time for the same "
    "injected work (benchmarks/counts_results.txt)"
)
_FEATURES_UNTRACKED = (
    "vectorised numpy kernels: their instructions moved 2.5x their wall time for the same injected "
    "work (benchmarks/counts_results.txt)"
)


@stage(
    "dbn_load",
    metric="dbn_load_time_ms",
    unit="ms",
    suite=SUITE.name,
    kind="memory",
    counts_informational=_LOAD_UNTRACKED,
)
def _dbn_load(ctx: StageContext) -> Callable[[], object]:
    from perfgate_pipeline.dbn import load_dbn, ohlcv_arrays

    path = ctx.data_path or default_data_path(ctx.seed, int(ctx.params.get("bars", DEFAULT_BARS)))
    ctx.params.setdefault("data", str(path))

    def once() -> object:
        dbn = load_dbn(path)
        ctx.state["bars"] = ohlcv_arrays(replace(dbn, records=one_instrument(dbn)))
        return ctx.state["bars"]

    ctx.state["load_bars"] = once  # for a later set-up that runs before any call (_bars)
    return once


def _bars(ctx: StageContext) -> dict[str, np.ndarray]:
    """The bars the DBN load's calls stored, or, when none has run (``--warmup 0``, the native
    pass of ``--measure counts``: set-ups only), the bars loaded now. A set-up never needs another
    stage's calls; one extra load only then, so a warmed-up process is left as it always was."""
    if "bars" not in ctx.state:
        ctx.state["load_bars"]()
    bars: dict[str, np.ndarray] = ctx.state["bars"]
    return bars


@stage(
    "features",
    metric="feature_extraction_time_ms",
    unit="ms",
    suite=SUITE.name,
    kind="compute",
    counts_informational=_FEATURES_UNTRACKED,
)
def _features(ctx: StageContext) -> Callable[[], object]:
    from perfgate_pipeline.features import compute_features

    bars = _bars(ctx)

    def once() -> object:
        ctx.state["features"] = compute_features(bars)
        return ctx.state["features"]

    ctx.state["make_features"] = once  # as for the bars (_market_data)
    return once


def _market_data(ctx: StageContext) -> MarketData:
    if "market" not in ctx.state:
        if "features" not in ctx.state:  # no features call has run: see _bars
            ctx.state["make_features"]()
        ctx.state["market"] = MarketData.from_features(ctx.state["features"], _bars(ctx)["close"])
    data: MarketData = ctx.state["market"]
    return data


def training_config(model: str, *, quick: bool = False) -> Any:
    """The config a benchmark trains ``model`` with: the defaults; a quick (smoke) run gives the
    sequence models quarter-length windows, so a 2 GB TFT step does not take its whole budget
    (the batch, and so the throughput's unit, stays the same)."""
    cfg = default_config(model)
    if quick and hasattr(cfg, "seq_len"):
        cfg = replace(cfg, seq_len=max(cfg.seq_len // 4, 8))
    return cfg


def run_config(model: str, *, quick: bool = False, threads: int | None = None) -> dict[str, object]:
    """What a run file of ``model`` records beyond the runner's own (the ``run_config`` hook of
    :mod:`perfgate.suites`): the training threads and the model's config."""
    return {
        "training_threads": threads if threads is not None else 1,
        "model_config": asdict(training_config(model, quick=quick)),
    }


def _training_setup(ctx: StageContext) -> Callable[[], object]:
    _keep_freed_heap()
    threads = int(ctx.params.get("threads", 1))
    torch.set_num_threads(threads)
    cfg = training_config(ctx.model, quick=bool(ctx.params.get("quick")))
    task = build_task(ctx.model, _market_data(ctx), config=cfg, device=ctx.device, seed=ctx.seed)
    if models.spec(ctx.model).prepares:
        # counted: made once natively and loaded here; timed: made by the first call, as ever
        ctx.prepare(
            f"{ctx.model}_task",
            make=task.prepare,  # type: ignore[attr-defined]
            save=task.save_prepared,  # type: ignore[attr-defined]
            load=task.load_prepared,  # type: ignore[attr-defined]
        )
    trainer = Trainer(task)
    torch.set_num_threads(1)
    ctx.state["task"] = task
    ctx.state["trainer"] = trainer

    def once() -> object:
        torch.set_num_threads(threads)
        try:
            return trainer.step()
        finally:
            torch.set_num_threads(1)

    return once


def _training_stage(name: str) -> None:
    """Register the training stage of model ``name`` (called for every model in the registry,
    now and when one is registered later)."""
    spec = models.spec(name)
    new = Stage(
        name=f"training_step_{name}",
        metric="training_step_time_ms",
        unit="ms",
        setup=_training_setup,
        suite=SUITE.name,
        models=(name,),
        items_per_call=spec.items_per_call(spec.config()),
        throughput_metric="throughput_samples_per_sec",
        memory_metric="training_memory_mb",
        kind=spec.kind,
        uncounted=spec.uncounted,
        prepares=spec.prepares,
        counted_warmup=spec.counted_warmup,
        counted_calls=spec.counted_calls,
    )
    stages = [s for s in registered(SUITE.name) if s.name != new.name]
    first_inference = next((i for i, s in enumerate(stages) if s.name.startswith("inference")), len(stages))
    if first_inference == len(stages):
        register(new)
        return
    # a model registered after this module's import: its training goes before the inference
    # stages, which serve the model it trained (stages run in registration order)
    clear(SUITE.name)
    for s in [*stages[:first_inference], new, *stages[first_inference:]]:
        register(s)


models.on_register(_training_stage)


def inference_inputs(ctx: StageContext) -> np.ndarray:
    """What each inference call gets: observations (DQN/PPO) or consecutive bars (Mamba-2/TFT)."""
    task = ctx.state["task"]
    data = _market_data(ctx)
    if isinstance(task, DQNTask | PPOTask):
        window = task.config.window
        ends = np.arange(len(data) - min(_STREAM, len(data) - window), len(data))
        obs = np.zeros((len(ends), task.config.obs_dim), dtype=np.float32)
        for i, t in enumerate(ends):
            obs[i, :-1] = data.features[t - window + 1 : t + 1].reshape(-1)
        obs[:, -1] = np.random.default_rng(ctx.seed).integers(-1, 2, len(ends))  # a position
        return obs
    return np.ascontiguousarray(data.features[-_STREAM:])


def _serving(ctx: StageContext, make: Callable[[torch.nn.Module], Any]) -> Callable[[], object]:
    task: Task = ctx.state["task"]
    server = make(task.model)
    inputs = inference_inputs(ctx)
    n = len(inputs)
    rows = [inputs[i] for i in range(n)]  # views made once: indexing costs nothing in the timed call
    position = [0]

    def once() -> object:
        i = position[0]
        position[0] = i + 1 if i + 1 < n else 0
        if i + 1 == n and isinstance(task, SequenceTask):
            server.reset()  # a stream starts again from the first bar
        return server(rows[i])

    return once


@stage(
    "inference",
    metric="inference_latency_us",
    unit="us",
    suite=SUITE.name,
    samples=INFERENCE_SAMPLES,
    kind="interpreter",
)
def _inference(ctx: StageContext) -> Callable[[], object]:
    return _serving(ctx, models.fast_server)


@stage(
    "inference_torch",
    metric="inference_latency_torch_us",
    unit="us",
    suite=SUITE.name,
    samples=_EAGER_SAMPLES,
    kind="interpreter",
)
def _inference_torch(ctx: StageContext) -> Callable[[], object]:
    from perfgate_pipeline.serve import eager_server

    return _serving(ctx, eager_server)


def save_checkpoint(ctx: StageContext, path: Path | BinaryIO) -> Path | BinaryIO:
    """Write the trained model of a benchmark run (weights, config, training steps) to ``path``
    (a file name, or an open binary file)."""
    task = ctx.state["task"]
    trainer: Trainer = ctx.state["trainer"]
    if isinstance(path, Path):
        path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(
        {
            "model": ctx.model,
            "config": asdict(task.model.config),
            "state_dict": {k: v.detach().cpu() for k, v in task.model.state_dict().items()},
            "steps": trainer.steps,
        },
        path,
    )
    return path


def load_checkpoint(path: Path) -> torch.nn.Module:
    """The model saved by :func:`save_checkpoint`, on the CPU, ready for serving."""
    doc = torch.load(path, map_location="cpu", weights_only=True)
    spec = models.spec(doc["model"])
    model: torch.nn.Module = spec.model(spec.config(**doc["config"]))
    model.load_state_dict(doc["state_dict"])
    return model.eval()
