"""Tests for :mod:`perfgate.core.decision._significance`, three ways (docs/design.md §8).

Hand values: Holm's step-down (Holm 1979) on small vectors, normal tail areas for the z
test, the delta-method standard error of a log ratio. Seeded Monte-Carlo: under H0 the
quantile z test rejects at its nominal level. Edge cases: zero standard error.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from perfgate.core.decision._significance import holm, log_ratio_se, z_test_worse
from perfgate.core.stats import quantile, quantile_ci


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
