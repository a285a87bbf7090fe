"""The paired decision under memory-layout offsets (docs/noise.md §5): seeded simulations of whole checks.

Each worker's layout puts a stage in one of two states: as fast as it can be, or slower by
8-13 % (about one worker in three), plus a heavy-tailed process offset (Student t, 3 degrees
of freedom, SD 1 %) and a little block noise. With the layout drawn per worker from one
distribution for both sides (perfgate.workers.layout) the pair's layout term has mean zero,
and an A/A check alarms at most at α; with the slow state landing on the current side only,
as the fixed layout of a comment-only change did, it alarms in most checks.
"""

from __future__ import annotations

import math

import numpy as np

from perfgate.core.metrics import Direction
from perfgate.core.paired import SequentialLooks, decide_look
from perfgate.core.policy import Policy
from perfgate.core.schema import Metric, Run

SLOW_SHARE = 0.35  # workers in the slow layout state (7 of 20 pairs in the reported A/A check)
SLOW_SIZE = (0.08, 0.13)  # how much slower, as a log ratio
OFFSET_SD = 0.01  # the heavy-tailed per-process offset beside the layout states
BLOCK_SD = 0.005  # what remains of a pair's block noise in its median


def _layout(rng: np.random.Generator, n: int) -> np.ndarray:
    slow = rng.random(n) < SLOW_SHARE
    return np.where(slow, rng.uniform(*SLOW_SIZE, n), 0.0)


def _pair_ratios(rng: np.random.Generator, n: int, *, randomised: bool) -> np.ndarray:
    current = _layout(rng, n)
    baseline = _layout(rng, n) if randomised else np.zeros(n)  # fixed: the slow state on the current side only
    offset = OFFSET_SD * rng.standard_t(3, n) / math.sqrt(3.0)
    return current - baseline + offset + rng.normal(0.0, BLOCK_SD, n)


def _check(rng: np.random.Generator, *, randomised: bool, alpha: float = 0.01, max_pairs: int = 20) -> bool:
    """One A/A check of one metric at threshold 3 %, three looks; True when it raised an alarm."""
    ratios = _pair_ratios(rng, max_pairs, randomised=randomised)
    rule = SequentialLooks(alpha, max_pairs, 3)
    policy = Policy(threshold_pct=3.0, alpha=alpha)
    for n in rule.schedule:
        runs = Run(
            model="m", metrics={"m_ms": Metric(name="m_ms", unit="ms", direction=Direction.LOWER, samples=(1.0,))}
        )

        def result_of(a: float, n: int = n, runs: Run = runs) -> object:
            return decide_look(runs, runs, {("m_ms", "median"): list(ratios[:n])}, policy, alpha=a)

        if rule.look(n, result_of, out_of_time=n == rule.schedule[-1]) is not None:  # type: ignore[arg-type]
            break
    return bool(rule.merged().regressions)


def test_aa_false_alarms_stay_below_alpha_with_two_state_layouts_drawn_per_worker():
    rng = np.random.default_rng(2027)
    trials, alpha = 1000, 0.01
    alarms = sum(_check(rng, randomised=True, alpha=alpha) for _ in range(trials))
    assert alarms / trials <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / trials), alarms


def test_a_layout_fixed_by_side_raises_false_alarms():
    """Regression for the comment-only A/A checks that alarmed in 6 of 7: the check above can fail."""
    rng = np.random.default_rng(2028)
    trials = 200
    alarms = sum(_check(rng, randomised=False) for _ in range(trials))
    assert alarms / trials > 0.2, alarms


def test_the_layout_term_drawn_per_worker_is_symmetric_about_zero():
    rng = np.random.default_rng(5)
    d = _layout(rng, 200_000) - _layout(rng, 200_000)
    assert abs(float(np.mean(d))) < 0.001 and abs(float(np.median(d))) < 1e-12
    assert abs(float(np.mean(d > 0.04)) - float(np.mean(d < -0.04))) < 0.005
