"""False alarms and power of ``perfgate ab`` against checking a stored baseline, on this machine.

A temporary git repository holds a stages module with one stage, a numpy training step
(a two-layer MLP, forward, backward and an SGD update, ``STEPS`` steps per timed call, one
BLAS thread). Its baseline commit does 40 steps per call; one child commit per injected
slowdown X does X % more (41, 42, 43, 44 steps for 2.5, 5, 7.5, 10 %; X = 0 is an empty
commit). Three ways of checking each current commit against the baseline:

* **ab, paired** — ``perfgate ab``'s measurement (:func:`perfgate.bench.ab.measure_interleaved`,
  K pairs in ABBA order, fresh processes in git worktrees) and its paired test;
* **ab, unpaired** — the same measurements tested without the pairing (groups as
  independent repetitions): what the interleaving gains without the per-pair ratios;
* **stored baseline** — a baseline of K processes of the baseline commit recorded at the
  start of the script, the way a CI job keeps one, and the later runs checked against it
  with ``perfgate check``'s logic (unpaired): each single-process current run (one check per
  B process of an ab trial: the same processes, minutes after the baseline was recorded)
  and the K B processes of a trial combined (a ``--processes K`` run).

An alarm is a ``regressed`` verdict on the stage's metric (``step_time_ms``); at X = 0 it is
a false alarm, above 0 it is power (a true slowdown equal to the threshold is found about
half the time at best). The trials of the X values are interleaved round by round, so a
slow phase of the machine falls on all of them alike; rounds continue until ``--budget``
seconds are spent.

    python benchmarks/ab.py [--pairs 6] [--budget 420] [--baseline-processes 6]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perfgate.bench.ab import AbOptions, Revision, checkout, measure_interleaved, revision_bench  # noqa: E402
from perfgate.core.compare import Verdict, compare_runs  # noqa: E402
from perfgate.core.noise import combine_repetitions  # noqa: E402
from perfgate.core.policy import Policy  # noqa: E402
from perfgate.core.schema import Run  # noqa: E402

SLOWDOWNS = (0.0, 2.5, 5.0, 7.5, 10.0)
THRESHOLDS = (3.0, 5.0, 10.0)
BASE_STEPS = 40
METRIC = "step_time_ms"
MODES = ("ab, paired", "ab, unpaired", "stored, 1 process", "stored, K processes")

KERNEL = textwrap.dedent(
    '''\
    """A numpy training step (two-layer MLP, forward + backward + SGD), STEPS per timed call."""

    import numpy as np

    from perfgate.bench import stage

    STEPS = {steps}


    @stage("train_step", metric="step_time_ms", unit="ms", suite="abbench", repeat=20, warmup=3)
    def train_step(ctx):
        rng = np.random.default_rng(0)
        x = rng.standard_normal((64, 96)).astype(np.float32)
        y = rng.standard_normal((64, 8)).astype(np.float32)
        w1 = (rng.standard_normal((96, 96)) * 0.05).astype(np.float32)
        w2 = (rng.standard_normal((96, 8)) * 0.05).astype(np.float32)

        def once():
            for _ in range(STEPS):
                h = np.tanh(x @ w1)
                g = (h @ w2 - y) / len(x)
                gh = (g @ w2.T) * (1.0 - h * h)
                np.subtract(w2, 1e-3 * (h.T @ g), out=w2)
                np.subtract(w1, 1e-3 * (x.T @ gh), out=w1)

        return once
    '''
)


def git(repo: Path, *args: str) -> str:
    cmd = ["git", "-C", str(repo), "-c", "user.name=perfgate", "-c", "user.email=perfgate@example.invalid"]
    out = subprocess.run([*cmd, "-c", "commit.gpgsign=false", *args], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def make_repo(path: Path) -> tuple[str, dict[float, str]]:
    """The baseline commit and, per slowdown, a child commit doing that much more work."""
    git(path, "init", "-q", "-b", "main")
    (path / "abkernel.py").write_text(KERNEL.format(steps=BASE_STEPS))
    git(path, "add", "abkernel.py")
    git(path, "commit", "-q", "-m", "baseline")
    base = git(path, "rev-parse", "HEAD")
    commits = {}
    for x in SLOWDOWNS:
        git(path, "checkout", "-q", "--detach", base)
        steps = BASE_STEPS + round(BASE_STEPS * x / 100)
        (path / "abkernel.py").write_text(KERNEL.format(steps=steps))
        git(path, "commit", "-q", "--allow-empty", "-am", f"+{x:g} % work ({steps} steps)")
        commits[x] = git(path, "rev-parse", "HEAD")
    git(path, "checkout", "-q", "main")
    return base, commits


def verdict(baseline: Run, current: Run, threshold: float, paired: bool) -> tuple[Verdict, float | None]:
    """The stage metric's verdict and estimated change (direction-adjusted, + is slower)."""
    result = compare_runs(baseline, current, Policy(threshold_pct=threshold), paired=paired)
    c = next(c for c in result.comparisons if c.metric == METRIC)
    return c.verdict, c.worse


def record_baseline(rev: Revision, options: AbOptions, processes: int, workdir: Path) -> Run:
    bench = revision_bench(rev, options, "baseline")
    runs = [bench.measure(workdir / f"stored-{i}.json", what=f"stored baseline {i + 1}") for i in range(processes)]
    return combine_repetitions(runs, run_id="stored-baseline")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--pairs", type=int, default=6, help="pairs per ab trial (default 6, perfgate ab's)")
    parser.add_argument("--baseline-processes", type=int, default=6, help="processes of the stored baseline")
    parser.add_argument("--budget", type=float, default=420.0, help="seconds of trials after the baseline")
    parser.add_argument("--max-rounds", type=int, default=1000, help="stop after this many rounds")
    parser.add_argument("--seed", type=int, default=0, help="seed of the per-round order of the slowdowns")
    parser.add_argument("--python", default=sys.executable, help="interpreter of the measuring processes")
    args = parser.parse_args(argv)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"  # one BLAS thread, as in the research note; the processes inherit it
    options = AbOptions(
        model="dqn", suite="abbench", pairs=args.pairs, stages_modules=("abkernel",), python=args.python
    )
    rng = random.Random(args.seed)
    # tally[threshold][mode][x] = [alarms, inconclusive, checks]; estimates[mode][x] = estimated changes
    tally: dict[float, dict[str, dict[float, list[int]]]] = {
        t: {m: defaultdict(lambda: [0, 0, 0]) for m in MODES} for t in THRESHOLDS
    }
    estimates: dict[str, dict[float, list[float]]] = {m: defaultdict(list) for m in MODES}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="perfgate-abbench-") as tmp, contextlib.ExitStack() as stack:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        base, commits = make_repo(repo)
        sides = {x: stack.enter_context(checkout(repo, base, commits[x])) for x in SLOWDOWNS}
        t_stored = time.perf_counter()
        stored = record_baseline(sides[0.0][0], options, args.baseline_processes, Path(tmp))
        print(f"stored baseline: {args.baseline_processes} processes in {time.perf_counter() - t_stored:.0f} s")
        trials_started = time.perf_counter()
        rounds = 0
        gaps: list[float] = []
        while rounds < args.max_rounds and (rounds == 0 or time.perf_counter() - trials_started < args.budget):
            order = list(SLOWDOWNS)
            rng.shuffle(order)
            for x in order:
                ab = measure_interleaved(*sides[x], options, run_id=f"r{rounds}-x{x:g}")
                gaps.append((time.perf_counter() - t_stored) / 60.0)
                combined = combine_repetitions(ab.current_runs)
                checks = {
                    "ab, paired": [(ab.baseline, ab.current, True)],
                    "ab, unpaired": [(ab.baseline, ab.current, False)],
                    "stored, 1 process": [(stored, r, False) for r in ab.current_runs],
                    "stored, K processes": [(stored, combined, False)],
                }
                for mode, pairs in checks.items():
                    for t in THRESHOLDS:
                        for base_run, cur_run, paired in pairs:
                            v, worse = verdict(base_run, cur_run, t, paired)
                            cell = tally[t][mode][x]
                            cell[0] += v is Verdict.REGRESSED
                            cell[1] += v is Verdict.INCONCLUSIVE
                            cell[2] += 1
                            if t == THRESHOLDS[0] and worse is not None:
                                estimates[mode][x].append(worse)
            rounds += 1
            print(f"round {rounds} done at {time.perf_counter() - started:.0f} s", flush=True)
    elapsed = time.perf_counter() - started
    print()
    print(
        f"{rounds} round(s) in {elapsed:.0f} s: per slowdown {rounds} ab trial(s) of {args.pairs} pairs "
        f"({2 * args.pairs * rounds} processes); stored baseline of {args.baseline_processes} processes, "
        f"checked {min(gaps):.1f}–{max(gaps):.1f} min after it was recorded; K = {args.pairs}"
    )
    print(f"alarm = '{METRIC}' regressed; +0 % is the false-alarm rate, the rest is power")
    header = f"{'mode':<22}" + "".join(f"{f'+{x:g} %':>16}" for x in SLOWDOWNS)
    for t in THRESHOLDS:
        print()
        print(f"threshold {t:g} %: alarm rate (alarms/checks), then the share inconclusive")
        print(header)
        for mode in MODES:
            alarm, unsure = [], []
            for x in SLOWDOWNS:
                hit, inconclusive, n = tally[t][mode][x]
                alarm.append(f"{hit / n:.0%} ({hit}/{n})")
                unsure.append(f"{inconclusive / n:.0%}")
            print(f"{mode:<22}" + "".join(f"{c:>16}" for c in alarm))
            print(f"{'  inconclusive':<22}" + "".join(f"{c:>16}" for c in unsure))
    print()
    print("estimated slowdown: median [10th–90th percentile] over the checks")
    print(header)
    for mode in MODES:
        cells = []
        for x in SLOWDOWNS:
            e = np.array(estimates[mode][x]) * 100
            cells.append(f"{np.median(e):+.1f} [{np.percentile(e, 10):+.0f},{np.percentile(e, 90):+.0f}]")
        print(f"{mode:<22}" + "".join(f"{c:>16}" for c in cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
