"""The paired decision of ``perfgate ab`` (perfgate.core.paired): hand values, seeded simulations, edge cases.

The simulations draw what the resident engine measures on this machine kind (docs/noise.md §2):
per pair a process offset (heavy-tailed: Student t with 3 degrees of freedom) and, per
block, the machine's phase shared by both sides plus a little independent noise.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy import stats as sps

from perfgate.core.compare import Verdict
from perfgate.core.metrics import Direction
from perfgate.core.paired import (
    SequentialLooks,
    block_log_ratio,
    decide_look,
    fast_half_log_ratio,
    look_alphas,
    look_schedule,
    merge_looks,
    pooled_log_ratio,
    settled,
    tail_log_ratio,
)
from perfgate.core.policy import Policy
from perfgate.core.schema import Metric, Run


def _run(metrics: dict[str, tuple[str, Direction]], pairs: int) -> Run:
    return Run(
        model="dqn",
        metrics={
            name: Metric(name=name, unit=unit, direction=d, samples=tuple(1.0 for _ in range(pairs)))
            for name, (unit, d) in metrics.items()
        },
    )


TIME = {"work_time_ms": ("ms", Direction.LOWER)}


def _decide(ratios: list[float], *, threshold: float = 3.0, alpha: float = 0.01, **kw: object):
    runs = _run(TIME, len(ratios))
    policy = Policy(threshold_pct=threshold, alpha=alpha)
    result = decide_look(runs, runs, {("work_time_ms", "median"): ratios}, policy, alpha=alpha, **kw)  # type: ignore[arg-type]
    return result.comparisons[0]


# --- hand values -------------------------------------------------------------------------


def test_block_log_ratio_is_the_median_of_block_ratios():
    a = [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0], [1.0, 1.0, 1.0]]
    b = [[1.1, 1.1, 1.1], [2.0, 2.4, 2.4], [1.0, 50.0, 0.9]]  # ratios 1.1, 1.2, 1.0 (median of the block)
    assert block_log_ratio(a, b) == pytest.approx(math.log(1.1))


def test_pooled_log_ratio_of_a_tail():
    a = [[float(i) for i in range(1, 101)]]
    b = [[2.0 * i for i in range(1, 51)], [2.0 * i for i in range(51, 101)]]
    assert pooled_log_ratio(a, b, 0.99) == pytest.approx(math.log(2.0))


def _tail_pair(rng: np.random.Generator, *, change: float, blocks: int = 30, calls: int = 2000) -> tuple[list, list]:
    """One pair's blocks of a microsecond call: a heavy right tail (lognormal), the machine's
    phase per block shared by both sides, and now and then a burst (a neighbour) that slows
    one side's half of a block by 30 % — the moments pairing cannot cancel in a pooled tail."""
    a_blocks, b_blocks = [], []
    for _ in range(blocks):
        phase = math.exp(rng.normal(0.0, 0.2))
        burst = [1.3 if rng.random() < 0.1 else 1.0 for _ in range(2)]
        a_blocks.append(phase * burst[0] * rng.lognormal(0.0, 0.5, calls))
        b_blocks.append(phase * burst[1] * math.exp(change) * rng.lognormal(0.0, 0.5, calls))
    return a_blocks, b_blocks


def test_tail_log_ratio_is_estimated_block_by_block_so_the_phase_cancels():
    rng = np.random.default_rng(7)
    change = math.log(1.10)
    blockwise, pooled = [], []
    for _ in range(60):
        a, b = _tail_pair(rng, change=change)
        blockwise.append(tail_log_ratio(a, b, 0.99))
        pooled.append(pooled_log_ratio(a, b, 0.99))
    assert abs(np.mean(blockwise) - change) < 0.01
    # the pooled tail follows whichever side drew the bursts and the slow phases
    assert np.std(blockwise) < 0.5 * np.std(pooled)


def test_tail_log_ratio_pools_blocks_too_small_for_their_own_quantile():
    rng = np.random.default_rng(3)
    a = [rng.lognormal(0.0, 0.5, 100) for _ in range(8)]  # p99 needs 500 calls a block
    b = [rng.lognormal(0.1, 0.5, 100) for _ in range(8)]
    assert tail_log_ratio(a, b, 0.99) == pooled_log_ratio(a, b, 0.99)
    # a p95 needs 100: these blocks suffice, and the estimate is the median of the blocks'
    ratios = [math.log(np.quantile(y, 0.95) / np.quantile(x, 0.95)) for x, y in zip(a, b, strict=True)]
    expected = float(np.median(ratios))
    assert tail_log_ratio(a, b, 0.95) == pytest.approx(expected)


def test_tail_log_ratio_rejects_what_is_not_a_quantile():
    with pytest.raises(ValueError, match="quantile"):
        tail_log_ratio([[1.0]], [[1.0]], 1.0)
    with pytest.raises(ValueError, match="same number"):
        tail_log_ratio([[1.0]], [[1.0], [2.0]], 0.99)


def test_block_log_ratio_needs_matching_blocks():
    with pytest.raises(ValueError, match="same number"):
        block_log_ratio([[1.0]], [[1.0], [2.0]])


def test_look_alphas_are_quadratic_shares_that_sum_to_alpha():
    assert look_alphas(0.09, 3) == pytest.approx((0.01, 0.03, 0.05))
    assert sum(look_alphas(0.01, 7)) == pytest.approx(0.01)
    assert look_alphas(0.05, 1) == (0.05,)


def test_look_schedule():
    assert look_schedule(12, 3) == (4, 8, 12)
    assert look_schedule(6, 3) == (3, 4, 6)
    assert look_schedule(3, 3) == (3,)  # looks that coincide are dropped
    assert look_schedule(2, 3) == (3,)  # never fewer than 3 pairs


def test_t_test_across_pairs_hand_computed():
    d = [0.10, 0.12, 0.08]  # mean 0.10, sd 0.02, se 0.02 / sqrt(3), t = 8.660 on 2 df
    c = _decide(d, alpha=0.05)
    t = 0.10 / (0.02 / math.sqrt(3))
    assert t == pytest.approx(8.660254)
    assert c.p_value == pytest.approx(float(sps.t(2).sf(t)))
    assert c.p_value == pytest.approx(sps.ttest_1samp(d, 0.0, alternative="greater").pvalue)
    assert c.worse == pytest.approx(math.expm1(0.10))
    half = float(sps.t(2).ppf(0.975)) * 0.02 / math.sqrt(3)
    assert c.ci == pytest.approx((math.expm1(0.10 - half), math.expm1(0.10 + half)))
    assert c.verdict is Verdict.REGRESSED


def test_throughput_is_flipped_and_derived_metrics_count_once():
    metrics = {
        "training_step_time_ms": ("ms", Direction.LOWER),
        "throughput_samples_per_sec": ("samples/s", Direction.HIGHER),
    }
    runs = _run(metrics, 5)
    d = [0.06, 0.05, 0.055, 0.065, 0.05]
    ratios = {("training_step_time_ms", "median"): d, ("throughput_samples_per_sec", "median"): [-x for x in d]}
    policy = Policy(threshold_pct=3.0)
    result = decide_look(
        runs, runs, ratios, policy, alpha=0.01, derived={"throughput_samples_per_sec": "training_step_time_ms"}
    )
    step, rate = result.comparisons
    mean = float(np.mean(d))
    assert step.worse == pytest.approx(math.expm1(mean))
    assert rate.worse == pytest.approx(-math.expm1(-mean))  # a 5.8 % longer step is 5.5 % less throughput
    assert step.p_adjusted == rate.p_adjusted == step.p_value  # one test in the family, not two
    assert step.verdict is rate.verdict is Verdict.REGRESSED
    assert "counted once" in rate.noise
    assert rate.derived_from == "training_step_time_ms" and step.derived_from == ""


def test_a_derived_metric_whose_source_has_no_test_is_tested_as_in_a_stored_check():
    """One rule for both paths: when the source has no test (here no pairs of it), the derived
    metric is tested in its place and counts in Holm's family, as compare_runs does."""
    metrics = {
        "training_step_time_ms": ("ms", Direction.LOWER),
        "throughput_samples_per_sec": ("samples/s", Direction.HIGHER),
    }
    runs = _run(metrics, 5)
    d = [-0.06, -0.05, -0.055, -0.065, -0.05]  # throughput 5-6 % lower in every pair
    ratios = {("throughput_samples_per_sec", "median"): d}
    policy = Policy(threshold_pct=3.0)
    derived = {"throughput_samples_per_sec": "training_step_time_ms"}
    result = decide_look(runs, runs, ratios, policy, alpha=0.01, derived=derived)
    rate = next(c for c in result.comparisons if c.metric == "throughput_samples_per_sec")
    assert rate.p_adjusted is not None and rate.p_adjusted == rate.p_value  # the one member of the family
    assert rate.verdict is Verdict.REGRESSED and rate.derived_from == "training_step_time_ms"


def test_a_gated_metric_the_current_side_lacks_fails_the_look():
    both = {**TIME, "dbn_load_time_ms": ("ms", Direction.LOWER)}
    base, cur = _run(both, 4), _run(TIME, 4)
    ratios = {("work_time_ms", "median"): [0.001, -0.001, 0.0, 0.002]}
    result = decide_look(base, cur, ratios, Policy(threshold_pct=3.0), alpha=0.01)
    assert result.missing == ("dbn_load_time_ms",) and result.failed and result.exit_code == 1
    refused = decide_look(base, cur, ratios, Policy(threshold_pct=3.0, missing_metric="refuse"), alpha=0.01)
    assert refused.exit_code == 2


def test_unchanged_needs_the_interval_inside_the_threshold():
    assert _decide([0.001, -0.002, 0.0, 0.001, -0.001, 0.0]).verdict is Verdict.UNCHANGED
    wide = _decide([0.05, -0.05, 0.02, -0.03])
    assert wide.verdict is Verdict.INCONCLUSIVE
    assert wide.required_unit == "pairs" and wide.required_n is not None and wide.required_n > 4


def test_a_single_offset_pair_cannot_make_a_regression():
    rng = np.random.default_rng(5)
    for pairs in (3, 5, 8, 12, 20):
        d = [*rng.normal(0.0, 0.002, pairs - 1), 0.10]  # one pair 10 % off, the rest unchanged
        c = _decide(d, threshold=3.0, alpha=0.05)
        assert c.verdict is not Verdict.REGRESSED, (pairs, c)


def test_fewer_than_two_pairs_is_inconclusive():
    assert _decide([0.2]).verdict is Verdict.INCONCLUSIVE


def test_merge_keeps_the_first_decided_verdict():
    first = decide_look(
        _run(TIME, 3), _run(TIME, 3), {("work_time_ms", "median"): [0.3, 0.31, 0.29]}, Policy(), alpha=0.01
    )
    later = decide_look(
        _run(TIME, 4), _run(TIME, 4), {("work_time_ms", "median"): [0.3, 0.31, 0.29, -0.6]}, Policy(), alpha=0.01
    )
    assert first.comparisons[0].verdict is Verdict.REGRESSED
    assert later.comparisons[0].verdict is not Verdict.REGRESSED
    assert merge_looks([first, later]).comparisons[0].verdict is Verdict.REGRESSED
    assert settled(first)


# --- seeded simulations ------------------------------------------------------------------


def _one_call_blocks(rng: np.random.Generator, effect: float, offset_sd: float, blocks: int = 8) -> tuple[list, list]:
    """One pair of a training step of a second or so, one call a block, as the TFT's measured here
    (docs/noise.md §7): each process its own heavy-tailed offset, a slow drift of the machine's
    phase shared by both calls of a round, 2 % of independent noise per call, and in one call of
    five a storm of page faults that makes it 1.15-2.4 times as long, on whichever side it falls."""
    offsets = offset_sd * rng.standard_t(3, 2) / math.sqrt(3.0)
    a: list[list[float]] = []
    b: list[list[float]] = []
    for phase in np.cumsum(rng.normal(0.0, 0.01, blocks)):
        for side, shift in ((a, offsets[0]), (b, offsets[1] + effect)):
            storm = 1.0 + rng.uniform(0.15, 1.4) if rng.random() < 0.2 else 1.0
            side.append([storm * math.exp(phase + shift + rng.normal(0.0, 0.02))])
    return a, b


def _one_call_pair(rng: np.random.Generator, effect: float, offset_sd: float) -> float:
    return block_log_ratio(*_one_call_blocks(rng, effect, offset_sd))


def _pair_ratio(rng: np.random.Generator, effect: float, offset_sd: float, blocks: int = 10) -> float:
    phase = rng.normal(0.0, 0.3, blocks)  # the machine's phase: up to 2x between blocks, shared by both sides
    a = [np.exp(p + rng.normal(0.0, 0.02, 5)) for p in phase]
    offset = offset_sd * rng.standard_t(3) / math.sqrt(3.0)  # heavy-tailed per-process offset, SD offset_sd
    b = [np.exp(p + effect + offset + rng.normal(0.0, 0.02, 5)) for p in phase]
    return block_log_ratio(a, b)


def _check(
    rng: np.random.Generator,
    effects: list[float],
    *,
    alpha: float,
    threshold: float,
    max_pairs: int,
    looks: int,
    offset_sd: float = 0.01,
    pair: Callable[[np.random.Generator, float, float], float] | None = None,
) -> bool:
    """One simulated sequential check over len(effects) metrics; True when any metric regressed."""
    pair = pair or _pair_ratio
    names = {f"m{i}_ms": ("ms", Direction.LOWER) for i in range(len(effects))}
    ratios: dict[tuple[str, str], list[float]] = {(n, "median"): [] for n in names}
    rule = SequentialLooks(alpha, max_pairs, looks)
    policy = Policy(threshold_pct=threshold, alpha=alpha)
    for n in range(1, max_pairs + 1):
        for (name, _), eff in zip(ratios, effects, strict=True):
            ratios[(name, "median")].append(pair(rng, eff, offset_sd))
        runs = _run(names, n)

        def result_of(a: float, runs: Run = runs) -> object:
            return decide_look(runs, runs, ratios, policy, alpha=a)

        if rule.look(n, result_of) is not None:  # type: ignore[arg-type]
            break
    return bool(rule.merged().regressions)


def test_aa_false_alarms_stay_below_alpha_with_offsets_and_looks():
    rng = np.random.default_rng(2026)
    trials, alpha = 300, 0.05
    alarms = sum(_check(rng, [0.0, 0.0, 0.0], alpha=alpha, threshold=0.0, max_pairs=10, looks=3) for _ in range(trials))
    assert alarms / trials <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / trials), alarms


def test_spending_keeps_alpha_where_testing_every_look_at_full_alpha_does_not():
    """Regression for optional stopping: a t test repeated at full α after every pair inflates the rate."""
    rng = np.random.default_rng(11)
    trials, alpha, looks = 600, 0.10, 10
    naive = ours = 0
    for _ in range(trials):
        d = rng.standard_normal(12)
        tests = [sps.ttest_1samp(d[:n], 0.0, alternative="greater").pvalue for n in range(3, 13)]
        naive += any(p < alpha for p in tests)
        shares = look_alphas(alpha, looks)
        ours += any(p < a for p, a in zip(tests, shares, strict=True))
    tol = 3 * math.sqrt(alpha * (1 - alpha) / trials)
    assert ours / trials <= alpha + tol
    assert naive / trials > alpha + tol  # the check above could fail: without spending it does


def test_aa_false_alarms_stay_below_alpha_for_one_call_blocks_with_slow_calls_and_offsets():
    rng = np.random.default_rng(2027)
    trials, alpha = 300, 0.05
    alarms = sum(
        _check(rng, [0.0, 0.0], alpha=alpha, threshold=0.0, max_pairs=10, looks=3, pair=_one_call_pair)
        for _ in range(trials)
    )
    assert alarms / trials <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / trials), alarms


def test_one_call_blocks_are_estimated_from_the_faster_halves_which_hear_five_percent():
    """Fails with the faster halves removed: the median of one-call block ratios follows the slow calls."""
    rng = np.random.default_rng(5)
    ours, by_block = [], []
    for _ in range(400):  # on the same draws, each pair's estimate also the median of its block ratios
        a, b = _one_call_blocks(rng, 0.0, 0.005)
        ours.append(block_log_ratio(a, b))
        by_block.append(float(np.median([math.log(y[0] / x[0]) for x, y in zip(a, b, strict=True)])))
    ours = np.array(ours)
    assert abs(ours.mean()) < 0.003
    assert ours.std() < 0.6 * np.std(by_block), (ours.std(), np.std(by_block))
    rng = np.random.default_rng(8)
    trials = 40
    found = sum(
        _check(rng, [math.log(1.05)], alpha=0.05, threshold=3.0, max_pairs=9, looks=3, pair=_one_call_pair)
        for _ in range(trials)
    )
    assert found >= 0.9 * trials, found


def test_fast_half_log_ratio_by_hand():
    a = [[1.0], [1.0], [2.0], [1.0]]  # the faster half: 1.0, 1.0
    b = [[1.1], [1.1], [1.1], [3.0]]  # 1.1, 1.1
    assert fast_half_log_ratio(a, b) == pytest.approx(math.log(1.1))
    assert block_log_ratio(a, b) == fast_half_log_ratio(a, b)  # one call a block
    odd = [[1.0], [2.0], [3.0]]  # the faster half of three calls: two
    assert fast_half_log_ratio(odd, [[2.0], [4.0], [6.0]]) == pytest.approx(math.log(2.0))
    three = [[1.0, 1.0, 1.0]]  # blocks of three calls: their own median, as before
    assert block_log_ratio(three, [[1.1, 1.1, 9.0]]) == pytest.approx(math.log(1.1))
    with pytest.raises(ValueError, match="positive"):
        fast_half_log_ratio([[0.0]], [[1.0]])


def test_power_for_a_clear_slowdown():
    rng = np.random.default_rng(3)
    trials = 40
    found = sum(_check(rng, [0.08, 0.0], alpha=0.01, threshold=3.0, max_pairs=10, looks=3) for _ in range(trials))
    assert found >= 0.9 * trials, found
