"""Steady state within a run (:mod:`perfgate.core.stability`, target G14 of docs/design.md §11).

Warm-up trimming, drift with its interval, and the promise that a first step 10x slower
than the rest never raises an alarm in a check. Seeded simulations; no timing.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from perfgate.core.compare import Verdict, compare_runs
from perfgate.core.metrics import known_metrics
from perfgate.core.policy import Policy
from perfgate.core.schema import Machine, Metric, Run
from perfgate.core.stability import SteadyState, steady_state, trim_warmup


def _steps(rng: np.random.Generator, n: int, cv: float = 0.03, median: float = 100.0) -> np.ndarray:
    return median * rng.lognormal(0.0, cv, n)


# --- warm-up ------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [3, 5, 10, 29, 50, 200, 3000])
def test_a_first_step_ten_times_slower_is_always_trimmed(n):
    rng = np.random.default_rng(n)
    for _ in range(100 if n <= 200 else 10):
        x = _steps(rng, n)
        x[0] *= 10.0
        state = steady_state(x)
        assert 1 <= state.start <= max(1, n // 2)
        assert state.settled
        assert state.median == pytest.approx(float(np.median(x[state.start :])))
        assert x[0] not in x[state.start :]


@pytest.mark.parametrize("n", [5, 10, 50, 200])
def test_clean_runs_are_rarely_trimmed(n):
    rng = np.random.default_rng(100 + n)
    trimmed = sum(steady_state(_steps(rng, n)).start > 0 for _ in range(300))
    assert trimmed <= 9  # 3 %


def test_a_gradual_warm_up_is_trimmed_to_where_it_settles():
    rng = np.random.default_rng(5)
    for _ in range(50):
        warm = np.linspace(5.0, 1.0, 20, endpoint=False)  # 5x slower, settling over 20 steps
        x = 100.0 * np.r_[warm, np.ones(180)] * rng.lognormal(0.0, 0.02, 200)
        state = steady_state(x)
        assert 15 <= state.start <= 25, state.start
        assert state.settled and not state.drifting


def test_a_level_shift_in_the_first_half_is_warm_up():
    rng = np.random.default_rng(6)
    x = np.r_[rng.normal(130.0, 2.0, 15), rng.normal(100.0, 2.0, 200)]
    assert abs(steady_state(x).start - 15) <= 2


# --- drift --------------------------------------------------------------------------------


def test_drift_of_an_exact_line_is_its_slope():
    x = 100.0 + 0.5 * np.arange(60)
    state = steady_state(x)
    assert state.drift_per_sample == pytest.approx(0.5)
    assert state.drift_ci == pytest.approx((0.5, 0.5))
    steady = x[state.start :]
    assert state.relative_drift == pytest.approx(0.5 * (steady.size - 1) / float(np.median(steady)))
    assert state.drifting
    assert not state.settled  # a trend through the whole run is not a steady state


def test_drift_interval_matches_theil_sen():
    rng = np.random.default_rng(8)
    x = 100.0 * (1.0 + np.linspace(0.0, 0.15, 300)) * rng.lognormal(0.0, 0.03, 300)
    state = steady_state(x, confidence=0.9)
    ref = sps.theilslopes(x[state.start :], np.arange(state.n, dtype=float), alpha=0.9)
    assert state.drift_per_sample == pytest.approx(ref[0])
    assert state.drift_ci == pytest.approx((ref[2], ref[3]))
    assert state.drifting and state.relative_drift > 0.05
    assert state.relative_drift_ci[0] < state.relative_drift < state.relative_drift_ci[1]


def test_steady_runs_are_rarely_called_drifting():
    rng = np.random.default_rng(9)
    drifting = sum(steady_state(_steps(rng, 100)).drifting for _ in range(200))
    assert drifting <= 4


def test_a_slow_leak_is_caught_and_a_small_one_tolerated():
    rng = np.random.default_rng(10)
    base = np.arange(400)
    leak = steady_state(100.0 * (1.0 + 0.25 * base / 400) * rng.lognormal(0.0, 0.02, 400))
    tiny = steady_state(100.0 * (1.0 + 0.01 * base / 400) * rng.lognormal(0.0, 0.002, 400))
    assert leak.drifting
    assert tiny.drift_ci[0] > 0 and not tiny.drifting  # real, but under the 5 % tolerance


def test_very_long_runs_use_batch_means():
    rng = np.random.default_rng(12)
    x = 100.0 * (1.0 + np.linspace(0.0, 0.2, 20_000)) * rng.lognormal(0.0, 0.03, 20_000)
    state = steady_state(x)
    steady = x[state.start :]
    expected = 0.2 * 100.0 / 20_000  # slope per sample of the underlying line
    assert state.drift_per_sample == pytest.approx(expected, rel=0.05)
    assert state.relative_drift == pytest.approx(
        state.drift_per_sample * (steady.size - 1) / float(np.median(steady)), rel=1e-9
    )
    assert state.drifting and not state.settled


# --- edge cases ---------------------------------------------------------------------------


def test_tiny_and_constant_runs():
    one = steady_state([5.0])
    assert one == SteadyState(
        start=0,
        n=1,
        mean=5.0,
        median=5.0,
        drift_per_sample=0.0,
        drift_ci=(0.0, 0.0),
        relative_drift=0.0,
        relative_drift_ci=(0.0, 0.0),
        drifting=False,
        settled=True,
    )
    flat = steady_state([2.0] * 40)
    assert (flat.start, flat.n, flat.drift_per_sample, flat.drifting) == (0, 40, 0.0, False)
    spike = steady_state([20.0] + [2.0] * 39)
    assert spike.start == 1 and spike.warmup == 1 and spike.median == 2.0
    assert trim_warmup([20.0, 2.0, 2.1, 1.9, 2.0, 2.0]) == (2.0, 2.1, 1.9, 2.0, 2.0)


@pytest.mark.parametrize(
    ("samples", "kwargs"),
    [
        ([], {}),
        ([1.0, float("nan")], {}),
        ([[1.0]], {}),
        ([1.0], {"confidence": 1.0}),
        ([1.0], {"drift_tolerance": -1}),
    ],
)
def test_bad_input_is_refused(samples, kwargs):
    with pytest.raises(ValueError):
        steady_state(samples, **kwargs)


# --- in a check ---------------------------------------------------------------------------


def _run(samples: dict[str, np.ndarray]) -> Run:
    metrics = {
        name: Metric(
            name=name,
            unit=known_metrics()[name].unit,
            direction=known_metrics()[name].direction,
            samples=tuple(float(v) for v in values),
        )
        for name, values in samples.items()
    }
    return Run(model="dqn", metrics=metrics, machine=Machine(fingerprint="m"))


@pytest.mark.parametrize("trim", [False, True])
def test_a_ten_times_slower_first_step_never_raises_an_alarm(trim):
    """G14: warm-up is not a regression, with or without trimming (100 seeded A/A checks)."""
    rng = np.random.default_rng(14)
    policy = Policy()
    for _ in range(100):
        base = {"training_step_time_ms": _steps(rng, 50), "inference_latency_us": _steps(rng, 400, median=45.0)}
        cur = {"training_step_time_ms": _steps(rng, 50), "inference_latency_us": _steps(rng, 400, median=45.0)}
        for values in (*base.values(), *cur.values()):
            values[0] *= 10.0  # the first step of every run pays for the warm-up
        if trim:
            base = {k: np.asarray(trim_warmup(v)) for k, v in base.items()}
            cur = {k: np.asarray(trim_warmup(v)) for k, v in cur.items()}
        result = compare_runs(_run(base), _run(cur), policy)
        assert not result.regressions, [c.label for c in result.regressions]
        assert all(c.verdict is not Verdict.REGRESSED for c in result.comparisons)


def test_only_the_current_run_warming_up_does_not_alarm_after_trimming():
    rng = np.random.default_rng(15)
    policy = Policy()
    for _ in range(100):
        base = _steps(rng, 30)
        cur = _steps(rng, 30)
        cur[0] *= 10.0
        result = compare_runs(
            _run({"training_step_time_ms": base}),
            _run({"training_step_time_ms": np.asarray(trim_warmup(cur))}),
            policy,
        )
        assert not result.regressions
