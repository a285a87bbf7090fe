"""Tests for :mod:`perfgate.core.significance`, three ways (STYLE.md).

Hand values: one-sided Mann-Whitney U p-values by enumerating every equally likely split of
the ranks (exact null distribution, Mann & Whitney 1947), the normal approximation with tie
and continuity correction written out (Conover §5.1), Holm's step-down (Holm 1979) on small
vectors, and normal tail areas for the z test. Seeded Monte-Carlo: under H0 the one-sided
p-values are uniform enough that rejection rates sit at their nominal levels, and a real
shift is found. Edge cases: all equal, empty, a single sample, zero standard error.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from perfgate.core.significance import holm, log_ratio_se, mann_whitney_worse, z_test_worse
from perfgate.core.stats import quantile, quantile_ci

# --- Mann-Whitney U: hand values ------------------------------------------------------------


def _exact_p_greater(baseline: list[float], current: list[float]) -> float:
    """P(U >= u_obs) under H0 by enumerating all C(n, n_cur) rank splits (no ties)."""
    pooled = sorted(baseline + current)
    n_cur = len(current)

    def u_of(cur: tuple[float, ...]) -> int:
        base = [v for v in pooled if v not in cur]
        return sum(c > b for c in cur for b in base)

    observed = u_of(tuple(current))
    splits = list(itertools.combinations(pooled, n_cur))
    return sum(u_of(s) >= observed for s in splits) / len(splits)


@pytest.mark.parametrize(
    ("baseline", "current", "expected"),
    [
        # current {3,4} holds the top two ranks: 1 split of C(4,2) = 6
        ([1.0, 2.0], [3.0, 4.0], 1 / 6),
        # current {2,4}: U = 3; splits with U >= 3 are {2,4} and {3,4}: 2/6
        ([1.0, 3.0], [2.0, 4.0], 1 / 3),
        # current {4,5,6}: the single top split of C(6,3) = 20
        ([1.0, 2.0, 3.0], [4.0, 5.0, 6.0], 1 / 20),
        # current entirely better: every split has U >= 0
        ([3.0, 4.0], [1.0, 2.0], 1.0),
    ],
)
def test_mann_whitney_exact_small_cases(baseline: list[float], current: list[float], expected: float) -> None:
    """Exact one-sided p-values for "current is slower", checked against enumeration."""
    assert _exact_p_greater(baseline, current) == pytest.approx(expected)
    assert mann_whitney_worse(baseline, current, higher_is_worse=True) == pytest.approx(expected)


def test_mann_whitney_enumeration_random_small() -> None:
    """Five seeded 4-vs-5 samples without ties: exact p equals the enumerated one."""
    rng = np.random.default_rng(7)
    for _ in range(5):
        x = rng.permutation(9).astype(float) + 1.0
        baseline, current = x[:4].tolist(), x[4:].tolist()
        assert mann_whitney_worse(baseline, current, higher_is_worse=True) == pytest.approx(
            _exact_p_greater(baseline, current)
        )


def test_mann_whitney_direction_flips() -> None:
    """higher_is_worse=False asks "is current lower?" (throughput): [3,4] -> [1,2] gives 1/6."""
    assert mann_whitney_worse([3.0, 4.0], [1.0, 2.0], higher_is_worse=False) == pytest.approx(1 / 6)
    assert mann_whitney_worse([1.0, 2.0], [3.0, 4.0], higher_is_worse=False) == pytest.approx(1.0)


def test_mann_whitney_normal_approximation_by_hand() -> None:
    """n = 10 per side (> 8: asymptotic), every current value larger: U = 100, E[U] = 50,
    Var[U] = 10*10*21/12 = 175, z = (100 - 50 - 0.5)/sqrt(175) = 3.7418, p = 9.134e-5."""
    base = [float(v) for v in range(1, 11)]
    cur = [float(v) for v in range(11, 21)]
    expected = 0.5 * math.erfc((49.5 / math.sqrt(175.0)) / math.sqrt(2.0))
    assert expected == pytest.approx(9.1336e-5, rel=1e-4)
    assert mann_whitney_worse(base, cur, higher_is_worse=True) == pytest.approx(expected, rel=1e-9)


def test_mann_whitney_ties_by_hand() -> None:
    """[1,1,1] vs [2,2,2]: U = 9, E = 4.5, tie-corrected Var = 9/12 * (7 - (24+24)/30) = 4.05,
    z = (9 - 4.5 - 0.5)/sqrt(4.05) = 1.98762, p = 0.023427 (ties force the asymptotic method)."""
    expected = 0.5 * math.erfc((4.0 / math.sqrt(4.05)) / math.sqrt(2.0))
    assert mann_whitney_worse([1.0] * 3, [2.0] * 3, higher_is_worse=True) == pytest.approx(expected, rel=1e-9)


def test_mann_whitney_all_equal_is_one() -> None:
    """No information at all: p = 1, for either direction and unequal sizes."""
    assert mann_whitney_worse([5.0, 5.0], [5.0, 5.0, 5.0], higher_is_worse=True) == 1.0
    assert mann_whitney_worse([5.0] * 30, [5.0] * 30, higher_is_worse=False) == 1.0


def test_mann_whitney_empty_raises() -> None:
    """Both sides need samples."""
    with pytest.raises(ValueError, match="both sides"):
        mann_whitney_worse([], [1.0], higher_is_worse=True)
    with pytest.raises(ValueError, match="both sides"):
        mann_whitney_worse([1.0], [], higher_is_worse=True)


def test_mann_whitney_single_samples() -> None:
    """One sample each: the exact null has two equally likely orders, so p = 1/2 at best."""
    assert mann_whitney_worse([1.0], [2.0], higher_is_worse=True) == pytest.approx(0.5)


# --- Holm -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "adjusted"),
    [
        # sorted .01*3 = .03, .03*2 = .06, .04*1 = .04 -> max(.06, .04) = .06
        ([0.01, 0.04, 0.03], [0.03, 0.06, 0.06]),
        # .001*4 = .004, .02*3 = .06, .04*2 = .08, .5*1 = .5; returned in input order
        ([0.5, 0.001, 0.02, 0.04], [0.5, 0.004, 0.06, 0.08]),
        # .4*2 = .8, then .5*1 = .5 -> carried up to .8
        ([0.4, 0.5], [0.8, 0.8]),
        # .6*2 capped at 1
        ([0.6, 0.7], [1.0, 1.0]),
        # ties share the same adjusted value
        ([0.01, 0.01], [0.02, 0.02]),
        ([0.03], [0.03]),
        ([], []),
    ],
)
def test_holm_hand_values(raw: list[float], adjusted: list[float]) -> None:
    """Holm (1979) step-down adjusted p-values, worked out by hand, in the input order."""
    assert holm(raw) == pytest.approx(adjusted)


def test_holm_monotone_and_bounded() -> None:
    """Adjusted p-values keep the order of the raw ones, are >= raw, <= 1 and <= Bonferroni."""
    raw = np.random.default_rng(3).uniform(0, 0.2, 25).tolist()
    adj = holm(raw)
    order = np.argsort(raw)
    assert all(adj[i] <= adj[j] for i, j in itertools.pairwise(order))
    assert all(r <= a <= min(1.0, len(raw) * r) + 1e-15 for r, a in zip(raw, adj, strict=True))


# --- z test on the log quantile ratio --------------------------------------------------------


def test_z_test_hand_values() -> None:
    """Normal upper tail: sf(1.959964) = .025, sf(1.644854) = .05, sf(0) = .5; one-sided."""
    assert z_test_worse(1.959963984540054, 1.0) == pytest.approx(0.025)
    assert z_test_worse(0.1644853626951, 0.1) == pytest.approx(0.05)
    assert z_test_worse(0.0, 0.3) == pytest.approx(0.5)
    assert z_test_worse(-0.2, 0.1) == pytest.approx(1.0 - z_test_worse(0.2, 0.1))


def test_z_test_zero_se() -> None:
    """No spread: any worsening is certain, anything else is not."""
    assert z_test_worse(0.01, 0.0) == 0.0
    assert z_test_worse(0.0, 0.0) == 1.0
    assert z_test_worse(-0.01, 0.0) == 1.0


def test_log_ratio_se_by_hand() -> None:
    """Delta method: each side's SE of log value = CI width / (2 * 1.96) / value.

    Both sides 100 with 95 % CI (90, 110): 20/3.919928/100 = .0510214 each, hypot = .0721548.
    """
    se = log_ratio_se(100.0, (90.0, 110.0), 100.0, (90.0, 110.0), 0.95)
    assert se == pytest.approx(math.hypot(0.2 / 3.919927969080108, 0.2 / 3.919927969080108))
    assert se == pytest.approx(0.0721548, rel=1e-5)
    assert log_ratio_se(0.0, (0.0, 1.0), 5.0, (4.0, 6.0), 0.95) is None
    assert log_ratio_se(5.0, (4.0, 6.0), 0.0, (0.0, 0.0), 0.95) is None


# --- seeded Monte-Carlo ---------------------------------------------------------------------


def _tolerance(p: float, trials: int) -> float:
    """Half-width of a 99.9 % binomial band around p for ``trials`` trials."""
    return 3.3 * math.sqrt(p * (1.0 - p) / trials)


@pytest.mark.slow
@pytest.mark.parametrize(("n_base", "n_cur"), [(20, 20), (12, 40)])
def test_mann_whitney_null_rejection_rates(n_base: int, n_cur: int) -> None:
    """Under H0 (same law on both sides) the one-sided p-value rejects at its nominal rate.

    2000 seeded trials; at levels .01/.05/.10 the rejection rate must lie within a 99.9 %
    binomial band of the level (plus .005 for the discreteness of U). A test that never
    rejects, or a two-sided p (half the rate), fails. The law does not matter to a rank test
    (any monotone transform of the samples gives the same p), so one law is enough.
    """
    rng = np.random.default_rng(n_base * 1000 + n_cur)
    trials = 2000
    p = np.array(
        [
            mann_whitney_worse(
                rng.normal(100, 10, n_base).tolist(), rng.normal(100, 10, n_cur).tolist(), higher_is_worse=True
            )
            for _ in range(trials)
        ]
    )
    for level in (0.01, 0.05, 0.10):
        rate = float(np.mean(p < level))
        assert abs(rate - level) <= _tolerance(level, trials) + 0.005, (level, rate)


@pytest.mark.slow
def test_mann_whitney_power_and_one_sidedness() -> None:
    """A +10 % shift at 5 % CV (n = 20) is found almost always; a -10 % shift never is."""
    rng = np.random.default_rng(11)
    hits_worse = hits_better = 0
    for _ in range(300):
        base = rng.lognormal(0.0, 0.05, 20)
        noise = rng.lognormal(0.0, 0.05, 20)
        hits_worse += mann_whitney_worse(base.tolist(), (1.1 * noise).tolist(), higher_is_worse=True) < 0.01
        hits_better += mann_whitney_worse(base.tolist(), (noise / 1.1).tolist(), higher_is_worse=True) < 0.01
    assert hits_worse >= 0.97 * 300
    assert hits_better == 0


@pytest.mark.slow
@pytest.mark.parametrize(("statistic", "n"), [("p95", 60), ("p95", 200), ("p99", 300)])
def test_quantile_z_test_null_rejection_rate(statistic: str, n: int) -> None:
    """A/A for the tail test: log ratio of two log-normal samples' quantiles, SE from the
    order-statistic intervals; the one-sided rejection rate at .05 stays at or below .05
    (plus a 99.9 % Monte-Carlo band), and above 0 (the test is not vacuous)."""
    rng = np.random.default_rng(n)
    trials, rejections = 800, 0
    for _ in range(trials):
        a = rng.lognormal(3.0, 0.3, n).tolist()
        b = rng.lognormal(3.0, 0.3, n).tolist()
        va, vb = quantile(a, statistic), quantile(b, statistic)
        se = log_ratio_se(va, quantile_ci(a, statistic), vb, quantile_ci(b, statistic), 0.95)
        assert se is not None
        rejections += z_test_worse(math.log(vb / va), se) < 0.05
    rate = rejections / trials
    assert 0.0 < rate <= 0.05 + _tolerance(0.05, trials), rate


def test_normal_tail_helper_agrees_with_scipy() -> None:
    """The hand formula 0.5*erfc(z/sqrt 2) used above is the normal upper tail."""
    assert 0.5 * math.erfc(2.0 / math.sqrt(2.0)) == pytest.approx(float(sps.norm.sf(2.0)))
