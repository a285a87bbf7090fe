"""Benchmark: making 1,000,000 synthetic records in memory and writing them as DBN files.

For each schema: ``synthesize_*`` alone (numpy arrays in memory), then
``write_synthetic`` to ``.dbn`` and to ``.dbn.zst`` in a temporary directory. The write
includes the fsync that makes the atomic replace durable. Rounds are interleaved and
medians reported. One decode of each written file by ``databento_dbn`` is checked for
its record count first (untimed).

    .venv/bin/python benchmarks/synth.py [--records N] [--repeat R]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import databento_dbn as dbn

from perfgate_pipeline.synth import SCHEMAS, synthesize_mbp1, synthesize_ohlcv, synthesize_trades, write_synthetic

__all__ = ["main"]

_MAKERS = {"ohlcv-1m": synthesize_ohlcv, "trades": synthesize_trades, "mbp-1": synthesize_mbp1}


def _check(path: Path, records: int) -> None:
    decoder = dbn.DBNDecoder(compression=dbn.Compression.ZSTD if path.suffix == ".zst" else dbn.Compression.NONE)
    with path.open("rb") as f:
        while chunk := f.read(1 << 24):
            decoder.write(chunk)
    count = len(decoder.decode()) - 1
    if count != records:
        raise SystemExit(f"{path}: databento_dbn decoded {count} records, expected {records}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    n = args.records
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        jobs: dict[str, Callable[[], object]] = {}
        sizes: dict[str, int] = {}
        for schema in SCHEMAS:
            jobs[f"{schema} in memory"] = lambda s=schema: _MAKERS[s](n, 0)
            for suffix in (".dbn", ".dbn.zst"):
                path = Path(tmp) / f"{schema}{suffix}"
                jobs[f"{schema} -> {suffix}"] = lambda s=schema, p=path: write_synthetic(p, schema=s, records=n, seed=0)
        for job in jobs.values():  # warm-up (numba compiles the GARCH loop once) and checks
            job()
        for schema in SCHEMAS:
            for suffix in (".dbn", ".dbn.zst"):
                path = Path(tmp) / f"{schema}{suffix}"
                _check(path, n)
                sizes[f"{schema} -> {suffix}"] = path.stat().st_size
        times: dict[str, list[float]] = {name: [] for name in jobs}
        names = list(jobs)
        for r in range(args.repeat):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                gc.collect()
                t0 = time.perf_counter()
                jobs[name]()
                times[name].append(time.perf_counter() - t0)
    print(f"\n{n:,} records, {args.repeat} interleaved rounds")
    print("| what | median s | min s | Mrec/s | file MB |\n|---|---:|---:|---:|---:|")
    for name in names:
        med = statistics.median(times[name])
        size = f"{sizes[name] / 1e6:.1f}" if name in sizes else "-"
        print(f"| {name} | {med:.3f} | {min(times[name]):.3f} | {n / med / 1e6:.2f} | {size} |")
    print(f"\nload average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
