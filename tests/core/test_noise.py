"""Run-to-run noise: its estimates, and a decision that does not mistake it for a change."""

from __future__ import annotations

import math

import numpy as np
import pytest

from perfgate.core.compare import Verdict, compare_runs
from perfgate.core.metrics import Direction
from perfgate.core.noise import between_groups, calibrate_sigma
from perfgate.core.policy import Policy
from perfgate.core.schema import Metric, Run


def _metric(groups: list[list[float]], name: str = "training_step_time_ms") -> Metric:
    samples = tuple(v for g in groups for v in g)
    return Metric(
        name=name, unit="ms", direction=Direction.LOWER, samples=samples, groups=tuple(len(g) for g in groups)
    )


def test_between_groups_hand_values():
    """Group medians e, e², e³ (base) and e², e⁴ (current): log deviations -1, 0, 1 and -1, 1."""
    base = _metric([[math.e] * 3, [math.e**2] * 3, [math.e**3] * 3])
    cur = _metric([[math.e**2] * 2, [math.e**4] * 2])
    est = between_groups(base, cur)
    assert est is not None
    assert est.df == 3  # (3 - 1) + (2 - 1)
    assert est.sigma == pytest.approx(math.sqrt((1 + 0 + 1 + 1 + 1) / 3))
    assert (est.groups_baseline, est.groups_current) == (3, 2)


def test_between_groups_needs_a_spare_group():
    one = _metric([[1.0, 2.0]])
    assert between_groups(one, one) is None


def test_calibrate_sigma_recovers_a_known_sigma():
    rng = np.random.default_rng(11)
    estimates = [calibrate_sigma(list(100 * np.exp(rng.normal(0, 0.05, 40)))) for _ in range(200)]
    assert np.median(estimates) == pytest.approx(0.05, rel=0.1)


def test_calibrate_sigma_is_robust_to_one_step():
    rng = np.random.default_rng(12)
    series = list(100 * np.exp(rng.normal(0, 0.03, 30))) + list(150 * np.exp(rng.normal(0, 0.03, 30)))
    sigma = calibrate_sigma(series)
    assert sigma is not None and sigma < 0.05  # a plain SD would be about 0.2


def test_calibrate_sigma_too_short():
    assert calibrate_sigma([1.0, 2.0]) is None


def test_groups_must_add_up():
    with pytest.raises(ValueError, match="add up"):
        Metric(name="m", unit="ms", direction=Direction.LOWER, samples=(1.0, 2.0), groups=(1,))


def _processes(rng: np.random.Generator, level: float, processes: int, n: int, sigma_run: float, cv: float):
    # each process has its own speed (the run-to-run part), then tight samples within it
    groups = [list(level * math.exp(rng.normal(0, sigma_run)) * rng.lognormal(0, cv, n)) for _ in range(processes)]
    return _metric(groups)


def _run(metric: Metric) -> Run:
    return Run(model="dqn", metrics={metric.name: metric})


@pytest.mark.slow
def test_processes_stop_false_alarms_that_within_run_tests_raise():
    """A/A with 10 % run-to-run noise and 1 % within-run noise, 5 processes per side.

    Treating all samples as independent (the groups dropped) raises alarms in a large share
    of the checks; with the groups the decision stays within its alpha.
    """
    rng = np.random.default_rng(5)
    policy = Policy(threshold_pct=5.0, alpha=0.01)
    naive = grouped = 0
    trials = 200
    for _ in range(trials):
        base = _processes(rng, 100.0, 5, 30, 0.10, 0.01)
        cur = _processes(rng, 100.0, 5, 30, 0.10, 0.01)
        flat = lambda m: Metric(name=m.name, unit=m.unit, direction=m.direction, samples=m.samples)  # noqa: E731
        naive += bool(compare_runs(_run(flat(base)), _run(flat(cur)), policy).regressions)
        grouped += bool(compare_runs(_run(base), _run(cur), policy).regressions)
    assert naive / trials > 0.15
    assert grouped / trials <= 0.01 + 3 * math.sqrt(0.01 * 0.99 / trials)


@pytest.mark.slow
def test_processes_still_catch_a_large_slowdown():
    rng = np.random.default_rng(6)
    policy = Policy(threshold_pct=10.0, alpha=0.01)
    caught = sum(
        bool(
            compare_runs(
                _run(_processes(rng, 100.0, 6, 30, 0.03, 0.01)), _run(_processes(rng, 140.0, 6, 30, 0.03, 0.01)), policy
            ).regressions
        )
        for _ in range(100)
    )
    assert caught >= 95


def test_calibrated_noise_makes_an_otherwise_significant_change_inconclusive():
    rng = np.random.default_rng(7)
    base = Metric(
        name="training_step_time_ms",
        unit="ms",
        direction=Direction.LOWER,
        samples=tuple(100 * rng.lognormal(0, 0.01, 200)),
    )
    cur = Metric(
        name="training_step_time_ms",
        unit="ms",
        direction=Direction.LOWER,
        samples=tuple(115 * rng.lognormal(0, 0.01, 200)),
    )
    plain = compare_runs(_run(base), _run(cur), Policy())
    assert [c.verdict for c in plain.comparisons] == [Verdict.REGRESSED]
    noisy = compare_runs(_run(base), _run(cur), Policy(noise={"training_step_time_ms": 0.10}))
    (c,) = noisy.comparisons
    assert c.verdict is Verdict.INCONCLUSIVE
    assert c.required_unit == "processes" and c.required_n is not None and c.required_n > 1
    assert "calibration" in c.noise
    quiet = compare_runs(_run(base), _run(cur), Policy(noise={"training_step_time_ms": 0.01}))
    assert [c.verdict for c in quiet.comparisons] == [Verdict.REGRESSED]


def test_noise_key_per_statistic():
    policy = Policy(noise={"inference_latency_us": 0.05, "inference_latency_us:p99": 0.2})
    assert policy.noise_for("inference_latency_us", "p50") == 0.05
    assert policy.noise_for("inference_latency_us", "p99") == 0.2
    assert policy.noise_for("inference_latency_us", "p95") is None
    with pytest.raises(ValueError, match="noise"):
        Policy(noise={"x": -1.0})


def test_paired_test_cancels_shared_drift():
    """Interleaved pairs share each moment's speed: the paired test sees +8 % through ±20 % drift."""
    rng = np.random.default_rng(8)
    phases = np.exp(rng.normal(0, 0.2, 8))  # the machine's speed at each pair's moment
    base = _metric([list(100 * ph * rng.lognormal(0, 0.01, 20)) for ph in phases])
    cur = _metric([list(108 * ph * rng.lognormal(0, 0.01, 20)) for ph in phases])
    policy = Policy(threshold_pct=5.0)
    unpaired = compare_runs(_run(base), _run(cur), policy)
    assert [c.verdict for c in unpaired.comparisons] != [Verdict.REGRESSED]
    paired = compare_runs(_run(base), _run(cur), policy, paired=True)
    (c,) = paired.comparisons
    assert c.verdict is Verdict.REGRESSED
    assert c.worse == pytest.approx(0.08, abs=0.01)
    assert "paired over 8" in c.noise


def test_paired_needs_matching_groups():
    rng = np.random.default_rng(9)
    base = _metric([list(100 * rng.lognormal(0, 0.01, 20)) for _ in range(4)])
    cur = _metric([list(100 * rng.lognormal(0, 0.01, 20)) for _ in range(3)])
    (c,) = compare_runs(_run(base), _run(cur), Policy(), paired=True).comparisons
    assert "paired" not in c.noise
