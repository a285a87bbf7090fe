"""How to estimate one pair's change of a stage whose blocks hold one call (a training step of a second).

``perfgate ab`` times such a stage in blocks of one call, at least 8 a side and pair, and takes one
log ratio per pair to a t test across pairs (``perfgate/core/paired.py``). This script measures,
on identical code (A/A), how far apart those per-pair estimates fall under each candidate rule, and
where a call's slow moments come from:

* two fresh workers a pair (each with its own hash seed, both pinned to CPU 0 as the engine pins
  them, the side that starts first drawn per pair), ``--blocks`` rounds of one call a side in a
  random order, ``--pairs`` pairs;
* beside every call, in the same worker, two reference kernels before and after it: 400 torch
  matmuls of 160x160 (the step's own kind) and a pure-Python loop, the candidates for a control
  variate; and the call's minor page faults (``getrusage``);
* then, per rule, the SD of the per-pair estimates and their mean: the median of the block ratios
  (the rule for blocks of three calls or more), the pooled medians, the faster halves (the rule for
  fewer), the lower quartiles, the minima, the Hodges-Lehmann estimate of the block ratios, and the
  block ratios corrected by either reference (ratio over the reference's ratio).

    python benchmarks/one_call.py --model tft --pairs 16 --blocks 8
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perfgate.core.paired import fast_half_log_ratio  # noqa: E402  (the rule the check uses)

WORKER = textwrap.dedent(
    """\
    import json, math, resource, sys, time
    import torch
    from perfgate.bench.runner import time_call
    from perfgate.core.metrics import default_suite
    from perfgate.workers.resident import Worker

    w = Worker()
    rep = w.setup({"op": "setup", "suite": default_suite(), "model": sys.argv[1], "stages_modules": [], "seed": 0,
                   "device": "cpu", "data": None, "params": {}})
    assert rep["ok"], rep
    name = next(s["name"] for s in rep["stages"] if s["name"].startswith("training_step"))
    p = w.prepared[name]
    g = torch.Generator().manual_seed(1)
    A, B = torch.randn(160, 160, generator=g), torch.randn(160, 160, generator=g)


    def ref_mm():
        t = time.perf_counter()
        for _ in range(400):
            torch.mm(A, B)
        return time.perf_counter() - t


    def ref_py():
        t, s = time.perf_counter(), 0
        for i in range(1_000_000):
            s += i * i
        return time.perf_counter() - t


    ref_mm(), ref_py()
    print(json.dumps({"stage": name}), flush=True)
    for line in sys.stdin:
        if line.strip() != "call":
            break
        mm0, py0 = ref_mm(), ref_py()
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t = time_call(p.call, p.sync)
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
        mm1, py1 = ref_mm(), ref_py()
        row = {"t": t, "faults": faults, "mm": math.sqrt(mm0 * mm1), "py": math.sqrt(py0 * py1)}
        print(json.dumps(row), flush=True)
    """
)


def pin(pid: int) -> None:
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            os.sched_setaffinity(int(task.name), {0})
        except OSError:
            pass


def start(model: str, rng: random.Random) -> subprocess.Popen[str]:
    """A worker pinned to CPU 0 from its start (its set-up shares the CPU with the other side's, as in a pair)."""
    env = {**os.environ, "PYTHONHASHSEED": str(rng.randrange(1 << 30)), "PYTHONPATH": str(ROOT)}
    env.update({k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")})
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER, model], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    pin(proc.pid)
    return proc


def call(proc: subprocess.Popen[str]) -> dict[str, float]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("call\n")
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())


def measure(model: str, pairs: int, blocks: int, seed: int) -> list[dict[str, object]]:
    rng = random.Random(seed)
    out: list[dict[str, object]] = []
    for k in range(pairs):
        order = rng.sample("AB", 2)  # the side that starts first, drawn per pair as the engine draws it
        workers = {side: start(model, rng) for side in order}
        for proc in workers.values():
            assert proc.stdout is not None
            json.loads(proc.stdout.readline())  # set up
        rounds = []
        for _ in range(blocks):
            first = rng.choice("AB")
            rounds.append({side: call(workers[side]) for side in (first, "B" if first == "A" else "A")})
        for proc in workers.values():
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=60)
        out.append({"first": order[0], "rounds": rounds})
        print(f"pair {k + 1} of {pairs}", file=sys.stderr, flush=True)
    return out


def rules() -> dict[str, object]:
    def side(r: list[dict[str, dict[str, float]]], s: str, key: str = "t") -> np.ndarray:
        return np.array([x[s][key] for x in r])

    def blocks(r: list[dict[str, dict[str, float]]], ref: str | None = None) -> np.ndarray:
        d = np.log(side(r, "B") / side(r, "A"))
        return d - np.log(side(r, "B", ref) / side(r, "A", ref)) if ref else d

    def hodges_lehmann(d: np.ndarray) -> float:
        return float(np.median([(d[i] + d[j]) / 2 for i in range(len(d)) for j in range(i, len(d))]))

    return {
        "median of block ratios (3+ calls a block)": lambda r: float(np.median(blocks(r))),
        "faster halves (1-2 calls a block)": lambda r: fast_half_log_ratio(
            [[x] for x in side(r, "A")], [[x] for x in side(r, "B")]
        ),
        "pooled medians": lambda r: math.log(np.median(side(r, "B")) / np.median(side(r, "A"))),
        "lower quartiles": lambda r: math.log(np.quantile(side(r, "B"), 0.25) / np.quantile(side(r, "A"), 0.25)),
        "minima": lambda r: math.log(side(r, "B").min() / side(r, "A").min()),
        "Hodges-Lehmann of block ratios": lambda r: hodges_lehmann(blocks(r)),
        "block ratios over the torch reference's": lambda r: float(np.median(blocks(r, "mm"))),
        "block ratios over the Python reference's": lambda r: float(np.median(blocks(r, "py"))),
    }


def report(data: list[dict[str, Any]], model: str) -> None:
    calls = [x for pair in data for rnd in pair["rounds"] for x in rnd.values()]
    t = np.array([c["t"] for c in calls])
    faults = np.array([c["faults"] for c in calls])
    storm = faults >= 100
    head = f"python benchmarks/one_call.py --model {model} --pairs {len(data)} --blocks {len(data[0]['rounds'])}"
    print(f"## `{head}`\n")
    print(f"{len(t)} calls of the {model} training step: median {np.median(t):.3f} s, p90 {np.quantile(t, 0.9):.3f} s")
    slow = f"{np.median(t[storm]):.3f} s" if storm.any() else "none"
    rest = np.median(t[~storm])
    print(f"calls with 100+ minor page faults: {storm.mean():.0%} (median {slow}); the others {rest:.3f} s")
    if np.ptp(faults) > 0:
        slope, r = np.polyfit(faults, t, 1)[0], np.corrcoef(faults, t)[0, 1]
        print(f"seconds per fault (least squares over the calls): {slope * 1e6:.1f} us; corr(faults, time) {r:.2f}")
    print()
    print("| per-pair estimate | SD across pairs | robust SD (1.48 MAD) | mean | mean, A started first | B first |")
    print("|---|---|---|---|---|---|")
    first = np.array([pair["first"] for pair in data])
    for name, rule in rules().items():
        v = np.array([rule(pair["rounds"]) for pair in data])  # type: ignore[operator]
        mad = 1.4826 * float(np.median(np.abs(v - np.median(v))))
        by = [f"{v[first == s].mean():+.2%} ({int((first == s).sum())})" if (first == s).any() else "–" for s in "AB"]
        print(f"| {name} | {v.std(ddof=1):.2%} | {mad:.2%} | {v.mean():+.2%} | {by[0]} | {by[1]} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tft", choices=("tft", "mamba2", "dqn", "ppo"))
    ap.add_argument("--pairs", type=int, default=16)
    ap.add_argument("--blocks", type=int, default=8)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--save", type=Path, help="write the calls here as JSON")
    ap.add_argument("--load", type=Path, help="report calls saved earlier instead of measuring")
    args = ap.parse_args()
    if args.pairs < 3 or args.blocks < 2:
        raise SystemExit("need --pairs >= 3 and --blocks >= 2")
    data = json.loads(args.load.read_text()) if args.load else measure(args.model, args.pairs, args.blocks, args.seed)
    if args.save:
        args.save.write_text(json.dumps(data))
    report(data, args.model)


if __name__ == "__main__":
    main()
