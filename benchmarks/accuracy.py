"""The gate's own accuracy on real runs of ``perfgate bench`` on this machine.

A/A: the real benchmark of one model on unchanged code, run many times in separate
processes spread over time (optionally with a busy loop loading the other core); every
later run is checked against the first runs as a stored baseline, and we count checks that
raise any alarm. A/B: the same, with a known slowdown injected into one stage from this
script — a stages module, imported by ``perfgate bench --stages-module``, that wraps the
registered stage and adds a calibrated amount of extra compute after each call — at 0.5×,
1×, 1.5× and 2× the threshold. The product's own code path has no switch for it.

For each threshold (3, 5, 10 %) the table gives the false-alarm rate (A/A checks with any
regression) and the power (A/B checks where the slowed metric regressed), for perfgate's
rule on runs of several worker processes, perfgate's rule on single-process runs, and the
seed's rule (median over the threshold, no statistics) on the same runs.

    python benchmarks/accuracy.py --model dqn --aa 10 --ab 3 --processes 3 [--background-load]
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perfgate.core.compare import compare_runs  # noqa: E402
from perfgate.core.metrics import Direction  # noqa: E402
from perfgate.core.policy import Policy  # noqa: E402
from perfgate.core.schema import Metric, Run  # noqa: E402
from perfgate.runfile import load_run  # noqa: E402

INJECT = textwrap.dedent(
    """
    # Written by benchmarks/accuracy.py: slows one registered stage by a fixed fraction.
    import dataclasses, os, time
    import numpy as np
    import perfgate.pipeline.stages  # noqa: F401  (registers the pipeline)
    from perfgate.bench import registry

    FACTOR = float(os.environ["PERFGATE_ACCURACY_SLOWDOWN"])
    STAGE = os.environ["PERFGATE_ACCURACY_STAGE"]
    original = next(s for (suite, name), s in registry._REGISTRY.items() if name == STAGE)
    _a = np.random.default_rng(0).standard_normal((48, 48))

    def _kernel(n):
        x = _a
        for _ in range(n):
            x = np.tanh(x @ _a * 0.01)
        return x

    def setup(ctx):
        call = original.setup(ctx)
        for _ in range(3):
            call()
        t = []
        for _ in range(9):
            t0 = time.perf_counter(); call(); t.append(time.perf_counter() - t0)
        nominal = sorted(t)[4]
        t0 = time.perf_counter(); _kernel(200); per_iter = (time.perf_counter() - t0) / 200
        iters = max(1, round(FACTOR * nominal / per_iter))

        def once():
            out = call()
            _kernel(iters)
            return out

        return once

    registry.register(dataclasses.replace(original, setup=setup))
    """
)


def _busy() -> None:  # pragma: no cover - a load generator
    x = 0
    while True:
        x = (x * 1103515245 + 12345) % 2**31


def bench(model: str, out: Path, processes: int, quick: bool, env: dict[str, str] | None, module: Path | None) -> Run:
    cmd = [sys.executable, "-m", "perfgate", "bench", "--model", model, "--output", str(out),
           "--processes", str(processes)]
    if quick:
        cmd.append("--quick")
    if module is not None:
        cmd += ["--stages-module", module.stem]
    full_env = {**os.environ, **(env or {}), "PYTHONPATH": f"{module.parent if module else ''}:{ROOT}"}
    subprocess.run(cmd, check=True, capture_output=True, text=True, env=full_env, cwd=ROOT)
    return load_run(out)


def single_process(run: Run, index: int) -> Run:
    """The first worker process of a multi-process run, as if it had been run alone."""
    metrics = {}
    for name, m in run.metrics.items():
        groups = m.group_samples()
        g = groups[min(index, len(groups) - 1)]
        metrics[name] = Metric(name=name, unit=m.unit, direction=m.direction, samples=g)
    return Run(model=run.model, metrics=metrics, machine=run.machine, run_id=f"{run.run_id}-p{index}")


def seed_rule(base: Run, cur: Run, threshold: float) -> set[str]:
    hits = set()
    for name, c in cur.metrics.items():
        b = base.metrics.get(name)
        if b is None or c.direction is Direction.INFO:
            continue
        mb, mc = float(np.median(b.samples)), float(np.median(c.samples))
        if mb <= 0:
            continue
        worse = mc / mb - 1 if c.direction is Direction.LOWER else 1 - mc / mb
        if worse > threshold / 100:
            hits.add(name)
    return hits


def perfgate_rule(base: Run, cur: Run, threshold: float) -> set[str]:
    result = compare_runs(base, cur, Policy(threshold_pct=threshold))
    return {c.metric for c in result.regressions}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="dqn")
    parser.add_argument("--aa", type=int, default=8, help="unchanged runs")
    parser.add_argument("--ab", type=int, default=3, help="runs per injected slowdown")
    parser.add_argument("--processes", type=int, default=3, help="worker processes per run")
    parser.add_argument("--stage", default="features", help="stage to slow down")
    parser.add_argument("--metric", default="feature_extraction_time_ms", help="the stage's metric")
    parser.add_argument("--baselines", type=int, default=2, help="first A runs used as stored baselines")
    parser.add_argument("--quick", action="store_true", help="bench --quick (smoke test of this script)")
    parser.add_argument("--slowdowns", default="2.5,5,7.5,10,15,20",
                        help="injected slowdowns in percent of the stage time (0.5x-2x of the 5 and 10 %% thresholds)")
    parser.add_argument("--background-load", action="store_true", help="keep one core busy throughout")
    args = parser.parse_args()

    loader = None
    if args.background_load:
        loader = multiprocessing.Process(target=_busy, daemon=True)
        loader.start()
    started = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            module = Path(tmp) / "perfgate_accuracy_inject.py"
            module.write_text(INJECT)
            a_runs, b_runs = [], {}
            factors = tuple(float(v) / 100 for v in args.slowdowns.split(","))
            # interleave A and B runs over time so drift hits both alike
            plan = [("A", 0.0)] * args.aa + [("B", f) for f in factors for _ in range(args.ab)]
            order = np.random.default_rng(0).permutation(len(plan))
            baseline_first = [i for i in order if plan[i][0] == "A"][: args.baselines]
            order = baseline_first + [i for i in order if i not in baseline_first]
            for k, i in enumerate(order):
                kind, factor = plan[i]
                out = Path(tmp) / f"run{k}.json"
                # B runs inject factor x threshold: resolved per threshold below by scaling the slowdown
                env = {"PERFGATE_ACCURACY_SLOWDOWN": str(factor), "PERFGATE_ACCURACY_STAGE": args.stage}
                run = bench(args.model, out, args.processes, args.quick, env if kind == "B" else None,
                            module if kind == "B" else None)
                (a_runs if kind == "A" else b_runs.setdefault(factor, [])).append(run)
                print(f"  run {k + 1}/{len(plan)}: {kind} {factor:g} ({time.perf_counter() - started:.0f} s)",
                      file=sys.stderr)
            baselines, a_rest = a_runs[: args.baselines], a_runs[args.baselines :]
            print(f"\nmodel {args.model}, {args.processes} worker processes per run, {len(a_rest)} A/A runs x "
                  f"{len(baselines)} stored baselines, {args.ab} runs per slowdown, slowed stage {args.stage}, "
                  f"background load {'on' if args.background_load else 'off'}, "
                  f"{time.perf_counter() - started:.0f} s")
            print("columns: power at each injected slowdown of the stage (percent of its time)\n")
            header = f"{'threshold':>9} {'rule':<24} {'false alarms':>12} " + " ".join(
                f"{'+' + format(f * 100, 'g') + '%':>7}" for f in factors)
            print(header)
            rules = [
                ("perfgate, processes", lambda b, c, t: perfgate_rule(b, c, t), lambda r: r),
                ("perfgate, 1 process", lambda b, c, t: perfgate_rule(b, c, t), lambda r: single_process(r, 0)),
                ("seed rule, 1 process", lambda b, c, t: seed_rule(b, c, t), lambda r: single_process(r, 0)),
            ]
            for threshold in (3.0, 5.0, 10.0):
                for label, rule, view in rules:
                    pairs = list(itertools.product(baselines, a_rest))
                    alarms = sum(bool(rule(view(b), view(c), threshold)) for b, c in pairs)
                    cells = []
                    for f in factors:
                        bp = list(itertools.product(baselines, b_runs.get(f, [])))
                        hit = sum(args.metric in rule(view(b), view(c), threshold) for b, c in bp)
                        cells.append(f"{hit / len(bp):7.0%}" if bp else f"{'—':>7}")
                    print(f"{threshold:>8g}% {label:<24} {alarms / max(len(pairs), 1):>12.0%} " + " ".join(cells))
    finally:
        if loader is not None:
            loader.terminate()


if __name__ == "__main__":
    main()
