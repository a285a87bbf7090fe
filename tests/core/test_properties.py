"""Hypothesis properties of the statistics and the decision (docs/design.md §8: Hypothesis for
properties). Each property holds for every input, so a counter-example is a bug."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from perfgate.core.compare import Verdict, compare_runs
from perfgate.core.decision._significance import holm
from perfgate.core.metrics import Direction
from perfgate.core.policy import Policy
from perfgate.core.schema import Metric, Run
from perfgate.core.stats import quantile_ci, summarize

PROPERTY_SETTINGS = settings(max_examples=60, deadline=None)

p_values = st.lists(st.floats(min_value=0.0, max_value=1.0), max_size=30)
positive = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False)
samples = st.lists(positive, min_size=1, max_size=40)
directions = st.sampled_from([Direction.LOWER, Direction.HIGHER])


@PROPERTY_SETTINGS
@given(p_values)
def test_holm_adjusted_bounds_and_order(raw: list[float]) -> None:
    """raw <= adjusted <= min(1, m * raw), and the adjustment never reorders the p-values."""
    adjusted = holm(raw)
    assert len(adjusted) == len(raw)
    for r, a in zip(raw, adjusted, strict=True):
        assert r <= a <= min(1.0, len(raw) * r) + 1e-12
    for i in range(len(raw)):
        for j in range(len(raw)):
            if raw[i] < raw[j]:
                assert adjusted[i] <= adjusted[j]


@PROPERTY_SETTINGS
@given(samples)
def test_summary_is_ordered_and_matches_numpy(values: list[float]) -> None:
    """min <= p50 <= p95 <= p99 <= max; median = p50 (np.median and the type-7 lerp may differ
    in the last bit); spreads are non-negative; numpy agrees."""
    s = summarize(values)
    assert s.min <= s.p50 <= s.p95 <= s.p99 <= s.max
    assert math.isclose(s.median, s.p50, rel_tol=1e-12)
    assert s.stdev >= 0 and s.mad >= 0
    assert s.mean == np.mean(values)
    assert math.isclose(s.p95, float(np.percentile(values, 95)), rel_tol=1e-12)


@PROPERTY_SETTINGS
@given(samples, st.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_median_interval_contains_the_median(values: list[float], confidence: float) -> None:
    """The order-statistic interval of the median is inside [min, max] and contains it."""
    lo, hi = quantile_ci(values, "median", confidence)
    assert min(values) <= lo <= summarize(values).median <= hi <= max(values)


def _run(metrics: dict[str, tuple[Direction, list[float]]]) -> Run:
    return Run(
        model="dqn",
        metrics={
            name: Metric(name=name, unit="ms", direction=direction, samples=tuple(values))
            for name, (direction, values) in metrics.items()
        },
    )


@PROPERTY_SETTINGS
@given(
    st.dictionaries(st.sampled_from(["a_ms", "b_ms", "c_ms"]), st.tuples(directions, samples), min_size=1),
    st.floats(min_value=0.0, max_value=50.0),
)
def test_identical_runs_never_regress(metrics: dict[str, tuple[Direction, list[float]]], threshold: float) -> None:
    """A run compared with itself never regresses, at any threshold (even 0 %); worse is 0."""
    run = _run(metrics)
    result = compare_runs(run, run, Policy(threshold_pct=threshold))
    assert result.exit_code == 0
    for c in result.comparisons:
        assert c.verdict is not Verdict.REGRESSED
        assert c.worse == 0.0


@PROPERTY_SETTINGS
@given(
    samples,
    directions,
    st.floats(min_value=0.02, max_value=0.9) | st.floats(min_value=1.02, max_value=5.0),
)
def test_worse_is_positive_iff_current_is_worse(values: list[float], direction: Direction, ratio: float) -> None:
    """Scaling every sample by r: worse > 0 exactly when r moves the metric the bad way (up
    for times, down for rates), and worse = r - 1 (times) or 1 - r (rates)."""
    baseline = _run({"m": (direction, values)})
    current = _run({"m": (direction, [v * ratio for v in values])})
    (c,) = compare_runs(baseline, current, Policy()).comparisons
    assert c.worse is not None
    current_is_worse = ratio > 1.0 if direction is Direction.LOWER else ratio < 1.0
    assert (c.worse > 0) == current_is_worse
    expected = ratio - 1.0 if direction is Direction.LOWER else 1.0 - ratio
    assert math.isclose(c.worse, expected, rel_tol=1e-9, abs_tol=1e-9)
    if c.verdict is Verdict.REGRESSED:
        assert current_is_worse
