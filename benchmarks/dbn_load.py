"""Benchmark: loading 1,000,000 OHLCV-1m bars from DBN, plain and zstd.

Compares perfgate's strict zero-copy loader with the official ``databento_dbn.DBNDecoder``
(decoding every record into Python objects), with a plain memory copy of the same bytes
(the floor any loader that copies would pay) and with zstd decompression alone (the floor
for ``.dbn.zst``). Repetitions are interleaved (one of each method per round, in rotating
order) and medians reported, so that load from other processes hits all methods alike.

Targets: plain load <= the memory copy; zstd load <= 1.2 x decompression alone.

The file is built here, without perfgate's synthesiser: a numpy array with the OHLCV
record layout (length 14, rtype 0x21) behind a header from the official
``databento_dbn.Metadata(...).encode()``. A sample of records is checked byte for byte
against the official ``OHLCVMsg`` encoder before anything is timed.

    .venv/bin/python benchmarks/dbn_load.py [--records N] [--repeat R]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import databento_dbn as dbn
import numpy as np
import zstandard

from perfgate_pipeline._dbn_schemas import record_dtype
from perfgate_pipeline.dbn import load_dbn, ohlcv_arrays

__all__ = ["build_ohlcv_file", "main"]

_START_NS = 1_704_153_600_000_000_000  # 2024-01-02T00:00:00Z
_INSTRUMENTS = 8


def build_ohlcv_file(records: int, seed: int = 0) -> bytes:
    """A v3 OHLCV-1m DBN stream: 8 instruments, one bar per instrument per minute, random-walk prices."""
    dtype = record_dtype(0x21, 3)
    assert dtype is not None
    rng = np.random.default_rng(seed)
    bars = np.zeros(records, dtype=dtype)
    bars["length"] = dtype.itemsize // 4
    bars["rtype"] = 0x21
    bars["publisher_id"] = 1
    bars["instrument_id"] = np.arange(records) % _INSTRUMENTS + 1
    bars["ts_event"] = _START_NS + (np.arange(records, dtype=np.uint64) // _INSTRUMENTS) * 60_000_000_000
    tick = 250_000_000  # 0.25 in 1e-9 units
    steps = rng.standard_t(3, size=records).round().astype(np.int64)
    price = 5_000_000_000_000 + np.cumsum(steps) * tick
    move = rng.integers(-4, 5, size=records) * tick
    bars["open"] = price
    bars["close"] = price + move
    bars["high"] = np.maximum(price, price + move) + rng.integers(0, 3, size=records) * tick
    bars["low"] = np.minimum(price, price + move) - rng.integers(0, 3, size=records) * tick
    bars["volume"] = rng.lognormal(5.0, 1.0, size=records).astype(np.uint64) + 1
    header = dbn.Metadata(
        dataset="GLBX.MDP3",
        start=_START_NS,
        stype_in=dbn.SType.RAW_SYMBOL,
        stype_out=dbn.SType.INSTRUMENT_ID,
        schema=dbn.Schema.OHLCV_1M,
        symbols=["ES", "NQ", "YM", "RTY", "CL", "GC", "ZN", "6E"],
        end=int(bars["ts_event"][-1]) + 60_000_000_000,
        version=3,
    ).encode()
    for i in (0, records // 2, records - 1):  # our numpy records == the official encoder's bytes
        b = bars[i]
        official = dbn.OHLCVMsg(
            0x21,
            1,
            int(b["instrument_id"]),
            int(b["ts_event"]),
            int(b["open"]),
            int(b["high"]),
            int(b["low"]),
            int(b["close"]),
            int(b["volume"]),
        )
        assert bytes(official) == b.tobytes(), f"record {i} differs from the official encoding"
    return header + bars.tobytes()


def _decode_official(raw: bytes, compressed: bool) -> int:
    decoder = dbn.DBNDecoder(
        upgrade_policy=dbn.VersionUpgradePolicy.AS_IS,
        compression=dbn.Compression.ZSTD if compressed else dbn.Compression.NONE,
    )
    return len(decoder.write_and_decode(raw)) - 1  # minus the metadata


def _interleaved(methods: dict[str, tuple[Callable[[], object], int]], rounds: int) -> dict[str, list[float]]:
    """Time each method once per round (a slow method only in its first ``reps`` rounds), rotating the order."""
    times: dict[str, list[float]] = {name: [] for name in methods}
    names = list(methods)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            fn, reps = methods[name]
            if r >= reps:
                continue
            gc.collect()
            t0 = time.perf_counter()
            result = fn()
            times[name].append(time.perf_counter() - t0)
            del result
    return times


def _peak_bytes(fn: Callable[[], object]) -> tuple[int, object]:
    """Peak Python/numpy heap allocated while ``fn`` runs and its result is alive (tracemalloc)."""
    gc.collect()
    tracemalloc.start()
    try:
        result = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="OHLCV-1m bars (default: 1,000,000)")
    parser.add_argument("--repeat", type=int, default=11, help="rounds for the fast methods (default: 11)")
    parser.add_argument("--slow-repeat", type=int, default=3, help="rounds for DBNDecoder (default: 3)")
    args = parser.parse_args(argv)

    raw = build_ohlcv_file(args.records)
    packed = zstandard.ZstdCompressor(level=3, write_checksum=True, write_content_size=False).compress(raw)
    with tempfile.TemporaryDirectory(prefix="perfgate-dbn-bench-") as tmp:
        plain_path, zst_path = Path(tmp) / "bars.dbn", Path(tmp) / "bars.dbn.zst"
        plain_path.write_bytes(raw)
        zst_path.write_bytes(packed)
        assert load_dbn(plain_path).record_count == load_dbn(zst_path).record_count == args.records
        assert _decode_official(raw, False) == args.records

        src = np.frombuffer(raw, dtype=np.uint8)
        dst = np.empty_like(src)
        dst[:] = src  # fault the destination in once: the floor is the copy, not the page faults
        methods: dict[str, tuple[Callable[[], object], int]] = {
            "plain: perfgate load_dbn (mmap view + validate every record)": (lambda: load_dbn(plain_path), args.repeat),
            "plain: perfgate load_dbn + ohlcv_arrays (float64 columns)": (
                lambda: ohlcv_arrays(load_dbn(plain_path)),
                args.repeat,
            ),
            "plain: memory copy of the same bytes, preallocated (floor)": (lambda: np.copyto(dst, src), args.repeat),
            "plain: memory copy into a fresh allocation": (lambda: src.copy(), args.repeat),
            "plain: databento_dbn DBNDecoder, all records": (lambda: _decode_official(raw, False), args.slow_repeat),
            "zstd: perfgate load_dbn (read + decompress + view + validate)": (
                lambda: load_dbn(zst_path),
                args.repeat,
            ),
            "zstd: decompression alone (bytes in memory)": (
                lambda: zstandard.ZstdDecompressor().decompressobj().decompress(packed),
                args.repeat,
            ),
            "zstd: databento_dbn DBNDecoder, all records": (lambda: _decode_official(packed, True), args.slow_repeat),
        }
        times = _interleaved(methods, max(args.repeat, args.slow_repeat))
        peak_plain, keep = _peak_bytes(lambda: load_dbn(plain_path))
        del keep
        peak_zstd, keep = _peak_bytes(lambda: load_dbn(zst_path))
        del keep

    median_ms = {name: statistics.median(t) * 1e3 for name, t in times.items()}
    record_mb = args.records * 56 / 1e6  # record bytes, header excluded
    print(
        f"\nDBN load benchmark: {args.records:,} OHLCV-1m bars, v3; .dbn {len(raw):,} B, .dbn.zst {len(packed):,} B "
        f"({len(raw) / len(packed):.1f}x); warm page cache; medians of interleaved rounds\n"
    )
    width = max(len(name) for name in methods)
    print(f"| {'method':<{width}} | {'n':>2} | {'min ms':>8} | {'median ms':>9} | {'Mrec/s':>7} | {'GB/s':>5} |")
    print(f"|{'-' * (width + 2)}|---:|---------:|----------:|--------:|------:|")
    for name, t in times.items():
        med = median_ms[name]
        print(
            f"| {name:<{width}} | {len(t):>2} | {min(t) * 1e3:8.2f} | {med:9.2f} | "
            f"{args.records / med / 1e3:7.1f} | {record_mb / med:5.2f} |"
        )
    names = list(methods)
    plain_ratio = median_ms[names[0]] / median_ms[names[2]]
    zstd_ratio = median_ms[names[5]] / median_ms[names[6]]
    print()
    for label, ratio, target in (
        ("plain load / memory copy", plain_ratio, 1.0),
        ("zstd load / decompression alone", zstd_ratio, 1.2),
    ):
        print(f"{label:<32} = {ratio:.2f}  (target <= {target:.2f}: {'met' if ratio <= target else 'MISSED'})")
    print(f"official DBNDecoder / perfgate (plain) = {median_ms[names[4]] / median_ms[names[0]]:.0f}x")
    print(
        f"peak extra heap per bar while loading (tracemalloc): plain {peak_plain / args.records:.2f} B, "
        f"zstd {peak_zstd / args.records:.2f} B (the 56 B/bar decompressed stream); the plain file's pages "
        "are the OS page cache, mapped, not copied"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
