"""Change points over a metric's history (:mod:`perfgate.core.changepoints`).

Three ways (docs/design.md §8): hand-computed values (the t statistic and the Bonferroni factor
against scipy's t-test), seeded Monte-Carlo checks (false alarms on noise, precision and
recall on steps of 3 sigma, the slow drift of ten +1 % steps: target G9 of
docs/design.md §11), and edge cases plus a property (affine invariance).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from perfgate.core.changepoints import METHODS, ChangePoint, detect, seeded_intervals


def _steps(rng: np.random.Generator, n: int = 200, sigma: float = 1.0) -> tuple[np.ndarray, list[int]]:
    """n points of N(level, sigma) with 1-3 steps of 3-6 sigma, segments >= 15 points apart."""
    count = int(rng.integers(1, 4))
    while True:
        where = sorted(int(v) for v in rng.choice(np.arange(15, n - 15), size=count, replace=False))
        if all(b - a >= 15 for a, b in itertools.pairwise(where)):
            break
    level = np.zeros(n)
    for w in where:
        level[w:] += rng.choice([-1.0, 1.0]) * rng.uniform(3.0, 6.0) * sigma
    return 100.0 + level + rng.normal(0.0, sigma, n), where


# --- hand-computed ----------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_single_step_matches_scipy_t_test_with_bonferroni(method):
    x = [1.0, 2.0, 1.0, 2.0, 1.0, 5.0, 6.0, 5.0, 6.0, 5.0]
    (cp,) = detect(x, method=method)
    assert cp.index == 5
    ref = sps.ttest_ind(x[5:], x[:5], equal_var=True)
    assert cp.t == pytest.approx(ref.statistic, rel=1e-10)
    candidates = 10 - 2 * 3 + 1  # split positions 3..7 with min_size 3
    assert cp.p_value == pytest.approx(min(1.0, ref.pvalue * candidates), rel=1e-8)
    assert (cp.before, cp.after) == pytest.approx((1.4, 5.4))
    assert cp.change == pytest.approx(5.4 / 1.4 - 1.0)
    assert cp.confidence == pytest.approx(1.0 - cp.p_value)


def _seeded_factor(n: int, min_size: int) -> int:
    return sum(hi - lo - 2 * min_size + 1 for lo, hi in seeded_intervals(n, 2 * min_size))


def test_seeded_intervals_cover_every_scale_with_half_overlap():
    assert seeded_intervals(20, 6) == [(0, 10), (0, 20), (5, 15), (10, 20)]
    assert seeded_intervals(12, 4) == [(0, 6), (0, 12), (3, 9), (6, 12)]
    assert _seeded_factor(12, 2) == 9 + 3 * 3


def test_a_reverted_regression_is_two_change_points_tested_between_neighbours():
    x = [10.0, 11.0, 10.0, 11.0, 20.0, 21.0, 20.0, 21.0, 10.0, 11.0, 10.0, 11.0]
    cps = detect(x, min_size=2, alpha=0.01)
    assert [c.index for c in cps] == [4, 8]
    first = sps.ttest_ind(x[4:8], x[0:4], equal_var=True)
    assert cps[0].t == pytest.approx(first.statistic, rel=1e-10)
    assert cps[0].p_value == pytest.approx(first.pvalue * _seeded_factor(12, 2), rel=1e-8)
    assert cps[1].change == pytest.approx(10.5 / 20.5 - 1.0)
    # regression for the weakness that made `seeded` the default: one split of the whole
    # series sees a short bump as a small shift, so plain binary segmentation misses it
    assert detect(x, method="binseg", min_size=2, alpha=0.01) == []
    assert detect(x, method="edivisive", min_size=2, alpha=0.01) == []


def test_a_short_bump_in_a_long_history_is_found():
    rng = np.random.default_rng(11)
    both = 0
    for _ in range(40):
        x = rng.normal(100.0, 1.0, 200)
        x[90:110] += 3.0
        got = [c.index for c in detect(x)]
        both += any(abs(g - 90) <= 2 for g in got) and any(abs(g - 110) <= 2 for g in got)
    assert both >= 38


def test_noiseless_step_is_certain():
    (cp,) = detect([3.0] * 6 + [4.0] * 6)
    assert cp == ChangePoint(index=6, before=3.0, after=4.0, change=pytest.approx(1 / 3), p_value=0.0, t=math.inf)


# --- Monte Carlo ---------------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_false_alarms_on_noise_are_rare(method):
    rng = np.random.default_rng(7)
    alarms = 0
    for i in range(300):
        x = rng.normal(100.0, 1.0, 200) if i % 2 else 100.0 * rng.lognormal(0.0, 0.05, 200)
        alarms += bool(detect(x, method=method))
    assert alarms <= 3  # alpha 0.001 per series; 1 % allows for the lognormal tail


@pytest.mark.parametrize("method", METHODS)
def test_steps_of_three_sigma_are_found_where_they_are(method):
    rng = np.random.default_rng(20261129)
    hits = truth = found = 0
    for _ in range(100):
        x, where = _steps(rng)
        got = [c.index for c in detect(x, method=method)]
        truth += len(where)
        found += len(got)
        hits += sum(any(abs(g - w) <= 2 for g in got) for w in where)
    recall = hits / truth
    precision = hits / found if found else 0.0
    assert recall >= 0.9, recall
    assert precision >= 0.9, precision


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("tail", [0, 20])
def test_slow_drift_of_ten_one_percent_steps_is_a_change(method, tail):
    """Ten consecutive +1 % commits, each under any per-check threshold, must show up (G9)."""
    detected = 0
    for seed in range(30):
        rng = np.random.default_rng(seed)
        level = np.r_[np.full(50, 100.0), 100.0 * 1.01 ** np.arange(1, 11), np.full(tail, 100.0 * 1.01**10)]
        x = level * rng.lognormal(0.0, 0.01, level.size)
        cps = detect(x, method=method)
        detected += any(45 <= c.index <= 61 and c.change > 0.03 for c in cps)
    assert detected == 30


def test_a_step_below_the_noise_is_not_claimed():
    rng = np.random.default_rng(3)
    claimed = sum(bool(detect(np.r_[rng.normal(0, 1, 100), rng.normal(0.1, 1, 100)] + 50)) for _ in range(50))
    assert claimed <= 2


# --- edge cases and properties ----------------------------------------------------------------


@pytest.mark.parametrize("values", [[], [1.0], [1.0, 2.0, 3.0, 4.0, 5.0], [7.0] * 50])
def test_too_short_or_constant_series_have_no_change_point(values):
    assert detect(values) == []
    assert detect(values, method="edivisive") == []


def test_min_change_drops_small_shifts():
    x = [100.0, 100.1, 99.9, 100.0, 100.1, 99.9, 102.0, 102.1, 101.9, 102.0, 102.1, 101.9]
    assert [c.index for c in detect(x)] == [6]
    assert detect(x, min_change=0.05) == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"method": "pelt"}, "unknown change-point method"),
        ({"alpha": 0.0}, "alpha"),
        ({"alpha": 1.0}, "alpha"),
        ({"min_size": 1}, "min_size"),
        ({"min_change": -0.1}, "min_change"),
    ],
)
def test_bad_parameters_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        detect([1.0] * 10, **kwargs)


@pytest.mark.parametrize("bad", [[1.0, float("nan"), 2.0], [1.0, float("inf")], [[1.0, 2.0], [3.0, 4.0]]])
def test_bad_values_are_refused(bad):
    with pytest.raises(ValueError):
        detect(bad)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    scale=st.floats(0.01, 1000.0),
    offset=st.floats(0.0, 1e4),
    method=st.sampled_from(METHODS),
)
def test_change_points_do_not_depend_on_units(seed, scale, offset, method):
    x, _ = _steps(np.random.default_rng(seed), n=80)
    reference = detect(x, method=method)
    moved = detect(scale * x + offset, method=method)
    assert [c.index for c in moved] == [c.index for c in reference]
    for a, b in zip(moved, reference, strict=True):
        assert a.t == pytest.approx(b.t, rel=1e-6)
