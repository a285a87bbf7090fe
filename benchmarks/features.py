"""Benchmark: the 16 features over 1,000,000 bars; the streaming update; peak memory.

Batch: perfgate's one-pass kernel (``compute_features``: float32 matrix plus normalisation
statistics) against TA-Lib called one indicator at a time with numpy glue for the ratios
(the same 16 features), and against a plain pandas version (rolling/ewm, no TA-Lib
seeding, so its warm-up rows differ). Rounds are interleaved in rotating order with
``gc.collect()`` before each call, so load from other processes hits all of them alike;
medians, minima and ratios come from that one run.

Streaming: ``StreamingFeatures.update`` per bar, timed one call at a time with
``perf_counter_ns`` after 2,000 warm-up bars, with gc disabled. The reported times include
the timer's own overhead (printed separately).

Memory: the peak resident set of each batch method's call, measured by resetting
the kernel's high-water mark (``/proc/self/clear_refs``) and then reading ``VmHWM``. It is
reported as bytes per bar above the resident set before the call. For comparison, the input
is 40 B/bar (five float64 columns) and the float32 output is 64 B/bar.

    .venv/bin/python benchmarks/features.py [--bars N] [--repeat R] [--stream N]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from perfgate_pipeline.features import compute_features
from perfgate_pipeline.features_stream import StreamingFeatures
from perfgate_pipeline.synth import synthesize_bars

__all__ = ["main"]

Bars = dict[str, np.ndarray]


def talib_features(b: Bars) -> np.ndarray:
    import talib

    h, lo, c, v = (b[k] for k in ("high", "low", "close", "volume"))
    out = np.full((len(c), 16), np.nan)
    out[1:, 0] = np.log(c[1:] / c[:-1])
    out[:, 1] = talib.ROCP(c, 10)
    out[:, 2] = c / talib.SMA(c, 20) - 1
    out[:, 3] = c / talib.EMA(c, 12) - 1
    out[:, 4] = talib.RSI(c, 14)
    macd, signal, _ = talib.MACD(c, 12, 26, 9)
    out[:, 5] = macd / c
    out[:, 6] = signal / c
    upper, middle, lower = talib.BBANDS(c, 20, 2, 2, 0)
    out[:, 7] = (c - lower) / (upper - lower)
    out[:, 8] = (upper - lower) / middle
    out[:, 9] = talib.ATR(h, lo, c, 14) / c
    out[:, 10], out[:, 11] = talib.STOCHF(h, lo, c, 14, 3, 0)
    obv, vsum = talib.OBV(c, v), talib.SUM(v, 20)
    out[20:, 12] = (obv[20:] - obv[:-20]) / vsum[20:]
    out[:, 13] = c / (talib.SUM(talib.TYPPRICE(h, lo, c) * v, 20) / vsum) - 1
    out[1:, 14] = talib.STDDEV(out[1:, 0], 20, 1)
    out[:, 15] = (v - talib.SMA(v, 20)) / talib.STDDEV(v, 20, 1)
    return out


def pandas_features(b: Bars) -> np.ndarray:
    import pandas as pd

    h, lo, c, v = (pd.Series(b[k]) for k in ("high", "low", "close", "volume"))
    d, prev = c.diff(), c.shift()
    sma, sd = c.rolling(20).mean(), c.rolling(20).std(ddof=0)
    line = c.ewm(span=12, adjust=False).mean() - c.ewm(span=26, adjust=False).mean()
    gain = d.clip(lower=0).ewm(alpha=1 / 14, adjust=False).mean()
    loss = (-d).clip(lower=0).ewm(alpha=1 / 14, adjust=False).mean()
    tr = pd.concat([h, prev], axis=1).max(axis=1) - pd.concat([lo, prev], axis=1).min(axis=1)
    hh, ll = h.rolling(14).max(), lo.rolling(14).min()
    k = 100 * (c - ll) / (hh - ll)
    obv = (np.sign(d).fillna(0) * v).cumsum()
    vsum = v.rolling(20).sum()
    logret = np.log(c / prev)
    cols = [
        logret,
        c / c.shift(10) - 1,
        c / sma - 1,
        c / c.ewm(span=12, adjust=False).mean() - 1,
        100 * gain / (gain + loss),
        line / c,
        line.ewm(span=9, adjust=False).mean() / c,
        (c - (sma - 2 * sd)) / (4 * sd),
        4 * sd / sma,
        tr.ewm(alpha=1 / 14, adjust=False).mean() / c,
        k,
        k.rolling(3).mean(),
        (obv - obv.shift(20)) / vsum,
        c / (((h + lo + c) / 3 * v).rolling(20).sum() / vsum) - 1,
        logret.rolling(20).std(ddof=0),
        (v - v.rolling(20).mean()) / v.rolling(20).std(ddof=0),
    ]
    return np.column_stack([s.to_numpy() for s in cols])


def _methods() -> dict[str, Callable[[Bars], object]]:
    methods: dict[str, Callable[[Bars], object]] = {"perfgate (numba, one pass)": compute_features}
    try:
        import talib  # noqa: F401

        methods["TA-Lib, one call per indicator"] = talib_features
    except ImportError:
        print("TA-Lib is not installed: its row is left out")
    try:
        import pandas  # noqa: F401

        methods["pandas rolling/ewm"] = pandas_features
    except ImportError:
        print("pandas is not installed: its row is left out")
    return methods


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def peak_bytes(fn: Callable[[], object]) -> int | None:
    """Peak RSS during ``fn()`` above the RSS before it, or None where VmHWM cannot be reset."""
    gc.collect()
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return None
    before = _rss_kib("VmRSS")
    result = fn()
    peak = _rss_kib("VmHWM")
    del result
    return (peak - before) * 1024


def bench_batch(bars: Bars, repeat: int) -> None:
    n = len(bars["close"])
    methods = _methods()
    for fn in methods.values():  # warm-up: numba compilation, imports, first-touch of pages
        fn(bars)
    times: dict[str, list[float]] = {name: [] for name in methods}
    names = list(methods)
    for r in range(repeat):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            gc.collect()
            t0 = time.perf_counter()
            methods[name](bars)
            times[name].append(time.perf_counter() - t0)
    ours = statistics.median(times[names[0]])
    print(f"\n16 features over {n:,} bars: {repeat} interleaved rounds")
    print("| method | median ms | min ms | x perfgate | peak MB | peak B/bar |\n|---|---:|---:|---:|---:|---:|")
    for name in names:
        med, low = statistics.median(times[name]), min(times[name])
        peak = peak_bytes(lambda fn=methods[name]: fn(bars))
        mem = f"{peak / 1e6:.0f} | {peak / n:.0f}" if peak is not None else "n/a | n/a"
        print(f"| {name} | {med * 1e3:.1f} | {low * 1e3:.1f} | {med / ours:.2f} | {mem} |")
    print(f"\ninput 40 B/bar ({40 * n / 1e6:.0f} MB); float32 output 64 B/bar ({64 * n / 1e6:.0f} MB)")


def bench_stream(bars: Bars, updates: int) -> None:
    live = StreamingFeatures()
    h, lo, c, v = (bars[k][: updates + 2000].tolist() for k in ("high", "low", "close", "volume"))
    update = live.update
    for i in range(2000):
        update(h[i], lo[i], c[i], v[i])
    clock = time.perf_counter_ns
    lat = np.empty(len(c) - 2000, dtype=np.int64)
    gc.collect()
    gc.disable()
    try:
        for i in range(2000, len(c)):
            t0 = clock()
            update(h[i], lo[i], c[i], v[i])
            lat[i - 2000] = clock() - t0
        timer = np.empty(100_000, dtype=np.int64)
        for i in range(len(timer)):
            t0 = clock()
            timer[i] = clock() - t0
    finally:
        gc.enable()
    p = np.percentile(lat, [50, 95, 99, 99.9]) / 1e3
    print(f"\nstreaming update, {len(lat):,} bars, one call each (µs, timer overhead included)")
    print("| p50 | p95 | p99 | p99.9 | max | timer p50 |\n|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {p[0]:.2f} | {p[1]:.2f} | {p[2]:.2f} | {p[3]:.2f} | {lat.max() / 1e3:.1f} | {np.median(timer) / 1e3:.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bars", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--stream", type=int, default=200_000, help="bars timed in the streaming test")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    bars = synthesize_bars(args.bars, args.seed)
    bench_batch(bars, args.repeat)
    bench_stream(bars, min(args.stream, args.bars - 2000))
    print(f"\nload average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
