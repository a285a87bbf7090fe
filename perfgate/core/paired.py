"""The paired decision of ``perfgate ab``: block ratios within a pair, a t test across pairs.

Both revisions run in resident worker processes, a fresh pair of them at a time, and
alternate short blocks of calls of each stage on one CPU. That leaves two levels of noise
(``docs/noise.md`` §2):

* **within a pair**, block to block: the machine's phase, mostly cancelled because both
  sides of a block ran a few milliseconds apart. A pair's estimate of a stage's median is
  the median over its blocks of ``log(median(B) / median(A))`` (:func:`block_log_ratio`).
  A block of fewer than :data:`SCREEN_CALLS` calls (a call of over about 8 ms in a block of
  about 20 ms: the TFT's and Mamba-2's training steps) has no median that can leave a slow
  call out, and this machine's slow calls of such a step are one-sided and large: a storm of
  page faults (up to 30,000 in one 0.6 s call of the TFT's step, each about 18 µs) doubles a
  call now and then. There the pair's estimate is the log ratio of the means of each side's
  faster half of calls (:func:`fast_half_log_ratio`), which leaves the slow calls out
  whichever side drew them; on the TFT's step, quiet, it spread 0.9 % per A/A pair against
  1.2 % for the block ratios' median on the same calls, and 3.1 % against 5.6 % on the
  engine's own blocks (``docs/noise.md`` §7);
  a tail (p95, p99) is estimated the same way, block by block, when a block holds enough
  calls for its quantile (at least :data:`TAIL_CALLS_ABOVE` calls beyond it), and from all the
  pair's calls pooled per side otherwise (:func:`tail_log_ratio`). Pooled, a tail is set by
  the blocks that ran in the machine's slowest moments, which pairing does not cancel: on
  DQN's 3 µs inference call the per-pair p99 ratio spread 9.9 % pooled and 3.8 % block by
  block, over the same 8 pairs (``docs/noise.md``); memory is one value per process;
* **between pairs**: each fresh process has its own offset (memory placement, cache
  conflicts), about 1 % on a stage and up to 5–7 % on a 3 µs call. Only more pairs average
  it out, so the test runs across pairs: a one-sample t test of the pairs' log ratios on
  ``pairs - 1`` degrees of freedom (:func:`decide_look`). An offset is part of the spread
  the test sees, so a single pair far off raises the standard error as much as the mean
  and cannot make a regression on its own (``tests/core/test_paired.py``).

**Borrowed variance.** With 3–4 pairs that test has 2–3 degrees of freedom. The metrics
that share a statistic and a unit lend each other their spread: a moderated t test in the
style of limma, guarded so that a metric unlike its group keeps its own variance and no
verdict rests on one pair (:mod:`perfgate.core.decision._moderated`, :func:`_borrow`).

Each metric and statistic is one immutable :class:`~perfgate.core.decision._estimate.Estimate`,
tested across pairs (:func:`_test_across`, then :func:`_borrow` makes a new one where the
group lends its variance). Holm's family is the stored check's: one function for both,
:func:`perfgate.core.decision.holm_family`. A derived metric (throughput, items per second of
a stage's own calls) is not a second test: it takes the p-values of the metric it is derived
from and counts once in the family; when that metric has no test of its own, the derived one
is tested in its place and counts in the family.

**Stopping.** The check looks at its data a fixed number of times (``looks``, at pair
counts fixed from the time budget before any data is seen, :func:`look_schedule`), and
spends the family-wise α over them with a quadratic spending function: look k of K is
tested at ``α (2k - 1) / K²`` (:func:`look_alphas`; the shares sum to α). A metric's
verdict is the first decided one (regressed, improved or unchanged); one never decided
keeps the last look's. A false alarm at any look needs a false rejection at that look's
share, so by the union bound the family-wise rate over all looks stays ≤ α, whatever the
dependence between looks; this was chosen over a Pocock/O'Brien–Fleming boundary because
their exact boundaries assume normal increments, which a t test on 3–20 pairs is not.
Stopping early for "unchanged" only removes chances to reject, so it costs no α.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from perfgate.core.compare import CheckResult, Comparison, Verdict, missing_gated
from perfgate.core.decision import (
    Estimate,
    OneSidedTest,
    Prior,
    check_budgets,
    family_members,
    fit_prior,
    guarded,
    holm_family,
    judge,
    log_threshold,
    split_metrics,
    statistics_of,
)
from perfgate.core.distributions import t_sf
from perfgate.core.metrics import Direction
from perfgate.core.policy import Policy
from perfgate.core.schema import Metric, Run
from perfgate.core.stats import QUANTILES

__all__ = [
    "DECIDED",
    "MIN_PAIRS",
    "SequentialLooks",
    "block_log_ratio",
    "decide_look",
    "fast_half_log_ratio",
    "fast_half_mean",
    "look_alphas",
    "look_schedule",
    "merge_looks",
    "pairs_to_decide",
    "pooled_log_ratio",
    "settled",
    "tail_log_ratio",
    "undecided",
]

MIN_PAIRS = 3  # a t test across pairs needs at least 2 degrees of freedom
# calls a block needs for its median to leave one slow call out; fewer, and a pair's median is
# estimated from each side's faster half of calls (fast_half_log_ratio)
SCREEN_CALLS = 3
# calls a block needs beyond a quantile for that block's quantile to be estimated on its own
TAIL_CALLS_ABOVE = 5
DECIDED = frozenset({Verdict.REGRESSED, Verdict.IMPROVED, Verdict.UNCHANGED})
_GATED_OUT = frozenset({Verdict.INFORMATIONAL, Verdict.MISSING, Verdict.NEW})


def block_log_ratio(a_blocks: Sequence[Sequence[float]], b_blocks: Sequence[Sequence[float]]) -> float:
    """Median over blocks of ``log(median(b_i) / median(a_i))``: one pair's estimate of a median's ratio.

    Block i of both sides ran next to each other, so their ratio cancels the machine's phase
    at that moment; the median over blocks keeps one disturbed block from moving it. Where a
    block holds fewer than :data:`SCREEN_CALLS` calls, its median is a slow call whenever one
    came, so the estimate is :func:`fast_half_log_ratio` of the pair's calls instead.
    """
    if len(a_blocks) != len(b_blocks) or not a_blocks:
        raise ValueError(f"need the same number (>= 1) of blocks per side, got {len(a_blocks)} and {len(b_blocks)}")
    if max(len(x) for x in (*a_blocks, *b_blocks)) < SCREEN_CALLS:
        return fast_half_log_ratio(a_blocks, b_blocks)
    medians = [
        (float(np.median(a)), float(np.median(b))) for a, b in zip(a_blocks, b_blocks, strict=True) if len(a) and len(b)
    ]
    ratios = [math.log(mb / ma) for ma, mb in medians if ma > 0 and mb > 0]
    if not ratios:
        raise ValueError("no block has a positive median on both sides")
    return float(np.median(ratios))


def fast_half_log_ratio(a_blocks: Sequence[Sequence[float]], b_blocks: Sequence[Sequence[float]]) -> float:
    """``log(F_b / F_a)``, F the mean of a side's faster half of calls (all its blocks pooled).

    For calls too long to block by the dozen (over about 8 ms, where blocks are 20 ms): a slow call
    there is one-sided and large (page faults, a process beside it on the CPU), and one in a
    block moves that block's ratio by as much as the call. The faster half leaves up to half of
    each side's calls out, slow ones first, and on calls that differ by a factor keeps that
    factor; it is the median's kind of statistic (a change to fewer than half of the calls moves
    neither), with about twice the calls behind it. It gives up the pairing of blocks: on a step
    of a second, the machine's phase moves less between two calls than a slow call does.
    """
    fa, fb = (fast_half_mean([x for blk in blocks for x in blk]) for blocks in (a_blocks, b_blocks))
    return math.log(fb / fa)


def fast_half_mean(calls: Sequence[float]) -> float:
    """The mean of the faster half of ``calls`` (the middle one included when their number is odd)."""
    x = np.sort(np.asarray(calls, dtype=float))
    x = x[np.isfinite(x) & (x > 0)]
    if not len(x):
        raise ValueError("a side has no positive call time")
    return float(x[: math.ceil(len(x) / 2)].mean())


def pooled_log_ratio(a_blocks: Sequence[Sequence[float]], b_blocks: Sequence[Sequence[float]], q: float) -> float:
    """``log(Q_b / Q_a)`` of the q-quantile of all calls of each side pooled: a tail needs many calls."""
    qa = float(np.quantile(np.concatenate([np.asarray(a, dtype=float) for a in a_blocks]), q))
    qb = float(np.quantile(np.concatenate([np.asarray(b, dtype=float) for b in b_blocks]), q))
    if qa <= 0 or qb <= 0:
        raise ValueError(f"the {q:g}-quantile is not positive on both sides ({qa:g}, {qb:g})")
    return math.log(qb / qa)


def tail_log_ratio(a_blocks: Sequence[Sequence[float]], b_blocks: Sequence[Sequence[float]], q: float) -> float:
    """One pair's estimate of a q-quantile's log ratio: block by block when the blocks allow it, else pooled.

    Every block of both sides must hold at least ``TAIL_CALLS_ABOVE / (1 - q)`` calls (500 for
    a p99) for the median over blocks of ``log(Q_q(b_i) / Q_q(a_i))``, which cancels the
    machine's phase as :func:`block_log_ratio` does; fewer, and the quantile of a block is
    little more than its slowest call, so the quantiles of all calls pooled per side are used
    (:func:`pooled_log_ratio`).
    """
    if len(a_blocks) != len(b_blocks) or not a_blocks:
        raise ValueError(f"need the same number (>= 1) of blocks per side, got {len(a_blocks)} and {len(b_blocks)}")
    if not 0.0 < q < 1.0:
        raise ValueError(f"a quantile must be in (0, 1), got {q:g}")
    need = TAIL_CALLS_ABOVE / (1.0 - q)
    if min(min(len(a) for a in a_blocks), min(len(b) for b in b_blocks)) < need - 1e-9:
        return pooled_log_ratio(a_blocks, b_blocks, q)
    ratios = []
    for a, b in zip(a_blocks, b_blocks, strict=True):
        qa, qb = float(np.quantile(np.asarray(a, dtype=float), q)), float(np.quantile(np.asarray(b, dtype=float), q))
        if qa > 0 and qb > 0:
            ratios.append(math.log(qb / qa))
    if not ratios:
        raise ValueError(f"no block has a positive {q:g}-quantile on both sides")
    return float(np.median(ratios))


def look_alphas(alpha: float, looks: int) -> tuple[float, ...]:
    """The family-wise level each look is tested at: quadratic spending, ``α (2k - 1) / K²``."""
    if looks < 1:
        raise ValueError(f"looks must be >= 1, got {looks}")
    return tuple(alpha * (2 * k - 1) / looks**2 for k in range(1, looks + 1))


def look_schedule(max_pairs: int, looks: int, min_pairs: int = MIN_PAIRS) -> tuple[int, ...]:
    """Pair counts at which the check looks: ``looks`` evenly spaced up to ``max_pairs``, none below ``min_pairs``.

    Fixed from the time budget before the data is seen; a look that coincides with an
    earlier one is dropped (its α share goes with it: the schedule may be shorter than ``looks``).
    """
    top = max(max_pairs, min_pairs)
    counts = sorted({max(min_pairs, math.ceil(top * k / looks)) for k in range(1, looks + 1)})
    return tuple(counts)


@dataclass(frozen=True, slots=True)
class _Across:
    log_worse: float
    se: float
    sd: float
    df: int


def _across(log_ratios: Sequence[float], direction: Direction) -> _Across | None:
    d = np.asarray(log_ratios, dtype=float)
    d = d[np.isfinite(d)]
    if len(d) < 2:
        return None
    d = direction.sign * d
    sd = float(d.std(ddof=1))
    return _Across(log_worse=float(d.mean()), se=sd / math.sqrt(len(d)), sd=sd, df=len(d) - 1)


def _test_across(e: Estimate, log_ratios: Sequence[float]) -> Estimate:
    """A new estimate with its value and one-sided t test from the pairs' log ratios."""
    across = _across(log_ratios, e.cur.direction)
    if across is None:
        return e.fixed_as(Verdict.INCONCLUSIVE, "fewer than 2 worker pairs measured it", MIN_PAIRS)
    if across.se > 0:
        p_value = t_sf(across.log_worse / across.se, across.df)
    else:
        p_value = 0.0 if across.log_worse > 0 else 1.0
    test = OneSidedTest(
        log_worse=across.log_worse,
        se=across.se,
        p_value=p_value,
        df=across.df,
        sigma_run=across.sd / math.sqrt(2.0),  # the pairs that would decide: 2 (zσ/m)² = (z sd/m)²
        groups=(across.df + 1, across.df + 1),
        noise=f"paired over {across.df + 1} worker pairs (SD of the pairs' log ratios {across.sd:.1%})",
    )
    return e.with_test(test)


def _adjusted(e: Estimate, log_ratios: Sequence[float]) -> list[float]:
    d = [float(x) for x in log_ratios if math.isfinite(x)]
    return [e.cur.direction.worse(x) for x in d]


def _borrow(
    tested: Sequence[Estimate], log_ratios: Mapping[tuple[str, str], Sequence[float]]
) -> tuple[dict[tuple[str, str], Estimate], dict[tuple[str, str], str]]:
    """Re-test the metrics whose group (same statistic, same unit) lends a prior variance: the
    new estimates, and the reasons where leaving one pair out undid a verdict, both keyed by
    (metric, statistic)."""
    groups: dict[tuple[str, str], list[Estimate]] = {}
    for e in tested:
        groups.setdefault((e.statistic, e.cur.unit), []).append(e)
    retested: dict[tuple[str, str], Estimate] = {}
    blocked: dict[tuple[str, str], str] = {}
    for members in groups.values():
        data = {e.key: _adjusted(e, log_ratios.get(e.key, ())) for e in members}
        prior: Prior | None = fit_prior([(float(np.var(d, ddof=1)), len(d) - 1) for d in data.values() if len(d) >= 2])
        if prior is None:
            continue
        for e in members:
            d = data[e.key]
            if len(d) < MIN_PAIRS:
                continue
            m = guarded(d, prior, log_threshold(e.threshold, e.cur.direction))
            if m.d0 == 0:
                if m.unlike:
                    retested[e.key] = replace(
                        e, noise=e.noise + "; its spread is unlike its group's, so it borrows none"
                    )
                continue
            noise = (
                f"paired over {len(d)} worker pairs (SD of the pairs' log ratios {float(np.std(d, ddof=1)):.1%}, "
                f"moderated to {m.sd:.1%} with {m.d0} df lent by {prior.metrics} {e.statistic} metrics in "
                f"{e.cur.unit}; significant only if still so with any one pair left out)"
            )
            retested[e.key] = replace(
                e,
                log_worse=m.log_worse,
                se=m.se,
                df=m.df,
                p_value=m.p_value,
                sigma_run=m.sd / math.sqrt(2.0),
                noise=noise,
            )
            if m.blocked:
                blocked[e.key] = m.blocked
    return retested, blocked


def decide_look(
    baseline: Run,
    current: Run,
    log_ratios: Mapping[tuple[str, str], Sequence[float]],
    policy: Policy,
    *,
    alpha: float,
    derived: Mapping[str, str] | None = None,
    baseline_source: str = "",
    borrow: bool = True,
) -> CheckResult:
    """One look: every metric of ``current`` tested across pairs at family-wise level ``alpha``.

    ``log_ratios[(metric, statistic)]`` holds one ``log(current / baseline)`` per pair (not
    direction-adjusted). ``derived`` maps a derived metric to the metric it comes from; it
    shares that metric's adjusted p-value. ``baseline`` and ``current`` carry the pooled
    samples the report summarises. ``borrow=False`` gives each metric its own variance only
    (the plain t test across pairs).
    """
    derived = dict(derived or {})
    look_policy = replace(policy, alpha=alpha)

    def estimate(base: Metric, cur: Metric) -> list[Estimate]:
        return [
            _test_across(
                Estimate(
                    base=base,
                    cur=cur,
                    statistic=stat,
                    threshold=policy.threshold_for(cur.name),
                    base_value=float(np.quantile(base.samples, QUANTILES.get(stat, 0.5))),
                    cur_value=float(np.quantile(cur.samples, QUANTILES.get(stat, 0.5))),
                    log_worse=None,
                    derived_from=derived.get(cur.name, ""),
                ),
                log_ratios.get((cur.name, stat), ()),
            )
            for stat in statistics_of(cur, policy, single=False)
        ]

    estimates, fixed = split_metrics(baseline, current, policy, estimate)
    blocked: dict[tuple[str, str], str] = {}
    if borrow:  # the family is known before the tests' values are: which metrics have a test, and which are derived
        retested, blocked = _borrow([estimates[i] for i in family_members(estimates)], log_ratios)
        estimates = [retested.get(e.key, e) for e in estimates]
    family = holm_family(estimates, alpha=alpha, confidence=policy.confidence, common=False)
    decided = []
    for e, p_adjusted in zip(family.estimates, family.adjusted, strict=True):
        c = judge(e, look_policy, family.size, p_adjusted=p_adjusted)
        if c.required_n is not None:
            c = replace(c, required_unit="pairs")
        if e.key in blocked and c.verdict is Verdict.INCONCLUSIVE:
            c = replace(c, reason=f"{blocked[e.key]}: one pair does not make a verdict")
        decided.append(c)
    budgets = check_budgets(current, policy.budgets_for(current.model_key), policy.catalogue)
    return CheckResult(
        current=current,
        baseline=baseline,
        comparisons=tuple(decided + fixed),
        budgets=budgets,
        policy=policy,
        baseline_source=baseline_source,
        missing=missing_gated(baseline, current, budgets),
    )


def _key(c: Comparison) -> tuple[str, str]:
    return (c.metric, c.statistic)


def undecided(result: CheckResult) -> frozenset[str]:
    """The metrics with a gated comparison not yet decided (neither regressed, improved nor unchanged)."""
    return frozenset(c.metric for c in result.comparisons if c.verdict not in DECIDED | _GATED_OUT)


def settled(result: CheckResult) -> bool:
    """Whether every gated comparison of a look is decided (regressed, improved or unchanged)."""
    return not undecided(result)


def merge_looks(looks: Sequence[CheckResult]) -> CheckResult:
    """The check's result over its looks: each comparison's first decided verdict, else the last look's."""
    if not looks:
        raise ValueError("no look to merge")
    first: dict[tuple[str, str], Comparison] = {}
    for result in looks:
        for c in result.comparisons:
            if c.verdict in DECIDED and _key(c) not in first:
                first[_key(c)] = c
    last = looks[-1]
    merged = tuple(first.get(_key(c), c) for c in last.comparisons)
    return replace(last, comparisons=merged)


class SequentialLooks:
    """The stopping rule of one check: looks fixed in advance, α spent over them, verdicts merged.

    Made once the pair count that fits the budget is known (before any look at the data).
    ``look(n, result_of, out_of_time)`` is called after every pair; it looks when ``n`` is
    on the schedule, or early (with the next look's share) when the budget ends first, and
    returns why the check stops, or None to go on.
    """

    def __init__(self, alpha: float, max_pairs: int, looks: int, min_pairs: int = MIN_PAIRS) -> None:
        self.schedule = look_schedule(max_pairs, looks, min_pairs)
        self.alphas = look_alphas(alpha, len(self.schedule))
        self.min_pairs = min_pairs
        self.results: list[CheckResult] = []
        self.looked: list[int] = []

    def look(self, n: int, result_of: Callable[[float], CheckResult], out_of_time: bool = False) -> str | None:
        """After pair ``n``: look if one is due; "decided" or "time budget" to stop, else None."""
        if n < self.min_pairs or not (n in self.schedule or out_of_time):
            return None
        k = len(self.results)
        self.results.append(result_of(self.alphas[min(k, len(self.alphas) - 1)]))
        self.looked.append(n)
        if settled(self.merged()):
            return "decided"
        if out_of_time or n >= self.schedule[-1] or k + 1 >= len(self.alphas):
            return "time budget"
        return None

    def merged(self) -> CheckResult:
        return merge_looks(self.results)


def pairs_to_decide(c: Comparison) -> int | None:
    """Worker pairs at which an inconclusive comparison would be decided (None: more will not settle it)."""
    return c.required_n if c.verdict is Verdict.INCONCLUSIVE else None
