"""Streaming features: bar by bar, the same numbers as the batch computation.

The two are separate implementations of the same arithmetic: the batch kernel indexes
the bar arrays, and the streaming step keeps rings. Any difference in window handling,
seeding or re-anchoring shows up here. No timing is asserted; benchmarks/features.py
measures the per-bar latency.
"""

from __future__ import annotations

import numpy as np
import pytest

from perfgate.errors import InputError
from perfgate_pipeline.features import FEATURE_NAMES, FEATURE_WARMUP, REANCHOR, WARMUP, compute_features
from perfgate_pipeline.features_stream import StreamingFeatures
from perfgate_pipeline.synth import synthesize_bars

from .test_features import coarsen


def stream(bars: dict[str, np.ndarray], live: StreamingFeatures | None = None) -> np.ndarray:
    live = live or StreamingFeatures()
    h, lo, c, v = (bars[k].tolist() for k in ("high", "low", "close", "volume"))
    out = np.empty((len(c), len(FEATURE_NAMES)))
    for i in range(len(c)):
        out[i] = live.update(h[i], lo[i], c[i], v[i])
    return out


def assert_stream_equals_batch(bars: dict[str, np.ndarray]) -> None:
    batch = compute_features(bars, dtype=np.float64).values
    live = stream(bars)
    assert np.array_equal(np.isnan(live), np.isnan(batch))  # the same warm-up rows
    for j, name in enumerate(FEATURE_NAMES):
        a, b = live[FEATURE_WARMUP[j] :, j], batch[FEATURE_WARMUP[j] :, j]
        typical = np.mean(np.abs(b))
        assert (np.abs(a - b) <= 1e-9 * np.maximum(np.abs(b), typical)).all(), name


@pytest.mark.parametrize("seed", [0, 1])
def test_stream_equals_batch(seed: int) -> None:
    # 6000 bars: far past the warm-up, through ~190 re-anchorings of the window sums
    assert 6000 > 100 * REANCHOR
    assert_stream_equals_batch(synthesize_bars(6000, seed))


def test_stream_equals_batch_on_coarse_prices() -> None:
    # unchanged closes, flat windows and zero log returns exercise every convention
    assert_stream_equals_batch(coarsen(synthesize_bars(4000, 2), 0.25))


def test_stream_equals_batch_with_zero_volume_and_flat_start() -> None:
    bars = synthesize_bars(300, 3)
    for k in ("open", "high", "low", "close"):
        bars[k][:40] = 100.0
    bars["volume"][100:130] = 0.0
    assert_stream_equals_batch(bars)


def test_every_prefix_length() -> None:
    # the streaming value after n bars is the batch value of n bars, for every short n
    bars = synthesize_bars(80, 4)
    live = StreamingFeatures()
    rows = stream(bars, live)
    for n in range(1, 80):
        batch = compute_features({k: v[:n] for k, v in bars.items()}, dtype=np.float64).values
        assert np.array_equal(rows[n - 1], batch[-1], equal_nan=True), n


def test_ready_and_bars_seen() -> None:
    bars = synthesize_bars(WARMUP + 2, 5)
    live = StreamingFeatures()
    assert live.bars_seen == 0 and not live.ready and np.isnan(live.values).all()
    for i in range(WARMUP + 2):
        x = live.update(bars["high"][i], bars["low"][i], bars["close"][i], bars["volume"][i])
        assert live.bars_seen == i + 1
        assert live.ready == (i >= WARMUP) == bool(np.isfinite(x).all())
    assert live.values is x
    assert live.names == FEATURE_NAMES


def test_result_is_a_read_only_view() -> None:
    live = StreamingFeatures()
    x = live.update(101.0, 99.0, 100.0, 10.0)
    with pytest.raises(ValueError, match="read-only"):
        x[0] = 1.0
    y = live.update(102.0, 100.0, 101.0, 10.0)
    assert y is x and x[0] == pytest.approx(np.log(101 / 100))  # overwritten in place


@pytest.mark.parametrize(
    "bad", [(101.0, 99.0, float("nan"), 5.0), (101.0, 0.0, 100.0, 5.0), (101.0, 99.0, 100.0, -5.0)]
)
def test_a_bad_bar_is_rejected_and_not_added(bad: tuple[float, float, float, float]) -> None:
    bars = synthesize_bars(120, 7)
    live = StreamingFeatures()
    stream({k: v[:60] for k, v in bars.items()}, live)
    with pytest.raises(InputError) as info:
        live.update(*bad)
    assert info.value.field == "bar" and live.bars_seen == 60
    rest = stream({k: v[60:] for k, v in bars.items()}, live)
    assert np.array_equal(rest, compute_features(bars, dtype=np.float64).values[60:])


def test_reset_and_copy() -> None:
    bars = synthesize_bars(500, 6)
    live = StreamingFeatures()
    first = stream(bars, live)
    fork = live.copy()
    live.reset()
    assert live.bars_seen == 0 and np.isnan(live.values).all()
    assert np.array_equal(stream(bars, live), first, equal_nan=True)
    # the copy kept its own state: one more bar on it gives the batch row 500
    more = {k: np.append(v, v[-1]) for k, v in bars.items()}
    x = fork.update(more["high"][-1], more["low"][-1], more["close"][-1], more["volume"][-1])
    batch = compute_features(more, dtype=np.float64).values
    assert np.array_equal(x, batch[-1]) and fork.bars_seen == 501
