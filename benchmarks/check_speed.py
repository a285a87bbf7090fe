"""Speed of one unpaired check of many metrics: the vectorised statistics against the reference path.

Builds a synthetic baseline and current run of M lower-is-better metrics × N log-normal
samples each (every 50th metric 30 % slower), then times :func:`perfgate.core.compare.compare_runs`
with the per-metric statistics computed at once (``vectorised=True``, the default) and one
metric at a time (``vectorised=False``, the reference), and checks that both reach the same
verdicts. The policy is the quiet-machine one (:meth:`~perfgate.core.policy.Policy.quiet`: the
simulated samples carry no run-to-run noise), so the slowed metrics regress; ``--assumed-noise``
uses the default policy instead, whose assumed noise no 30 % change overcomes after Holm over
thousands of metrics. Start-up (imports) is not included: see ``benchmarks/startup.py``.

Usage: ``python benchmarks/check_speed.py [--sizes 100x100,1000x100,5000x100] [--repeat 3] [--assumed-noise]``.
Prints a table: metrics × samples, reference s, vectorised s, ratio (best of ``--repeat``).
"""

from __future__ import annotations

import argparse
import functools
import math
import time
from collections.abc import Callable

import numpy as np

from perfgate.core.compare import compare_runs
from perfgate.core.metrics import Direction
from perfgate.core.policy import Policy
from perfgate.core.schema import Metric, Run


def synthetic_run(seed: int, metrics: int, samples: int, slower: float = 0.0) -> Run:
    """M metrics of N log-normal samples (CV about 10 %); every 50th is ``slower`` times slower."""
    rng = np.random.default_rng(seed)
    out = {}
    for i in range(metrics):
        name = f"stage_{i:05d}_time_ms"
        factor = 1.0 + (slower if i % 50 == 0 else 0.0)
        values = rng.lognormal(math.log(5.0 + i % 13), 0.1, samples) * factor
        out[name] = Metric(name=name, unit="ms", direction=Direction.LOWER, samples=tuple(float(v) for v in values))
    return Run(model="synthetic", metrics=out)


def _best(fn: Callable[[], object], repeat: int) -> float:
    best = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100x100,1000x100,5000x100", help="comma-separated MxN")
    parser.add_argument("--repeat", type=int, default=3, help="timings per path; the best is shown")
    parser.add_argument("--assumed-noise", action="store_true", help="the default policy, not the quiet one")
    args = parser.parse_args(argv)
    policy = Policy() if args.assumed_noise else Policy.quiet()
    print(f"{'metrics':>8} × {'samples':<8} {'reference s':>12} {'vectorised s':>13} {'ratio':>7}  verdicts")
    for size in args.sizes.split(","):
        m, n = (int(x) for x in size.lower().split("x"))
        base, cur = synthetic_run(1, m, n), synthetic_run(2, m, n, slower=0.3)
        fast = compare_runs(base, cur, policy)
        ref = compare_runs(base, cur, policy, vectorised=False)
        same = [c.verdict for c in fast.comparisons] == [c.verdict for c in ref.comparisons]
        t_ref = _best(functools.partial(compare_runs, base, cur, policy, vectorised=False), args.repeat)
        t_fast = _best(functools.partial(compare_runs, base, cur, policy), args.repeat)
        print(
            f"{m:>8} × {n:<8} {t_ref:>12.3f} {t_fast:>13.3f} {t_ref / t_fast:>6.1f}×  "
            f"{'same' if same else 'DIFFERENT'} ({len(fast.regressions)} regressed)"
        )
        if not same:
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
