"""The reference pipeline's stages, registered for ``perfgate bench`` (DESIGN §7).

load (DBN file -> OHLCV arrays) -> features (the 16 indicators) -> training step ->
single-sample inference. Without ``--data`` a synthetic OHLCV-1m file is written once
(outside any timing) into ``.perfgate/data/`` and reused.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from perfgate.bench.registry import StageContext, stage
from perfgate.pipeline.builtin import MLP, config_for

__all__ = ["DEFAULT_BARS", "default_data_path"]

DEFAULT_BARS = 50_000
_TRAIN_WINDOWS = 4096


def default_data_path(seed: int, bars: int = DEFAULT_BARS) -> Path:
    """The cached synthetic data file for a seed, written on first use."""
    path = Path(".perfgate") / "data" / f"synth-ohlcv-1m-{bars}-seed{seed}.dbn"
    if not path.exists():
        from perfgate.pipeline.synth import write_synthetic

        path.parent.mkdir(parents=True, exist_ok=True)
        write_synthetic(path, schema="ohlcv-1m", records=bars, seed=seed)
    return path


@stage("dbn_load", metric="dbn_load_time_ms", unit="ms")
def _dbn_load(ctx: StageContext) -> Callable[[], object]:
    from perfgate.pipeline.dbn import load_dbn, ohlcv_arrays

    path = ctx.data_path or default_data_path(ctx.seed, int(ctx.params.get("bars", DEFAULT_BARS)))
    ctx.params.setdefault("data", str(path))

    def once() -> object:
        ctx.state["bars"] = ohlcv_arrays(load_dbn(path))
        return ctx.state["bars"]

    return once


@stage("features", metric="feature_extraction_time_ms", unit="ms")
def _features(ctx: StageContext) -> Callable[[], object]:
    from perfgate.pipeline.features import compute_features

    bars = ctx.state["bars"]

    def once() -> object:
        ctx.state["features"] = compute_features(bars)
        return ctx.state["features"]

    return once


def _training_windows(ctx: StageContext, window: int) -> tuple[np.ndarray, np.ndarray]:
    feats = ctx.state["features"]
    valid = feats.normalize(feats.values[feats.warmup :])  # (N, 16), scaled as at inference
    close = np.asarray(ctx.state["bars"]["close"])[feats.warmup :]
    n = min(_TRAIN_WINDOWS, len(valid) - window - 1)
    if n < 1:
        raise ValueError(f"need more than {window + feats.warmup + 1} bars to train, got {len(close)}")
    starts = np.linspace(0, len(valid) - window - 2, n).astype(np.int64)
    x = np.stack([valid[s : s + window].reshape(-1) for s in starts]).astype(np.float32)  # (n, window*16)
    nxt = starts + window
    y = (np.log(close[nxt + 1] / close[nxt]) * 100.0).astype(np.float32)  # next-bar return, percent
    return x, y


def _model(ctx: StageContext) -> MLP:
    if "model" not in ctx.state:
        ctx.state["model"] = MLP(config_for(ctx.model), seed=ctx.seed)
    model: MLP = ctx.state["model"]
    return model


@stage(
    "training_step",
    metric="training_step_time_ms",
    unit="ms",
    items_per_call=config_for("dqn").batch,
    throughput_metric="throughput_samples_per_sec",
)
def _training_step(ctx: StageContext) -> Callable[[], object]:
    model = _model(ctx)
    x, y = _training_windows(ctx, model.config.window)
    batch = model.config.batch
    position = [0]

    def once() -> object:
        i = position[0]
        idx = np.arange(i, i + batch) % len(x)
        position[0] = (i + batch) % len(x)
        return model.train_step(x[idx], y[idx])

    return once


@stage("inference", metric="inference_latency_us", unit="us")
def _inference(ctx: StageContext) -> Callable[[], object]:
    model = _model(ctx)
    x, _ = _training_windows(ctx, model.config.window)
    sample = np.ascontiguousarray(x[-1])

    def once() -> object:
        return model.predict(sample)

    return once
