"""Seeded simulation of the paired decision: A/A alarms and power, plain t vs moderated t.

Each check has 11 metrics (8 stage medians at 1–2 % per-pair SD in one group, 3 tails at
5–9 % in another, as a DQN check). Per-process offsets are Student t on 3 df, or two-state
(8–13 % slower with probability 0.35, either side). One look at k pairs, the family decided by
Holm as ``perfgate ab`` does (the pure functions of ``perfgate.core.decision._moderated``; the test
``tests/core/test_paired_moderated.py::test_the_fast_family_is_decide_look`` holds them to
``decide_look``). Wilson 95 % intervals. No timing: it runs in about a minute.

    .venv/bin/python benchmarks/paired_sim.py [--trials 2000]
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from _proportions import wilson

import perfgate.core.decision._moderated as _moderated
from perfgate.core.decision._moderated import fit_prior, guarded
from perfgate.core.decision._rule import log_threshold
from perfgate.core.decision._significance import holm
from perfgate.core.metrics import Direction

SDS = np.array([0.010, 0.012, 0.014, 0.015, 0.016, 0.018, 0.020, 0.015, 0.05, 0.07, 0.09])
GROUPS = [0] * 8 + [1] * 3


def offsets(rng: np.random.Generator, kind: str, shape: tuple[int, ...], sd: np.ndarray | float) -> np.ndarray:
    """Per-process log offsets whose pair differences have SD ``sd`` (t3), plus the two-state jump."""
    t3 = rng.standard_t(3, shape) / math.sqrt(3.0) / math.sqrt(2.0) * sd
    if kind == "t3":
        return t3
    slow = rng.random(shape) < 0.35
    return t3 + np.where(slow, np.log1p(rng.uniform(0.08, 0.13, shape)), 0.0)


def regressed(d: np.ndarray, groups: list[int], bound: float, alpha: float, borrow: bool) -> np.ndarray:
    k, m = d.shape
    ps = np.empty(m)
    for g in set(groups):
        cols = [j for j in range(m) if groups[j] == g]
        prior = fit_prior([(float(d[:, j].var(ddof=1)), k - 1) for j in cols]) if borrow else None
        for j in cols:
            ps[j] = guarded(d[:, j], prior, bound).p_value
    return (np.array(holm(list(ps))) < alpha) & (d.mean(axis=0) > bound)


def cell(
    seed: int,
    trials: int,
    kind: str,
    k: int,
    *,
    effect: float,
    threshold: float,
    alpha: float,
    borrow: bool,
    mixed: bool = False,
) -> int:
    """Checks (of ``trials``) with a regression: A/A when effect is 0, else metric 3 (1.5 %) at +effect."""
    rng = np.random.default_rng(seed)
    bound = log_threshold(threshold / 100.0, Direction.LOWER)
    sds, groups = (np.full(11, 0.015), [0] * 11) if mixed else (SDS, GROUPS)
    hits = 0
    for _ in range(trials):
        d = offsets(rng, kind, (k, 11), sds) - offsets(rng, kind, (k, 11), sds)
        if mixed:  # one two-state stage among ten quiet ones
            d[:, 0] = offsets(rng, "two-state", (k,), 0.015) - offsets(rng, "two-state", (k,), 0.015)
        if effect:
            d[:, 3] += math.log1p(effect)  # the stage at 1.5 %
            hits += bool(regressed(d, groups, bound, alpha, borrow)[3])
        else:
            hits += bool(regressed(d, groups, bound, alpha, borrow).any())
    return hits


def row(label: str, hits: int, n: int) -> str:
    lo, hi = wilson(hits, n)
    return f"{label:<58} {hits:>5}/{n:<5} {hits / n:6.1%}  [{lo:5.1%}, {hi:5.1%}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=1000)
    n = parser.parse_args().trials
    print("A/A: checks with any regression, threshold 0 (the test alone), alpha 0.05, one look")
    for kind in ("t3", "two-state"):
        for k in (3, 4, 6):
            for borrow, name in ((False, "plain t"), (True, "moderated")):
                hits = cell(10 * k, n, kind, k, effect=0.0, threshold=0.0, alpha=0.05, borrow=borrow)
                print(row(f"  {kind:<9} k={k} {name}", hits, n))
    print("A/A, one two-state stage among ten quiet ones at 1.5 %, threshold 3 %, alpha 0.01")
    level = _moderated.OUTLIER_LEVEL
    for k in (3, 4, 6):
        for borrow, name in ((False, "plain t"), (True, "moderated")):
            hits = cell(20 * k, n, "t3", k, effect=0.0, threshold=3.0, alpha=0.01, borrow=borrow, mixed=True)
            print(row(f"  k={k} {name}", hits, n))
        _moderated.OUTLIER_LEVEL = 0.0
        hits = cell(20 * k, n, "t3", k, effect=0.0, threshold=3.0, alpha=0.01, borrow=True, mixed=True)
        _moderated.OUTLIER_LEVEL = level
        print(row(f"  k={k} moderated, without the unlike-its-group test", hits, n))
    print("Power: +5 % on one median, threshold 3 %, alpha 0.01, one look, t3 offsets")
    for k in (3, 4, 6):
        for borrow, name in ((False, "plain t"), (True, "moderated")):
            hits = cell(30 * k, n, "t3", k, effect=0.05, threshold=3.0, alpha=0.01, borrow=borrow)
            print(row(f"  k={k} {name} (offset SD 1.5 %)", hits, n))


if __name__ == "__main__":
    main()
