"""The moderated t test across worker pairs (perfgate.core.decision._moderated): hand values, seeded
simulations of A/A and power against the plain paired t test, one pair far off, edge cases.

The simulations draw per-pair log ratios of 11 metrics the way ``perfgate ab`` sees them: each
worker process of a pair brings its own offset, so a pair's ratio is the difference of two
offsets. Two heavy-tailed offset families: Student t on 3 df, and a two-state layout offset
(a process is 8–13 % slower with probability 0.35, on either side at random, over a small t3
spread), as measured on the numpy stage (``docs/noise.md`` §5). The bulk runs through
:func:`_family`, which repeats :func:`perfgate.core.paired.decide_look`'s rule on the pure
functions (fast enough for thousands of checks); ``test_the_fast_family_is_decide_look``
holds the two to the same verdicts.

Measured (``benchmarks/paired_sim.py``, 1,000 checks per cell, one look, α = 0.05, threshold
0): A/A alarms of the moderated test 0.8–2.3 %, of the plain t 2.4–7.6 % (the plain t is over
α with two-state offsets at 3 pairs). +5 % on one metric at threshold 3 % with 4 pairs, 1.5 %
offset SD, α = 0.01 over the engine's looks: plain t 33/100, moderated 75/100.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special as sp
from scipy import stats as sps

from perfgate.core.compare import Verdict
from perfgate.core.decision._moderated import Prior, digamma, fit_prior, guarded, trigamma
from perfgate.core.decision._rule import log_threshold
from perfgate.core.decision._significance import holm
from perfgate.core.metrics import Direction
from perfgate.core.paired import SequentialLooks, decide_look
from perfgate.core.policy import Policy
from perfgate.core.schema import Metric, Run

M = 11  # metrics per check, as a DQN check has


def _run(units: list[str], pairs: int) -> Run:
    return Run(
        model="dqn",
        metrics={
            f"m{i}": Metric(name=f"m{i}", unit=u, direction=Direction.LOWER, samples=(1.0,) * pairs)
            for i, u in enumerate(units)
        },
    )


# --- hand values -------------------------------------------------------------------------


def test_special_functions_match_scipy():
    for x in (0.05, 0.5, 1.0, 1.5, 3.0, 7.5, 60.0):
        assert digamma(x) == pytest.approx(float(sp.digamma(x)), abs=1e-9)
        assert trigamma(x) == pytest.approx(float(sp.polygamma(1, x)), rel=1e-9)


def test_prior_fit_hand_computed():
    """Three metrics on 2 df: e = log s² - ψ(1) + log 1; d0 from the spread of e beyond ψ'(1)."""
    s2 = [1e-4, 4e-4, 9e-4]
    e = np.log(s2) - sp.digamma(1.0)
    excess = float(np.var(e, ddof=1)) - float(sp.polygamma(1, 1.0))
    assert excess < 0  # sampling alone explains this spread: the variances look alike
    prior = fit_prior([(v, 2) for v in s2])
    assert prior is not None and prior.d0 == math.inf
    assert prior.s0_sq == pytest.approx(math.exp(float(e.mean())))
    assert prior.df_for(2) == 4  # capped at the other two metrics' df
    wide = fit_prior([(v, 2) for v in (1e-6, 1e-4, 1e-2, 1.0)])
    assert wide is not None and 0 < wide.d0 < 4
    d0 = wide.d0
    assert float(sp.polygamma(1, d0 / 2)) == pytest.approx(
        float(np.var(np.log([1e-6, 1e-4, 1e-2, 1.0]), ddof=1)) - float(sp.polygamma(1, 1.0)), rel=1e-6
    )
    assert fit_prior([(1e-4, 2), (2e-4, 2)]) is None  # two metrics: nothing to borrow
    assert fit_prior([(1e-4, 2), (2e-4, 2), (0.0, 2)]) is None  # a zero spread teaches nothing


def test_moderated_statistic_hand_computed():
    """d = [0.05, 0.06, 0.04, 0.05]: mean 0.05, s² = 0.0002/3; prior s0² = 1e-4 on 6 df.
    s̃² = (6·1e-4 + 3·s²) / 9, t = 0.05 / sqrt(s̃²/4) on 9 df."""
    d = [0.05, 0.06, 0.04, 0.05]
    prior = Prior(s0_sq=1e-4, d0=6.0, metrics=4, total_df=12)
    m = guarded(d, prior, bound=math.log1p(0.03))
    s2 = 0.0002 / 3
    s_tilde_sq = (6 * 1e-4 + 3 * s2) / 9
    t = 0.05 / math.sqrt(s_tilde_sq / 4)
    assert m.d0 == 6 and m.df == 9
    assert m.sd == pytest.approx(math.sqrt(s_tilde_sq))
    assert m.se == pytest.approx(math.sqrt(s_tilde_sq / 4))
    assert m.log_worse == pytest.approx(0.05)
    # the family sees the largest p among the full test and each pair left out (all < 1/2 here)
    left_out = []
    for j in range(4):
        r = np.delete(d, j)
        v = (6 * 1e-4 + 2 * float(np.var(r, ddof=1))) / 8
        left_out.append(float(sps.t(8).sf(r.mean() / math.sqrt(v / 3))))
    full = float(sps.t(9).sf(t))
    assert m.p_value == pytest.approx(max([full, *left_out]), rel=1e-6)
    assert m.p_value > full
    plain = guarded(d, None, bound=0.0)
    assert plain.d0 == 0 and plain.df == 3
    assert plain.p_value == pytest.approx(sps.ttest_1samp(d, 0.0, alternative="greater").pvalue)


def test_a_metric_unlike_its_group_keeps_its_own_variance():
    prior = Prior(s0_sq=0.01**2, d0=20.0, metrics=11, total_df=33)
    m = guarded([0.10, 0.11, -0.01, 0.0], prior, bound=math.log1p(0.03))  # two-state offsets: SD 6.6 %
    assert m.unlike and m.d0 == 0 and m.df == 3


def test_edge_cases():
    prior = Prior(s0_sq=1e-4, d0=10.0, metrics=5, total_df=10)
    with pytest.raises(ValueError, match="at least 2"):
        guarded([0.1], prior, bound=0.0)
    same = guarded([0.0, 0.0, 0.0], prior, bound=0.03)  # no spread of its own: the prior's, shrunk
    # d0 is capped at the other metrics' 10 - 2 df: s̃² = 8·1e-4 / (8 + 2)
    assert same.se == pytest.approx(math.sqrt(8 * 1e-4 / 10 / 3)) and same.p_value == pytest.approx(0.5)
    assert guarded([0.02, 0.03], prior, bound=0.0).d0 == 0  # two pairs: nothing to leave out
    with pytest.raises(ValueError, match="s0_sq"):
        Prior(s0_sq=0.0, d0=1.0, metrics=3, total_df=6)
    with pytest.raises(ValueError, match="d0"):
        Prior(s0_sq=1.0, d0=float("nan"), metrics=3, total_df=6)
    assert fit_prior([(float("nan"), 2), (1e-4, 2), (2e-4, 2), (3e-4, 2)]) is not None


# --- one pair far off ---------------------------------------------------------------------


def _look(ratios: dict[str, list[float]], units: list[str], *, threshold: float, alpha: float, borrow: bool = True):
    run = _run(units, len(next(iter(ratios.values()))))
    policy = Policy(threshold_pct=threshold, alpha=alpha)
    return decide_look(
        run, run, {(k, "median"): v for k, v in ratios.items()}, policy, alpha=alpha, borrow=borrow
    ).comparisons


def test_a_single_pair_far_off_cannot_make_a_regression():
    """One pair 30 % off among 5, the other four unchanged or +2 % (under the 3 % threshold),
    whatever the group lends: no regression, through decide_look and on the guarded test."""
    rng = np.random.default_rng(7)
    bound = log_threshold(0.03, Direction.LOWER)
    for spread in (0.003, 0.01, 0.025, 0.05):
        for rest in (0.0, 0.02):
            for _ in range(5):
                ratios = {f"m{i}": list(rng.normal(0.0, spread, 5)) for i in range(M)}
                m0 = [*rng.normal(rest, 0.003, 4), math.log(1.30)]
                rng.shuffle(m0)
                ratios["m0"] = m0
                c = _look(ratios, ["ms"] * M, threshold=3.0, alpha=0.05)[0]
                assert c.verdict is not Verdict.REGRESSED, (spread, rest, c)
    for s0 in (0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.08, 0.12):
        for d0 in (2.0, 4.0, 10.0, 40.0, math.inf):
            for rest in (0.0, 0.01, 0.02, 0.025):
                m = guarded([rest, rest + 0.001, rest - 0.001, rest, math.log(1.30)], _prior(s0, d0), bound)
                assert not (m.p_value * M < 0.05 and m.log_worse > bound), (s0, d0, rest, m)


def _prior(s0: float, d0: float) -> Prior:
    return Prior(s0_sq=s0**2, d0=d0, metrics=M, total_df=4 * M)


def test_the_guard_is_what_stops_it():
    """Regression for borrowing without leaving a pair out: a +9 % pair among four at +2.8 %
    (under the 3 % threshold) lifts the mean past it, and the pooled spread of ten metrics
    at ~2 % hardly notices, so the bare moderated t called it regressed."""
    pattern = np.array([0.03, -0.03, 0.02, -0.02, 0.0]) * 0.8
    ratios = {f"m{i + 1}": list(np.roll(pattern, i) * (1 + 0.02 * i)) for i in range(M - 1)}
    ratios["m0"] = [0.028, 0.029, 0.027, 0.028, 0.09]
    prior = fit_prior([(float(np.var(v, ddof=1)), 4) for v in ratios.values()])
    assert prior is not None
    d0 = prior.df_for(4)
    d = np.array(ratios["m0"])
    s2 = (d0 * prior.s0_sq + 4 * d.var(ddof=1)) / (d0 + 4)
    unguarded = sps.t(d0 + 4).sf(d.mean() / math.sqrt(s2 / 5))
    assert d.mean() > math.log1p(0.03) and unguarded * M < 0.05  # the bare moderated t would call it
    c = {c.metric: c for c in _look(ratios, ["ms"] * M, threshold=3.0, alpha=0.05)}["m0"]
    assert c.verdict is Verdict.INCONCLUSIVE and "pair 5" in c.reason and "one pair" in c.reason


def test_a_consistent_slowdown_still_regresses():
    pattern = np.array([0.01, -0.02, 0.015, -0.005])  # SD 1.5 %, as the stages' medians
    ratios = {f"m{i}": list(np.roll(pattern, i)) for i in range(M)}
    ratios["m3"] = [0.05, 0.065, 0.04, 0.055]
    out = {c.metric: c for c in _look(ratios, ["ms"] * M, threshold=3.0, alpha=0.01)}
    assert out["m3"].verdict is Verdict.REGRESSED and "moderated" in out["m3"].noise
    plain = {c.metric: c for c in _look(ratios, ["ms"] * M, threshold=3.0, alpha=0.01, borrow=False)}
    assert plain["m3"].verdict is Verdict.INCONCLUSIVE  # 3 df after Holm over 11: the plain t cannot


def test_tails_do_not_borrow_from_medians():
    ratios = {f"m{i}": [0.001, -0.002, 0.0015, 0.0] for i in range(M - 3)}
    ratios.update({"t0": [0.05, -0.06, 0.02, 0.09], "t1": [-0.07, 0.03, 0.01, 0.04], "t2": [0.06, 0.08, 0.05, 0.07]})
    units = ["ms"] * (M - 3) + ["us"] * 3
    run = _run(units, 4)
    names = list(run.metrics)
    d = {(n, "median"): v for n, v in zip(names, ratios.values(), strict=True)}
    out = decide_look(run, run, d, Policy(threshold_pct=3.0), alpha=0.01).comparisons
    tail = out[-1]
    assert tail.verdict is not Verdict.REGRESSED  # its group's spread is 5 %, not the medians' 0.2 %
    assert "3 median metrics in us" in tail.noise


# --- seeded simulations -------------------------------------------------------------------


def _offsets(rng: np.random.Generator, kind: str, shape: tuple[int, ...], sd: np.ndarray) -> np.ndarray:
    """Per-process offsets (log units) whose pair differences have SD ``sd`` (t3) or the two-state law."""
    t3 = rng.standard_t(3, shape) / math.sqrt(3.0) * sd / math.sqrt(2.0)
    if kind == "t3":
        return t3
    slow = rng.random(shape) < 0.35
    return t3 + np.where(slow, np.log1p(rng.uniform(0.08, 0.13, shape)), 0.0)


def _pairs(rng: np.random.Generator, kind: str, k: int, sds: np.ndarray) -> np.ndarray:
    """(k, metrics) per-pair log ratios of an A/A check: current process minus baseline process."""
    shape = (k, len(sds))
    return _offsets(rng, kind, shape, sds) - _offsets(rng, kind, shape, sds)


def _family(d: np.ndarray, groups: list[int], bound: float, alpha: float, borrow: bool) -> np.ndarray:
    """decide_look's rule on the pure functions: per group a prior, the guarded test, Holm; regressed."""
    k, m = d.shape
    ps, means = np.empty(m), d.mean(axis=0)
    for g in set(groups):
        cols = [j for j in range(m) if groups[j] == g]
        prior = fit_prior([(float(d[:, j].var(ddof=1)), k - 1) for j in cols]) if borrow else None
        for j in cols:
            ps[j] = guarded(d[:, j], prior, bound).p_value
    return (np.array(holm(list(ps))) < alpha) & (means > bound)


def test_the_fast_family_is_decide_look():
    rng = np.random.default_rng(99)
    units = ["ms"] * 8 + ["us"] * 3
    groups = [0] * 8 + [1] * 3
    sds = np.array([0.01] * 8 + [0.06] * 3)
    agreed = alarms = 0
    for _ in range(60):
        d = _pairs(rng, "two-state", 4, sds) + np.where(rng.random(M) < 0.3, 0.06, 0.0)
        fast = _family(d, groups, log_threshold(0.0, Direction.LOWER), 0.05, True)
        ratios = {f"m{j}": list(d[:, j]) for j in range(M)}
        slow = np.array([c.verdict is Verdict.REGRESSED for c in _look_units(ratios, units)])
        agreed += bool((fast == slow).all())
        alarms += int(slow.sum())
    assert agreed == 60 and alarms > 0


def _look_units(ratios: dict[str, list[float]], units: list[str]):
    return _look(ratios, units, threshold=0.0, alpha=0.05)


@pytest.mark.parametrize("kind", ["t3", "two-state"])
@pytest.mark.parametrize("k", [3, 4, 6])
def test_aa_false_alarms_stay_below_alpha(kind: str, k: int):
    """1,000 A/A checks of 11 metrics at threshold 0 (the test alone decides), α = 0.05.

    Two groups as in a DQN check: 8 medians with spreads from 1 to 2 % and 3 tails at 5–9 %;
    under "two-state" every process may carry the layout offset."""
    rng = np.random.default_rng(1000 * k + len(kind))
    alpha, trials = 0.05, 1000
    groups = [0] * 8 + [1] * 3
    sds = np.array([0.010, 0.012, 0.014, 0.015, 0.016, 0.018, 0.020, 0.015, 0.05, 0.07, 0.09])
    bound = log_threshold(0.0, Direction.LOWER)
    alarms = sum(bool(_family(_pairs(rng, kind, k, sds), groups, bound, alpha, True).any()) for _ in range(trials))
    assert alarms / trials <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / trials), alarms


@pytest.mark.parametrize("k", [3, 4, 6])
def test_aa_with_one_two_state_metric_among_quiet_ones(k: int):
    """The hard case for borrowing: the numpy stage's two-state layout offset (±8–13 %) among
    ten quiet medians at 1.5 %, threshold 3 %, α = 0.01. Measured: 0.6 % of checks at 3 pairs,
    1.2 % without the unlike-its-group test, 0.1 % with the plain t."""
    rng = np.random.default_rng(77 + k)
    alpha, trials = 0.01, 1000
    bound = log_threshold(0.03, Direction.LOWER)
    alarms = 0
    for _ in range(trials):
        d = _pairs(rng, "t3", k, np.full(M, 0.015))
        d[:, 0] = _pairs(rng, "two-state", k, np.array([0.015]))[:, 0]
        alarms += bool(_family(d, [0] * M, bound, alpha, True).any())
    assert alarms / trials <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / trials), alarms


def _sequential(rng: np.random.Generator, effect: float, borrow: bool, pairs: int = 4) -> bool:
    """One check of 11 metrics over ``pairs`` pairs and the looks the engine would take; metric 0 changed."""
    sds = np.full(M, 0.015)
    d = _pairs(rng, "t3", pairs, sds)
    d[:, 0] += effect
    rule = SequentialLooks(0.01, pairs, 3)
    units = ["ms"] * M
    policy = Policy(threshold_pct=3.0, alpha=0.01)
    run = {n: _run(units, n) for n in range(1, pairs + 1)}
    for n in range(1, pairs + 1):
        ratios = {(f"m{j}", "median"): list(d[:n, j]) for j in range(M)}

        def result_of(a: float, n: int = n, ratios: dict = ratios) -> object:
            return decide_look(run[n], run[n], ratios, policy, alpha=a, borrow=borrow)

        if rule.look(n, result_of) is not None:  # type: ignore[arg-type]
            break
    return "m0" in {c.metric for c in rule.merged().regressions}


def test_power_for_five_percent_at_three_with_four_pairs():
    """+5 % on one of 11 metrics, threshold 3 %, 4 pairs, offset SD 1.5 % (t3), α = 0.01 over the
    engine's looks (3 and 4 pairs). Measured: plain t 33/100, moderated 75/100 (seed 5)."""
    rng = np.random.default_rng(5)
    trials = 100
    new = sum(_sequential(rng, math.log1p(0.05), True) for _ in range(trials))
    old = sum(_sequential(rng, math.log1p(0.05), False) for _ in range(trials))
    assert new >= 0.65 * trials and new > old + 25, (new, old)


@pytest.mark.parametrize("k", [3, 4, 6])
@pytest.mark.parametrize("shared", [0.5, 1.0])
def test_aa_with_offsets_shared_by_the_stages_of_a_pair(k: int, shared: float):
    """A pair whose processes were both disturbed moves every stage: the per-pair offsets are
    correlated across metrics (a share ``shared`` of the variance common to all of them,
    heavy-tailed). Their variances are then nearly one estimate, and the prior lends df as if
    they were eleven; A/A stays ≤ α at the product's α = 0.01 because no verdict may rest on one
    pair (the leave-one-out guard). Measured without that guard: 22 alarms in 1,000 at 3 pairs
    (2.2 %), past α plus the Monte-Carlo tolerance; with it, 11 in 1,000."""
    rng = np.random.default_rng(500 + k + int(10 * shared))
    alpha, trials = 0.01, 1000
    bound = log_threshold(0.0, Direction.LOWER)
    alarms = 0
    for _ in range(trials):
        common = _pairs(rng, "t3", k, np.array([0.015]))[:, :1] * math.sqrt(shared)
        own = _pairs(rng, "t3", k, np.full(M, 0.015)) * math.sqrt(1 - shared)
        alarms += bool(_family(common + own, [0] * M, bound, alpha, True).any())
    assert alarms / trials <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / trials), alarms
