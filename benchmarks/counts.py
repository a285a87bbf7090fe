"""perfgate bench --measure counts: spread between processes, wall time per run, A/A and injected changes.

    python benchmarks/counts.py [--models dqn ppo] [--repeats 1] [--out FOLDER]

Cases:

* a suite of the user's kind without torch (a numpy stage and a pure-Python stage), written to a
  temporary stages module; the injected changes (+0.5, +1, +2, +5 % of the Python stage's own
  loop) come from that module's environment, never from inside perfgate;
* the built-in pipeline's models given with ``--models`` (DQN and PPO by default): the wall time
  of a stored counts run of two processes (target <= 150 s) and an A/A check of two such runs.

Printed: per stage, the spread of each metric between the processes of a run (largest
|group median / first group median - 1|); wall time per run; for every comparison, the change
of each metric's counts and the verdict at --threshold 0.5 and 1. A benchmark, not a test: it
asserts nothing about times.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perfgate.core.compare import Verdict, compare_runs
from perfgate.core.policy import Policy
from perfgate.runfile import load_run

STAGES = """\
import os
import numpy as np
from perfgate.bench import stage

EXTRA = float(os.environ.get("COUNTS_EXTRA", "0"))

@stage("matmul", metric="matmul_time_ms", unit="ms", suite="tiny")
def matmul(ctx):
    a = np.random.default_rng(ctx.seed).random((64, 64))
    return lambda: np.tanh(a @ a)

@stage("loop", metric="loop_time_ms", unit="ms", suite="tiny")
def loop(ctx):
    n = round(40000 * (1 + EXTRA))
    def once():
        s = 0
        for i in range(n):
            s += i * i
        return s
    return once
"""
INJECTED = (0.005, 0.01, 0.02, 0.05)


def _bench(folder: Path, out: Path, args: list[str], extra: float = 0.0) -> float:
    env = {**os.environ, "COUNTS_EXTRA": str(extra)}
    argv = [sys.executable, "-m", "perfgate", "bench", *args, "--measure", "counts", "--output", str(out)]
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.strip()[-400:]}")
    return took


def _spread(path: Path) -> dict[str, float]:
    run = load_run(path)
    out = {}
    for name, metric in run.metrics.items():
        medians = [statistics.median(g) for g in metric.group_samples()]
        out[name] = max(abs(m / medians[0] - 1) for m in medians)
    return out


def _verdicts(base: Path, cur: Path) -> dict[str, tuple[float, str, str]]:
    b, c = load_run(base), load_run(cur)
    rows: dict[str, tuple[float, str, str]] = {}
    results = {t: compare_runs(b, c, Policy(threshold_pct=t)) for t in (0.5, 1.0)}
    for comp in results[1.0].comparisons:
        half = next(x for x in results[0.5].comparisons if x.metric == comp.metric)
        rows[comp.metric] = (comp.change or 0.0, half.verdict.value, comp.verdict.value)
    return rows


def _print_check(title: str, rows: dict[str, tuple[float, str, str]]) -> None:
    print(f"\n{title}")
    print(f"  {'metric':34} {'change':>9}  {'at 0.5 %':>12}  {'at 1 %':>12}")
    for name, (change, half, one) in sorted(rows.items()):
        print(f"  {name:34} {change:+9.3%}  {half:>12}  {one:>12}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="*", default=["dqn", "ppo"])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    folder = args.out or Path(tempfile.mkdtemp(prefix="perfgate-counts-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tinystages.py").write_text(STAGES)
    tiny = ["--suite", "tiny", "--stages-module", "tinystages", "--model", "x"]
    walls: dict[str, list[float]] = {}
    runs: dict[str, Path] = {}
    for label, extra in [("tiny", 0.0), ("tiny-aa", 0.0), *((f"tiny+{e:.1%}", e) for e in INJECTED)]:
        runs[label] = folder / f"{label}.json"
        walls.setdefault("tiny", []).append(_bench(folder, runs[label], tiny, extra))
    for model in args.models:
        for label in (model, f"{model}-aa"):
            runs[label] = folder / f"{label}.json"
            walls.setdefault(model, []).append(_bench(Path.cwd(), runs[label], ["--model", model]))
    print("wall time per stored counts run (2 processes), seconds")
    for case, seconds in walls.items():
        print(f"  {case:10} " + ", ".join(f"{s:.1f}" for s in seconds) + ("   target <= 150" if case != "tiny" else ""))
    print("\nspread between the processes of a run (largest |group median / first - 1|)")
    for label, path in runs.items():
        if label.endswith("-aa") or "+" in label:
            continue
        for name, spread in sorted(_spread(path).items()):
            print(f"  {label:6} {name:34} {spread:.4%}")
    for case in ["tiny", *args.models]:
        _print_check(f"A/A: {case}", _verdicts(runs[case], runs[f"{case}-aa"]))
    for e in INJECTED:
        _print_check(f"injected +{e:.1%} in the loop stage (tiny)", _verdicts(runs["tiny"], runs[f"tiny+{e:.1%}"]))
    json.dump({k: str(v) for k, v in runs.items()}, (folder / "runs.json").open("w"), indent=1, sort_keys=True)
    print(f"\nrun files in {folder}; Verdict values: {', '.join(v.value for v in Verdict)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
