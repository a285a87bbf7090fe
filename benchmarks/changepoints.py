"""Benchmark: change-point methods on synthetic histories with steps at known places (goal G9).

Methods: perfgate's ``seeded`` (the default), ``binseg`` and ``edivisive``
(:mod:`perfgate.core.changepoints`, one significance rule: Bonferroni-corrected t-test at
alpha 0.001), and, when the ``ruptures`` package is installed, its PELT and binary
segmentation with an L2 cost and a BIC penalty ``2 log(n) sigma^2`` (sigma from the MAD of
first differences), ``min_size`` 3, ``jump`` 1.

Scenarios, each ``--series`` seeded series of ``--length`` points (default 200 x 200):

* ``steps``: normal noise, 1-3 steps of 3-6 sigma (random sign) at random places, >= 15 apart;
* ``lognormal``: the same steps on multiplicative log-normal noise (CoV 5 %), as timings are;
* ``bumps``: a regression of 3-6 sigma reverted 8-30 points later (two change points);
* ``null``: no change at all; the share of series with any change point is the false-alarm rate;
* ``drift``: 50 flat points, then ten consecutive +1 % steps, noise CoV 1 %: the share of
  series where a change point falls inside the ramp (+-2).

Precision and recall count a detection within +-2 points of a true change (each true
change matched at most once). Run time is for ``--timing-series`` series of
``--timing-length`` points (default 100 x 1,000) with a step every 100 points; ruptures'
PELT is timed on 5 series and scaled (it is O(n^2) here).

    .venv/bin/python benchmarks/changepoints.py [--series N] [--length N] [--seed S]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from perfgate.core.changepoints import METHODS, detect  # noqa: E402

__all__ = ["main"]

Detector = Callable[[np.ndarray], list[int]]
TOLERANCE = 2


def _ours(method: str) -> Detector:
    return lambda x: [c.index for c in detect(x, method=method)]


def _ruptures(kind: str) -> Detector | None:
    try:
        import ruptures
    except ImportError:
        return None
    algo = {"pelt": ruptures.Pelt, "binseg": ruptures.Binseg}[kind]

    def run(x: np.ndarray) -> list[int]:
        sigma = float(np.median(np.abs(np.diff(x)))) / 0.6745 / np.sqrt(2.0)
        penalty = 2.0 * np.log(x.size) * max(sigma, 1e-12) ** 2
        ends = algo(model="l2", min_size=3, jump=1).fit(x).predict(pen=penalty)
        return [int(e) for e in ends[:-1]]  # ruptures lists segment ends, the last being n

    return run


def _random_places(rng: np.random.Generator, n: int, count: int, gap: int) -> list[int]:
    while True:
        where = sorted(int(v) for v in rng.choice(np.arange(gap, n - gap), size=count, replace=False))
        if all(b - a >= gap for a, b in itertools.pairwise(where)):
            return where


def scenario(name: str, rng: np.random.Generator, n: int) -> tuple[np.ndarray, list[int]]:
    if name in ("steps", "lognormal"):
        where = _random_places(rng, n, int(rng.integers(1, 4)), 15)
        level = np.zeros(n)
        for w in where:
            level[w:] += rng.choice([-1.0, 1.0]) * rng.uniform(3.0, 6.0)
        if name == "steps":
            return 100.0 + level + rng.normal(0.0, 1.0, n), where
        cov = 0.05  # steps in units of the noise's sigma, applied in log space
        return 100.0 * np.exp(cov * level + rng.normal(0.0, cov, n)), where
    if name == "bumps":
        start = int(rng.integers(20, n - 50))
        width = int(rng.integers(8, 31))
        level = np.zeros(n)
        level[start : start + width] = rng.choice([-1.0, 1.0]) * rng.uniform(3.0, 6.0)
        return 100.0 + level + rng.normal(0.0, 1.0, n), [start, start + width]
    if name == "null":
        return 100.0 + rng.normal(0.0, 1.0, n), []
    if name == "drift":
        level = np.r_[np.full(50, 100.0), 100.0 * 1.01 ** np.arange(1, 11), np.full(max(n - 60, 0), 110.46)]
        return level[:n] * rng.lognormal(0.0, 0.01, n), list(range(50, 60))
    raise ValueError(name)


def score(found: list[int], truth: list[int]) -> tuple[int, int, int]:
    """(hits, detections, true changes); each true change is matched at most once."""
    unmatched = list(found)
    hits = 0
    for t in truth:
        near = [f for f in unmatched if abs(f - t) <= TOLERANCE]
        if near:
            unmatched.remove(min(near, key=lambda f: abs(f - t)))
            hits += 1
    return hits, len(found), len(truth)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=200)
    parser.add_argument("--length", type=int, default=200)
    parser.add_argument("--timing-series", type=int, default=100)
    parser.add_argument("--timing-length", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=20261129)
    args = parser.parse_args(argv)

    methods: dict[str, Detector] = {m: _ours(m) for m in METHODS}
    for kind in ("pelt", "binseg"):
        found = _ruptures(kind)
        if found is not None:
            methods[f"ruptures-{kind}"] = found
    if len(methods) == len(METHODS):
        print("(ruptures is not installed: comparing perfgate's own methods only)")

    rows = []
    for name, fn in methods.items():
        row: dict[str, float] = {}
        for sc in ("steps", "lognormal", "bumps"):
            rng = np.random.default_rng(args.seed)
            hits = found = truth = 0
            for _ in range(args.series):
                x, where = scenario(sc, rng, args.length)
                h, f, t = score(fn(x), where)
                hits, found, truth = hits + h, found + f, truth + t
            row[f"{sc}_p"] = hits / found if found else 1.0
            row[f"{sc}_r"] = hits / truth
        rng = np.random.default_rng(args.seed)
        row["null_fa"] = sum(bool(fn(scenario("null", rng, args.length)[0])) for _ in range(args.series)) / args.series
        rng = np.random.default_rng(args.seed)
        drift = 0
        for _ in range(args.series):
            x, ramp = scenario("drift", rng, args.length)
            drift += any(ramp[0] - TOLERANCE <= f <= ramp[-1] + TOLERANCE for f in fn(x))
        row["drift"] = drift / args.series
        timing_rng = np.random.default_rng(args.seed + 1)
        count = args.timing_series if name != "ruptures-pelt" else min(5, args.timing_series)
        series = [
            100.0
            + np.repeat(timing_rng.normal(0.0, 3.0, args.timing_length // 100 + 1), 100)[: args.timing_length]
            + timing_rng.normal(0.0, 1.0, args.timing_length)
            for _ in range(count)
        ]
        t0 = time.perf_counter()
        for x in series:
            fn(x)
        row["time"] = (time.perf_counter() - t0) * args.timing_series / count
        row["scaled"] = float(count != args.timing_series)
        rows.append((name, row))
        print(f"  {name} done", flush=True)

    print()
    print(f"{args.series} series x {args.length} points per scenario (seed {args.seed}); hit: within +-{TOLERANCE}")
    header = (
        f"{'method':<16} {'steps P':>7} {'steps R':>7} {'logn P':>7} {'logn R':>7} {'bumps P':>7} {'bumps R':>7}"
        f" {'null FA':>7} {'drift':>6} {f'time {args.timing_series}x{args.timing_length}':>16}"
    )
    print(header)
    print("-" * len(header))
    for name, r in rows:
        scaled = " (scaled)" if r["scaled"] else ""
        print(
            f"{name:<16} {r['steps_p']:>7.3f} {r['steps_r']:>7.3f} {r['lognormal_p']:>7.3f} {r['lognormal_r']:>7.3f}"
            f" {r['bumps_p']:>7.3f} {r['bumps_r']:>7.3f} {r['null_fa']:>7.3f} {r['drift']:>6.2f}"
            f" {r['time']:>7.2f} s{scaled}"
        )
    print(
        "\ntargets (G9): precision >= 0.9 and recall >= 0.9 on steps >= 3 sigma; drift found; < 1 s for the timing set"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
