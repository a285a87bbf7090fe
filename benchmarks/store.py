"""Benchmark: the result store at CI scale, SQLite and PostgreSQL.

Fills a fresh store with ``--runs`` runs (default 20,000; the full size is 100,000) of
``--metrics`` metrics x ``--samples`` samples each (default 7 x 50), spread over 4 models x
2 machines, 90 % on main, in batches of ``--batch`` runs per transaction; then times:

* **insert**: runs per second over the whole fill;
* **baseline lookup**: what ``perfgate check --store`` does for one run (``baseline_for``):
  the stored baseline of its key (after ``baseline update``, K = 10) and, before that, the
  pooled last K unflagged runs; the median and p95 of ``--queries`` lookups, each for a
  different key and run;
* **series**: a 1,000-point ``series()`` of one metric of one model on one machine;
* ``baseline update`` of every key, once.

Targets: baseline lookup under 50 ms at 100,000 runs on both backends.

PostgreSQL is the server at ``--pg-url``, or a throwaway one started here as in the tests
(``tests/store/pg_server.py``: initdb/pg_ctl on a free port, durability settings off).

    .venv/bin/python benchmarks/store.py [--runs N] [--backends sqlite,postgresql] [--pg-url URL]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from perfgate.core.metrics import known_metrics  # noqa: E402
from perfgate.core.schema import GitInfo, Machine, Metric, Run  # noqa: E402
from perfgate.store import open_store  # noqa: E402
from perfgate.store.base import Store  # noqa: E402
from perfgate.store.baseline import baseline_for, update_baselines  # noqa: E402

__all__ = ["main", "synthetic_runs"]

MODELS = ("dqn", "ppo", "mamba2", "tft")
MACHINES = ("machine-a", "machine-b")
_T0 = 1_780_000_000  # seconds; runs are one minute apart


def _stamp(i: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(_T0 + 60 * i))


def synthetic_runs(count: int, metrics: int, samples: int, *, batch: int, seed: int = 0) -> Iterator[list[Run]]:
    """Batches of runs: model and machine round-robin, 90 % on main, log-normal samples."""
    rng = np.random.default_rng(seed)
    names = list(known_metrics())[:metrics]
    for start in range(0, count, batch):
        out = []
        for i in range(start, min(start + batch, count)):
            key = i % (len(MODELS) * len(MACHINES))
            model, machine = MODELS[key % len(MODELS)], MACHINES[key // len(MODELS)]
            values = rng.lognormal(0.0, 0.05, (len(names), samples)) * 100.0
            out.append(
                Run(
                    model=model,
                    run_id=f"bench-{i:07d}",
                    created_at=_stamp(i),
                    git=GitInfo(commit=f"{i:040x}", branch="main" if rng.random() < 0.9 else f"pr-{i % 97}"),
                    machine=Machine(fingerprint=machine, details={"cpu": "bench", "cores": 2}),
                    metrics={
                        name: Metric(
                            name=name,
                            unit=known_metrics()[name].unit,
                            direction=known_metrics()[name].direction,
                            samples=tuple(values[j].tolist()),
                        )
                        for j, name in enumerate(names)
                    },
                )
            )
        yield out


def _timed(fn: Callable[[], object], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def _ms(times: list[float]) -> tuple[float, float]:
    ordered = sorted(times)
    return statistics.median(ordered) * 1e3, ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] * 1e3


def bench_backend(url: str, args: argparse.Namespace) -> dict[str, object]:
    store: Store = open_store(url)
    try:
        insert_s = 0.0  # only the add_runs calls count, not making the runs
        for runs in synthetic_runs(args.runs, args.metrics, args.samples, batch=args.batch):
            t0 = time.perf_counter()
            store.add_runs(runs)
            insert_s += time.perf_counter() - t0
        keys = [(m, fp) for fp in MACHINES for m in MODELS]
        probes = [
            Run(
                model=model,
                run_id=f"probe-{j}",
                machine=Machine(fingerprint=fp),
                metrics=_one_metric(),
            )
            for j, (model, fp) in enumerate(keys * (args.queries // len(keys) + 1))
        ][: args.queries]
        it = iter(probes)
        pooled = _timed(lambda: baseline_for(store, next(it), k=10), args.queries)
        t0 = time.perf_counter()
        update_baselines(store, created_at=_stamp(args.runs + 1), k=10)
        update_s = time.perf_counter() - t0
        it = iter(probes)
        stored = _timed(lambda: baseline_for(store, next(it), k=10), args.queries)
        points = []
        series = _timed(
            lambda: points.append(store.series("dqn", "machine-a", "training_step_time_ms", limit=1000)),
            args.queries,
        )
        return {
            "insert_runs_per_s": args.runs / insert_s,
            "insert_s": insert_s,
            "pooled": _ms(pooled),
            "stored": _ms(stored),
            "series": _ms(series),
            "series_points": len(points[0]),
            "update_s": update_s,
        }
    finally:
        store.close()


def _one_metric() -> dict[str, Metric]:
    info = known_metrics()["training_step_time_ms"]
    return {
        "training_step_time_ms": Metric(
            name="training_step_time_ms", unit=info.unit, direction=info.direction, samples=(100.0,)
        )
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--metrics", type=int, default=7)
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--batch", type=int, default=500, help="runs per add_runs transaction")
    parser.add_argument("--queries", type=int, default=40, help="lookups and series queries timed")
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--pg-url", default=None, help="an empty PostgreSQL database (default: start one here)")
    args = parser.parse_args(argv)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    results: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory(prefix="perfgate-bench-") as tmp:
        for backend in backends:
            print(f"{backend}: {args.runs:,} runs x {args.metrics} metrics x {args.samples} samples ...", flush=True)
            if backend == "sqlite":
                path = Path(tmp) / "bench.db"
                results[backend] = bench_backend(f"sqlite:///{path}", args)
                results[backend]["size_mb"] = sum(p.stat().st_size for p in Path(tmp).glob("bench.db*")) / 2**20
            elif backend == "postgresql":
                if args.pg_url:
                    results[backend] = bench_backend(args.pg_url, args)
                else:
                    from tests.store.pg_server import TempPostgres

                    server = TempPostgres()
                    server.start()
                    try:
                        results[backend] = bench_backend(server.create_database("bench"), args)
                        size = server._admin.execute("SELECT pg_database_size('bench')").fetchone()[0]  # type: ignore[union-attr]
                        results[backend]["size_mb"] = size / 2**20
                    finally:
                        server.stop()
            else:
                parser.error(f"unknown backend {backend!r}")
    print()
    print(
        f"{args.runs:,} runs x {args.metrics} metrics x {args.samples} samples; times: median (p95) of {args.queries}"
    )
    header = (
        f"{'backend':<11} {'insert runs/s':>13} {'baseline (stored)':>18} {'baseline (pooled)':>18} "
        f"{'series 1000 pts':>16} {'update all':>11} {'size MB':>8}"
    )
    print(header)
    print("-" * len(header))
    for backend, r in results.items():
        stored, pooled, series = r["stored"], r["pooled"], r["series"]
        print(
            f"{backend:<11} {r['insert_runs_per_s']:>13,.0f} "
            f"{stored[0]:>8.1f} ({stored[1]:>5.1f}) ms {pooled[0]:>7.1f} ({pooled[1]:>5.1f}) ms "  # type: ignore[index]
            f"{series[0]:>6.1f} ({series[1]:>4.1f}) ms {r['update_s']:>9.2f} s {r['size_mb']:>8.0f}"  # type: ignore[index]
        )
    worst = max(max(r["stored"][0], r["pooled"][0]) for r in results.values())  # type: ignore[index]
    print(f"\ntarget: baseline lookup < 50 ms; worst median {worst:.1f} ms: {'met' if worst < 50 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
