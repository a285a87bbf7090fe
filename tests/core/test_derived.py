"""Derived metrics (:mod:`perfgate.core._derived`): a throughput that is the batch over each
call's time is one member of the family, and its ``min`` budget is the run's overall rate."""

from __future__ import annotations

import math

import numpy as np

from perfgate.core._derived import derived_metrics, is_derived_from
from perfgate.core.compare import compare_runs
from perfgate.core.decision._budgets import check_budgets, overall_rate
from perfgate.core.metrics import Direction
from perfgate.core.policy import Budget, Policy
from perfgate.core.schema import Metric, Run

BATCH = 128


def _step_run(times_ms: np.ndarray, *, extra: dict[str, Metric] | None = None) -> Run:
    times = tuple(float(t) for t in times_ms)
    metrics = {
        "training_step_time_ms": Metric(
            name="training_step_time_ms", unit="ms", direction=Direction.LOWER, samples=times
        ),
        "throughput_samples_per_sec": Metric(
            name="throughput_samples_per_sec",
            unit="samples/s",
            direction=Direction.HIGHER,
            samples=tuple(BATCH * 1000.0 / t for t in times),
        ),
        **(extra or {}),
    }
    return Run(model="ppo", metrics=metrics)


def test_a_rate_of_the_same_calls_is_derived_and_an_independent_one_is_not() -> None:
    rng = np.random.default_rng(1)
    run = _step_run(rng.lognormal(math.log(20.0), 0.1, 40))
    assert derived_metrics(run) == {"throughput_samples_per_sec": "training_step_time_ms"}
    independent = Metric(
        name="tokens_per_sec", unit="1/s", direction=Direction.HIGHER, samples=tuple(rng.lognormal(5.0, 0.1, 40))
    )
    run2 = _step_run(rng.lognormal(math.log(20.0), 0.1, 40), extra={"tokens_per_sec": independent})
    assert "tokens_per_sec" not in derived_metrics(run2)
    # constant times say nothing: any constant rate would look derived
    flat = Metric(name="t", unit="ms", direction=Direction.LOWER, samples=(2.0, 2.0, 2.0))
    rate = Metric(name="r", unit="1/s", direction=Direction.HIGHER, samples=(5.0, 5.0, 5.0))
    assert not is_derived_from(rate, flat)
    single = Metric(name="t", unit="ms", direction=Direction.LOWER, samples=(2.0,))
    assert not is_derived_from(Metric(name="r", unit="1/s", direction=Direction.HIGHER, samples=(500.0,)), single)


def test_derived_only_where_both_runs_say_so() -> None:
    rng = np.random.default_rng(2)
    cur = _step_run(rng.lognormal(math.log(20.0), 0.1, 40))
    old = Run(
        model="ppo",
        metrics={
            **cur.metrics,
            "throughput_samples_per_sec": Metric(
                name="throughput_samples_per_sec",
                unit="samples/s",
                direction=Direction.HIGHER,
                samples=tuple(rng.lognormal(8.0, 0.1, 40)),  # measured on its own
            ),
        },
    )
    assert derived_metrics(cur, old) == {}


def test_throughput_counts_once_in_holms_family() -> None:
    """Regression for the double count: the throughput takes the step time's adjusted p-value."""
    rng = np.random.default_rng(3)
    base = _step_run(rng.lognormal(math.log(20.0), 0.05, 60))
    cur = _step_run(rng.lognormal(math.log(20.0), 0.05, 60) * 1.25)
    result = compare_runs(base, cur, Policy.quiet())
    by = {c.metric: c for c in result.comparisons}
    step, rate = by["training_step_time_ms"], by["throughput_samples_per_sec"]
    assert rate.derived_from == "training_step_time_ms" and step.derived_from == ""
    assert rate.p_adjusted == step.p_adjusted == step.p_value  # a family of one: no Holm factor
    assert rate.p_value == step.p_value
    assert "derived from training_step_time_ms" in rate.noise
    assert rate.verdict is step.verdict


def test_a_min_budget_on_a_derived_rate_is_the_overall_rate_not_the_slowest_call() -> None:
    """Regression: one slow call (a PPO step that also collects a rollout) broke a {min = …} budget."""
    times = np.full(50, 10.0)
    times[::10] = 200.0  # every tenth call collects a rollout
    run = _step_run(times)
    limit = 4000.0  # overall 4,414 samples/s; the slowest call 640
    (check,) = check_budgets(
        run, (Budget(model="ppo", metric="throughput_samples_per_sec", statistic="min", limit=limit),)
    )
    expected = BATCH * 1000.0 * 50 / float(times.sum())  # total items over total time
    assert check.value == overall_rate(run.metrics["throughput_samples_per_sec"].samples)
    assert math.isclose(check.value or 0.0, expected, rel_tol=1e-12)
    assert check.ok and check.derived_from == "training_step_time_ms"
    assert "overall rate" in check.note
    assert min(run.metrics["throughput_samples_per_sec"].samples) < limit  # the slowest call is below it
    (median,) = check_budgets(
        run, (Budget(model="ppo", metric="throughput_samples_per_sec", statistic="median", limit=1.0),)
    )
    assert median.value == BATCH * 1000.0 / 10.0  # the median stays the per-call one


def test_overall_rate_of_a_stalled_call_is_zero() -> None:
    assert overall_rate((10.0, 0.0, 10.0)) == 0.0
    assert math.isclose(overall_rate((10.0, 20.0)), 2 / (1 / 10 + 1 / 20))
