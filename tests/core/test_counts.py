"""The decision for counts (perfgate.core.decision._counts): hand values, seeded A/A and power, edge cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from perfgate.core.compare import Verdict, compare_runs
from perfgate.core.decision._counts import RESIDUE_FLOOR, counts_test, pooled_residue, pooled_residues
from perfgate.core.metrics import Direction
from perfgate.core.policy import Policy
from perfgate.core.schema import Metric, Run
from perfgate.errors import MismatchError

# between-process residue of DQN's five stages measured under callgrind (docs/design.md §12)
MEASURED = {"dbn_load": 0.0008, "features": 0.000002, "training_step": 0.0007, "inference": 0.0014, "torch": 0.003}
SIZE = {"dbn_load": 4.19e6, "features": 3.88e7, "training_step": 9.47e6, "inference": 4.28e4, "torch": 2.34e5}


def _metric(name: str, groups: list[list[float]], unit: str = "instructions") -> Metric:
    return Metric(
        name=name,
        unit=unit,
        direction=Direction.LOWER,
        samples=tuple(v for g in groups for v in g),
        groups=tuple(len(g) for g in groups),
    )


def _run(metrics: list[Metric]) -> Run:
    return Run(model="m", metrics={m.name: m for m in metrics}, config={"measure": "counts", "processes": 2})


def test_pooled_residue_hand_values():
    # log group medians: a: log 100, log 101; b: log 200 twice -> ss = (log 1.01)^2 / 2, df = 1 + 1
    a = _metric("a_instructions", [[100.0] * 3, [101.0] * 3])
    b = _metric("b_instructions", [[200.0] * 3, [200.0] * 3])
    residue = pooled_residue(_run([a]), _run([b]))
    assert residue is not None
    assert residue.df == 2 and residue.metrics == 2
    assert residue.sigma == pytest.approx(math.sqrt(math.log(1.01) ** 2 / 2 / 2))


def test_no_count_metrics_no_residue():
    t = Metric(name="x_time_ms", unit="ms", direction=Direction.LOWER, samples=(1.0, 2.0))
    assert pooled_residue(Run(model="m", metrics={"x_time_ms": t}), Run(model="m", metrics={"x_time_ms": t})) is None


def test_identical_processes_fall_back_to_the_floor():
    """All equal: no spread at all; the floor, not a zero standard error, decides."""
    m = _metric("a_instructions", [[1000.0] * 5, [1000.0] * 5])
    residue = pooled_residue(_run([m]), _run([m]))
    assert residue is not None and residue.sigma == 0.0
    test = counts_test(math.log(1.002), m, m, "median", residue)
    assert test.se == pytest.approx(RESIDUE_FLOOR * math.sqrt(1 / 2 + 1 / 2))
    assert test.df is None and "floor" in test.noise and "no run-to-run phase term" in test.noise


def test_a_noisy_metric_keeps_its_own_spread():
    quiet = _metric("q_instructions", [[1000.0] * 5, [1000.0] * 5])
    noisy = _metric("n_instructions", [[1000.0] * 5, [1010.0] * 5])
    residue = pooled_residue(_run([quiet] * 1 + [noisy]), _run([quiet, noisy]))
    assert residue is not None
    test = counts_test(0.0, noisy, noisy, "median", residue)
    own = math.log(1.01) / math.sqrt(2)
    assert test.se == pytest.approx(own * math.sqrt(1 / 2 + 1 / 2))
    assert "own spread" in test.noise


def test_one_process_per_side_uses_the_floor():
    a = _metric("a_instructions", [[1000.0] * 5])
    residue = pooled_residue(_run([a]), _run([a]))
    assert residue is not None and residue.df == 0
    assert counts_test(0.01, a, a, "median", residue).se == pytest.approx(RESIDUE_FLOOR * math.sqrt(2))


def _simulated(rng: np.random.Generator, change: dict[str, float], processes: int = 2, calls: int = 5) -> Run:
    metrics = []
    for stage, sigma in MEASURED.items():
        for suffix, unit in (("instructions", "instructions"), ("est_cycles", "cycles")):
            groups = []
            for _ in range(processes):
                level = SIZE[stage] * (1 + change.get(stage, 0.0)) * math.exp(rng.normal(0, sigma))
                # calls inside one process repeat each other to a few instructions
                groups.append([round(level + rng.normal(0, 2)) for _ in range(calls)])
            metrics.append(_metric(f"{stage}_{suffix}", groups, unit))
    return _run(metrics)


def test_aa_false_alarms_at_most_one_percent_under_the_measured_residue():
    """1,000 seeded A/A checks of DQN's five stages (instructions and cycles) at --threshold 1, two processes."""
    rng = np.random.default_rng(20261203)
    alarms = 0
    for _ in range(1000):
        result = compare_runs(_simulated(rng, {}), _simulated(rng, {}), Policy(threshold_pct=1.0))
        alarms += any(c.verdict is Verdict.REGRESSED for c in result.comparisons)
    assert alarms <= 10, alarms


def test_power_two_percent_at_threshold_one():
    """+2 % of one stage's work at --threshold 1, on every stage in turn (200 checks each): at least
    95 % where the residue is at most 0.14 %, 85 % on eager torch inference (0.3 %), whose own
    spread between two processes per side is sometimes wide enough to leave it inconclusive."""
    rng = np.random.default_rng(7)
    for stage, sigma in MEASURED.items():
        caught = 0
        for _ in range(200):
            result = compare_runs(_simulated(rng, {}), _simulated(rng, {stage: 0.02}), Policy(threshold_pct=1.0))
            caught += {c.metric: c.verdict for c in result.comparisons}[f"{stage}_instructions"] is Verdict.REGRESSED
        assert caught >= (190 if sigma <= 0.0014 else 170), (stage, caught)


def test_power_one_percent_at_threshold_half_on_the_quieter_stages():
    """+1 % at --threshold 0.5 where the residue is at most 0.14 %: 86-96 of 100 with two processes
    per side (each unit's pool has 10 degrees of freedom, and takes in eager torch's 0.3 %); the
    eager torch stage needs more processes than two (README: which gate for what)."""
    rng = np.random.default_rng(11)
    for stage in [s for s, sigma in MEASURED.items() if sigma <= 0.0014]:
        caught = 0
        for _ in range(100):
            result = compare_runs(_simulated(rng, {}), _simulated(rng, {stage: 0.01}), Policy(threshold_pct=0.5))
            caught += {c.metric: c.verdict for c in result.comparisons}[f"{stage}_instructions"] is Verdict.REGRESSED
        assert caught >= 80, (stage, caught)


def test_three_processes_per_side_hear_one_percent_at_half_and_two_at_one_everywhere():
    """With --processes 3 (ab: --pairs 3) every stage, eager torch included, is caught at least 97 times in 100."""
    rng = np.random.default_rng(13)
    for stage in MEASURED:
        for change, threshold in ((0.01, 0.5), (0.02, 1.0)):
            if stage == "torch" and change == 0.01:
                continue  # 0.3 %: +1 % at 0.5 is within three of its standard errors
            caught = 0
            for _ in range(100):
                base, cur = _simulated(rng, {}, processes=3), _simulated(rng, {stage: change}, processes=3)
                result = compare_runs(base, cur, Policy(threshold_pct=threshold))
                verdicts = {c.metric: c.verdict for c in result.comparisons}
                caught += verdicts[f"{stage}_instructions"] is Verdict.REGRESSED
            assert caught >= 97, (stage, change, caught)


def test_counts_are_not_compared_with_times():
    counts = _run([_metric("a_instructions", [[1.0, 1.0], [1.0, 1.0]])])
    times = Run(
        model="m", metrics={"a_time_ms": Metric(name="a_time_ms", unit="ms", direction=Direction.LOWER, samples=(1.0,))}
    )
    with pytest.raises(MismatchError, match="counts are not times"):
        compare_runs(times, counts, Policy())


def test_a_count_is_compared_by_its_processes_not_by_its_calls_pooled():
    """The standard error is of the mean over processes of each process's log median; the
    estimate must be that too. Pooled, two processes at 100 and one at 110 give a median of 100
    (no change against 100); by process the baseline is 103.2 (a 3.1 % drop), whose interval
    the between-process spread then sets."""
    base = _metric("x_instructions", [[100.0] * 5, [100.0] * 5, [110.0] * 5])
    cur = _metric("x_instructions", [[100.0] * 5, [100.0] * 5, [100.0] * 5])
    assert np.median(base.samples) == np.median(cur.samples) == 100.0
    result = compare_runs(_run([base]), _run([cur]), Policy(threshold_pct=1.0))
    (c,) = [c for c in result.comparisons if c.statistic == "median"]
    by_process = math.exp(np.mean(np.log([100.0, 100.0, 110.0])))
    assert c.baseline_value == pytest.approx(by_process) and c.current_value == pytest.approx(100.0)
    assert c.change == pytest.approx(100.0 / by_process - 1)
    assert c.ci is not None and c.ci[0] < c.change < c.ci[1]


def test_instructions_do_not_lend_their_precision_to_estimated_cycles():
    """Simulated cache misses move with each process's layout (DBN load: 0.02 % in instructions, 2.7 % in
    estimated cycles over four processes): each unit is pooled on its own."""
    quiet = [_metric(f"s{i}_instructions", [[1000.0] * 5, [1000.2] * 5], "instructions") for i in range(5)]
    cycles = _metric("s0_est_cycles", [[1000.0] * 5, [1020.0] * 5], "cycles")
    residues = pooled_residues(_run([*quiet, cycles]), _run([*quiet, cycles]))
    assert set(residues) == {"instructions", "cycles"}
    assert residues["instructions"].sigma < 0.0002 < 0.01 < residues["cycles"].sigma
    mixed = pooled_residue(_run([*quiet, cycles]), _run([*quiet, cycles]))
    assert mixed is not None and mixed.sigma < residues["cycles"].sigma


def test_the_residue_learned_from_stored_runs_is_the_spread_inside_each_run_pooled():
    from perfgate.calibration import estimate_noise

    # run 1: log groups log 100, log 102; run 2: log 200 (moved: another code), log 200 -> df 2
    one = _run([_metric("a_est_cycles", [[100.0] * 3, [102.0] * 3], "cycles")])
    two = _run([_metric("a_est_cycles", [[200.0] * 3, [200.0] * 3], "cycles")])
    sigma = estimate_noise([one, two])
    assert sigma["a_est_cycles@process"] == pytest.approx(math.sqrt(math.log(1.02) ** 2 / 2 / 2))
    assert sigma["a_est_cycles@process_df"] == 2.0
    assert "a_est_cycles" not in sigma  # no run-to-run term for counts: the change between the runs is not noise


def _layout_noisy_pair(rng: np.random.Generator, shift: float) -> tuple[Run, Run]:
    """Four stages counted quietly, and one whose estimated cycles move ~1.2 % with each process's layout."""

    def side(extra: float) -> Run:
        metrics = [
            _metric(f"s{i}_est_cycles", [[1e6 * math.exp(rng.normal(0, 0.0005))] * 5 for _ in range(2)], "cycles")
            for i in range(4)
        ]
        metrics.append(
            _metric(
                "load_est_cycles",
                [[8e6 * (1 + extra) * math.exp(rng.normal(0, 0.012))] * 5 for _ in range(2)],
                "cycles",
            )
        )
        return _run(metrics)

    return side(0.0), side(shift)


def test_a_residue_learned_from_history_keeps_a_layout_noisy_stage_from_false_claims():
    """A/A, 400 checks at --threshold 1: with only the check's own two processes per side, the
    layout-noisy stage is sometimes trusted on two processes that happened to agree; with the
    residue its stored runs showed (1.2 % on 40 degrees of freedom) it claims nothing."""
    rng = np.random.default_rng(5)
    learned = Policy(threshold_pct=1.0, noise={"load_est_cycles@process": 0.012, "load_est_cycles@process_df": 40.0})
    claims = {"alone": 0, "learned": 0}
    for _ in range(400):
        base, cur = _layout_noisy_pair(rng, 0.0)
        for label, policy in (("alone", Policy(threshold_pct=1.0)), ("learned", learned)):
            result = compare_runs(base, cur, policy)
            claims[label] += any(c.verdict in (Verdict.REGRESSED, Verdict.IMPROVED) for c in result.comparisons)
    assert claims["learned"] <= 4, claims  # at most 1 %
    assert claims["alone"] > claims["learned"], claims


def test_a_quiet_stage_known_quiet_is_not_held_to_the_noisiest():
    """+1 % at --threshold 0.5 on a stage whose history says 0.05 %, beside one that moves 1.2 %."""
    rng = np.random.default_rng(9)
    noise = {"s0_est_cycles@process": 0.0005, "s0_est_cycles@process_df": 40.0}
    caught = 0
    for _ in range(100):
        base, _ = _layout_noisy_pair(rng, 0.0)
        _, cur = _layout_noisy_pair(rng, 0.0)
        cur = _run(
            [
                *[m for name, m in cur.metrics.items() if name != "s0_est_cycles"],
                _metric(
                    "s0_est_cycles",
                    [[g * 1.01 for g in grp] for grp in cur.metrics["s0_est_cycles"].group_samples()],
                    "cycles",
                ),
            ]
        )
        result = compare_runs(base, cur, Policy(threshold_pct=0.5, noise=noise, noise_runs=20))
        c = next(c for c in result.comparisons if c.metric == "s0_est_cycles")
        caught += c.verdict is Verdict.REGRESSED
        assert "learned from 20 runs of this machine" in c.noise
    assert caught >= 95, caught


def test_a_counts_run_leaves_budgets_on_times_to_runs_of_times_and_says_so():
    """A counts run has no times: a time budget neither fails it (as a missing metric would) nor
    passes unsaid; a budget on a count holds as any budget does."""
    from perfgate.core.compare import budgets_only
    from perfgate.core.policy import Budget

    metric = _metric("loop_instructions", [[1000.0] * 5, [1000.0] * 5])
    counts = Run(model="m", metrics={metric.name: metric}, measure="counts")
    on_time = Budget(model="m", metric="inference_latency_us", statistic="p99", limit=50.0)
    result = compare_runs(counts, counts, Policy(budgets=(on_time,)))
    assert result.exit_code == 0 and result.missing == () and result.budgets == ()
    assert len(result.notes) == 1
    assert "inference_latency_us (p99)" in result.notes[0] and "counts are not times" in result.notes[0]
    assert budgets_only(counts, Policy(budgets=(on_time,))).notes == result.notes
    from perfgate.report.markdown import render_markdown

    assert "Budgets not checked: inference_latency_us (p99)" in render_markdown(result)
    on_count = Budget(model="m", metric="loop_instructions", statistic="median", limit=900.0)
    broken = compare_runs(counts, counts, Policy(budgets=(on_time, on_count)))
    assert broken.exit_code == 1 and [b.budget.metric for b in broken.broken_budgets] == ["loop_instructions"]
    # a run of times still fails on a budgeted metric it did not measure
    t = Metric(name="loop_time_ms", unit="ms", direction=Direction.LOWER, samples=(1.0, 1.1, 0.9))
    timed = Run(model="m", metrics={t.name: t})
    assert compare_runs(timed, timed, Policy(budgets=(on_time,))).missing == ("inference_latency_us",)
