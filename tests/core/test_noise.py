"""Run-to-run noise: its estimates, and a decision that does not mistake it for a change."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from perfgate.core.baseline import pool_runs
from perfgate.core.compare import Verdict, compare_runs
from perfgate.core.metrics import Direction
from perfgate.core.noise import NoiseModel, between_groups, calibrate_sigma, independent_runs, normalised
from perfgate.core.policy import Policy
from perfgate.core.schema import Metric, Reference, Run


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


def _phased_run(
    rng: np.random.Generator,
    level: float,
    processes: int,
    *,
    phase: float,
    process: float,
    cv: float,
    n: int = 30,
    elasticity: float = 1.0,
) -> tuple[Metric, Metric]:
    """One run of consecutive worker processes on a machine whose speed moves in phases.

    The phase (one draw per run) slows every process of the run alike; each process adds its
    own offset; samples scatter by ``cv`` within it. Returns the stage's raw metric and the same
    metric with a reference kernel timed with each sample (it sees the phase, with 1 % jitter).
    The stage's log time moves ``elasticity`` times as much as the kernel's with the phase.
    """
    speed = math.exp(rng.normal(0, phase))
    groups, refs = [], []
    for _ in range(processes):
        offset = math.exp(rng.normal(0, process))
        groups.append(list(level * speed**elasticity * offset * rng.lognormal(0, cv, n)))
        refs += list(3e-4 * speed * rng.lognormal(0, 0.01, n))
    raw = _metric(groups)
    return raw, dataclasses.replace(raw, reference=Reference(kernel="interpreter", seconds=tuple(refs)))


def _run(metric: Metric) -> Run:
    return Run(model="dqn", metrics={metric.name: metric})


TRIALS = 300
TOLERANCE = 3 * math.sqrt(0.01 * 0.99 / TRIALS)


@pytest.mark.slow
def test_phase_correlated_processes_are_not_taken_as_independent():
    """A/A on a machine whose phase (SD 10 %) spans all 5 consecutive processes of a run.

    Trusting the spread between the processes (3 %) as the run-to-run noise, as a test that
    takes them as independent draws does, raises alarms in a large share of the checks; the
    default assumption keeps the false alarms within alpha.
    """
    rng = np.random.default_rng(5)
    trusting = Policy(threshold_pct=5.0, assumed_raw=NoiseModel(phase=0.0, process=0.0))
    default = Policy(threshold_pct=5.0)
    naive = safe = 0
    for _ in range(TRIALS):
        base, _ = _phased_run(rng, 100.0, 5, phase=0.10, process=0.03, cv=0.01)
        cur, _ = _phased_run(rng, 100.0, 5, phase=0.10, process=0.03, cv=0.01)
        naive += bool(compare_runs(_run(base), _run(cur), trusting).regressions)
        result = compare_runs(_run(base), _run(cur), default)
        safe += bool(result.regressions)
        assert all(c.noise_assumed for c in result.comparisons)
    assert naive / TRIALS > 0.15
    assert safe / TRIALS <= 0.01 + TOLERANCE


@pytest.mark.slow
def test_normalised_times_keep_alpha_and_catch_what_raw_times_cannot():
    """The reference kernel sees the phase, so normalised times compare 4 + 4 processes tightly.

    A/A: false alarms within alpha. A +30 % slowdown: caught almost always normalised, and
    almost never raw, where the phase (SD 10 %) makes it indistinguishable from noise. The
    stage here follows its kernel exactly, so the policy trusts the normalisation whatever the
    kernel's change (``index_shift=0``); the next test is the machine where it does not.
    """
    rng = np.random.default_rng(6)
    policy = Policy(threshold_pct=10.0, index_shift=0.0)
    alarms = caught = caught_raw = 0
    for _ in range(TRIALS):
        _, a = _phased_run(rng, 100.0, 4, phase=0.10, process=0.03, cv=0.02)
        _, b = _phased_run(rng, 100.0, 4, phase=0.10, process=0.03, cv=0.02)
        alarms += bool(compare_runs(_run(a), _run(b), policy).regressions)
        raw_slow, slow = _phased_run(rng, 130.0, 4, phase=0.10, process=0.03, cv=0.02)
        result = compare_runs(_run(a), _run(slow), policy)
        caught += bool(result.regressions)
        assert all(c.reference == "interpreter" for c in result.comparisons)
        raw_base = dataclasses.replace(a, reference=None)
        caught_raw += bool(compare_runs(_run(raw_base), _run(raw_slow), policy).regressions)
    assert alarms / TRIALS <= 0.01 + TOLERANCE
    assert caught / TRIALS >= 0.9
    assert caught_raw / TRIALS <= 0.2


@pytest.mark.slow
def test_a_stage_that_follows_its_kernel_roughly_is_no_alarm_across_a_change_of_speed():
    """Runs days apart, the machine's speed moving by a phase of SD 40 %: a stage whose time moves
    0.5 to 1.5 times as much as its kernel's (as measured between two days here) leaves a residue
    after normalising that grows with the kernel's change. Trusting the normalisation raises
    alarms on unchanged code; the default allows for the kernel's change and keeps alpha, and
    still catches a tripling of the time."""
    rng = np.random.default_rng(7)
    trusting, default = Policy(threshold_pct=10.0, index_shift=0.0), Policy(threshold_pct=10.0)
    naive = safe = caught = 0
    for _ in range(TRIALS):
        elasticity = float(rng.uniform(0.5, 1.5))  # the stage's own, the same in every run
        runs = [
            _phased_run(rng, level, 4, phase=0.40, process=0.03, cv=0.02, elasticity=elasticity)[1]
            for level in (100.0, 100.0, 300.0)
        ]
        naive += bool(compare_runs(_run(runs[0]), _run(runs[1]), trusting).regressions)
        result = compare_runs(_run(runs[0]), _run(runs[1]), default)
        safe += bool(result.regressions)
        caught += bool(compare_runs(_run(runs[0]), _run(runs[2]), default).regressions)
    assert naive / TRIALS > 0.1  # 17 % with this random generator
    assert safe / TRIALS <= 0.01 + TOLERANCE
    assert caught / TRIALS >= 0.8  # 90 %


def test_the_kernels_change_between_the_runs_widens_a_normalised_test_and_is_reported():
    """Hand values: the kernel ran twice as fast in the current run, so the test's SD gains
    index_shift × |log 2| and the comparison says both."""
    base = _metric([[10.0, 10.2, 9.8, 10.1] * 5])
    base = dataclasses.replace(base, reference=Reference(kernel="memory", seconds=(2e-3,) * 20))
    cur = dataclasses.replace(base, samples=tuple(v / 2 for v in base.samples))
    cur = dataclasses.replace(cur, reference=Reference(kernel="memory", seconds=(1e-3,) * 20))
    for shift, expected in ((0.0, 0.0), (0.5, 0.5 * math.log(2.0))):
        policy = Policy(index_shift=shift)
        (c,) = compare_runs(_run(base), _run(cur), policy).comparisons
        assert c.reference == "memory" and c.index_change == pytest.approx(-0.5)
        assert c.change == pytest.approx(0.0, abs=1e-12) and c.raw_change == pytest.approx(-0.5)
        assumed = policy.assumed_normalised.sigma(1, 1) ** 2 * 2
        _low, high = c.ci
        # the 95 % interval of a zero log change is ±1.96 SD (z, no degrees of freedom lost here)
        sd = math.log1p(high) / 1.959963984540054
        assert sd == pytest.approx(math.sqrt(assumed + expected**2), rel=0.05)
        assert ("reference kernel's change of -50%" in c.noise) == (shift > 0)


def test_normalisation_hand_values():
    """Times are divided by their reference, rates multiplied by it."""
    ref = Reference(kernel="compute", seconds=(0.5, 0.5, 2.0))
    time_metric = Metric(name="t", unit="ms", direction=Direction.LOWER, samples=(1.0, 2.0, 4.0), reference=ref)
    rate = Metric(name="r", unit="1/s", direction=Direction.HIGHER, samples=(10.0, 20.0, 40.0), reference=ref)
    assert normalised(time_metric).samples == (2.0, 4.0, 2.0)  # type: ignore[union-attr]
    assert normalised(rate).samples == (5.0, 10.0, 80.0)  # type: ignore[union-attr]
    assert normalised(dataclasses.replace(time_metric, reference=None)) is None


def test_normalised_change_in_a_check_by_hand():
    """Baseline: 10 ms with a 1 ms reference; current: 12 ms raw (+20 %) on a machine 20 % slower
    (1.2 ms reference): the normalised change is 0 and the raw one +20 %."""
    base = Metric(
        name="training_step_time_ms",
        unit="ms",
        direction=Direction.LOWER,
        samples=(10.0,) * 40,
        reference=Reference(kernel="interpreter", seconds=(1e-3,) * 40),
    )
    cur = dataclasses.replace(
        base, samples=(12.0,) * 40, reference=Reference(kernel="interpreter", seconds=(1.2e-3,) * 40)
    )
    (c,) = compare_runs(_run(base), _run(cur), Policy.quiet()).comparisons
    assert c.reference == "interpreter"
    assert c.change == pytest.approx(0.0)
    assert c.raw_change == pytest.approx(0.20)
    assert c.verdict is Verdict.UNCHANGED
    # one side without the index: raw times compared, +20 % and the raw noise assumption
    (raw,) = compare_runs(_run(dataclasses.replace(base, reference=None)), _run(cur), Policy()).comparisons
    assert raw.reference == "" and raw.change == pytest.approx(0.20) and raw.raw_change is None


def test_noise_model_variance_by_hand():
    model = NoiseModel(phase=0.10, process=0.08)
    assert model.variance(1, 4) == pytest.approx(0.01 + 0.0064 / 4)
    assert model.sigma(2, 1) == pytest.approx(math.sqrt(0.005 + 0.0064))


def test_pooled_history_runs_are_the_run_to_run_noise():
    """A baseline pooled from 6 runs spread in time: their spread is used, on a t test."""
    rng = np.random.default_rng(8)
    runs = [_run(_processes(rng, 100.0, 1, 30, 0.02, 0.01)) for _ in range(6)]
    base = pool_runs(runs)
    assert independent_runs(base) == 6
    (c,) = compare_runs(base, _run(_processes(rng, 130.0, 1, 30, 0.02, 0.01)), Policy()).comparisons
    assert "the spread of the baseline's 6 runs" in c.noise and not c.noise_assumed
    assert c.verdict is Verdict.REGRESSED


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
    plain = compare_runs(_run(base), _run(cur), Policy.quiet())
    assert [c.verdict for c in plain.comparisons] == [Verdict.REGRESSED]
    assumed = compare_runs(_run(base), _run(cur), Policy())
    assert [c.verdict for c in assumed.comparisons] == [Verdict.INCONCLUSIVE]
    noisy = compare_runs(_run(base), _run(cur), Policy(noise={"training_step_time_ms": 0.10}))
    (c,) = noisy.comparisons
    assert c.verdict is Verdict.INCONCLUSIVE and not c.noise_assumed
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


def test_a_report_across_a_change_of_speed_says_so_and_what_would_decide():
    """The kernel ran twice as fast, the stage 1.5 times: +33 % normalised, which the kernel's
    change leaves undecided; the report names the change and a way that does not depend on it."""
    from perfgate.report.markdown import render_markdown

    base = _metric([[10.0, 10.2, 9.8, 10.1] * 5])
    base = dataclasses.replace(base, reference=Reference(kernel="memory", seconds=(2e-3,) * 20))
    cur = dataclasses.replace(base, samples=tuple(v / 1.5 for v in base.samples))
    cur = dataclasses.replace(cur, reference=Reference(kernel="memory", seconds=(1e-3,) * 20))
    result = compare_runs(_run(base), _run(cur), Policy())
    (c,) = result.comparisons
    assert c.verdict.value == "inconclusive" and c.change == pytest.approx(2 / 1.5 - 1)
    text = render_markdown(result)
    assert (
        "The machine ran at another speed than when the baseline was measured (reference kernels: memory -50.0%)"
        in text
    )
    assert (
        "a baseline measured at the machine's present speed (its memory reference kernel changed -50.0% since)" in text
    )
    # trusting the normalisation, the same runs are a regression
    assert compare_runs(_run(base), _run(cur), Policy(index_shift=0.0)).regressions
