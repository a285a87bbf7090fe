"""Every comparison of a check, estimated, tested and judged.

A stored check estimates each metric both runs have, each of its gated statistics
(:func:`estimate_unpaired`), tests each timing metric against the rest of its run
(:mod:`perfgate.core.decision._shared_phase`), corrects over the check's family
(:func:`perfgate.core.decision.holm_family`, the same function the paired gate of ``perfgate ab``
calls) and judges each estimate (:func:`judge`): the rule's verdict
(:func:`perfgate.core.decision._rule.decide`), its reason (:mod:`perfgate.core.decision._reasons`),
the measurement that would decide it (:mod:`perfgate.core.decision._advice`) and the memory floor
(:mod:`perfgate.core.decision._memory_floor`). The metrics only one run has are ``missing`` or
``new``; informational ones are reported and never gate.

Two runs measured at different times differ by the machine's phase, which neither run's
samples show, so every unpaired test is a test on the log ratio of the two locations whose
standard error includes the run-to-run noise (:mod:`perfgate.core.noise`): this machine's
calibration, or the spread of a baseline pooled from runs spread out in time, or else a
conservative assumption that the report names. When both sides carry the machine-speed
index (reference kernels timed with the samples), the locations compared are the stage's
times in units of its reference, and the raw change is reported beside them.

Each step is a function that returns its result (:mod:`perfgate.core.decision._estimate`: the values
and their log ratio, the paired or unpaired test with its standard error, degrees of freedom,
p-value and the noise folded in); :func:`estimate_unpaired` assembles them into an immutable
:class:`~perfgate.core.decision._estimate.Estimate`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

from perfgate.core.decision import _advice as advice
from perfgate.core.decision import _reasons as reasons
from perfgate.core.decision._counts import Residue, counts_test, history_of, is_count
from perfgate.core.decision._estimate import (
    Estimate,
    OneSidedTest,
    Sides,
    estimate_values,
    paired_test,
    sides_of,
    test_fields,
    unpaired_test,
)
from perfgate.core.decision._family import holm_family
from perfgate.core.decision._memory_floor import FLOORED_VERDICTS, below_floor
from perfgate.core.decision._rule import confidence_z, decide, log_threshold
from perfgate.core.decision._samplestats import ReferenceStats, SampleStats
from perfgate.core.decision._shared_phase import breadth, is_median, relative_to_run
from perfgate.core.decision._significance import log_ratio_se
from perfgate.core.metrics import Direction
from perfgate.core.noise import index_shift
from perfgate.core.policy import Policy
from perfgate.core.reduced import metric_summary
from perfgate.core.result import ALONE, CommonShift, Comparison, SharedPhase, Verdict
from perfgate.core.schema import Metric, Run
from perfgate.core.stats import Summary, min_samples_for, summarize

__all__ = [
    "estimate_unpaired",
    "judge",
    "prepare",
    "split_metrics",
    "statistics_of",
    "unmatched",
]


def estimate_unpaired(
    base: Metric,
    cur: Metric,
    statistic: str,
    policy: Policy,
    paired: bool = False,
    runs: tuple[int, int] = (1, 1),
    *,
    stats: SampleStats | None = None,
    sides: Sides | None = None,
    derived_from: str = "",
    counts: Residue | None = None,
) -> Estimate:
    """One comparison of a stored check, estimated and tested, waiting for the family-wise correction.

    ``paired``: group i of both runs ran side by side, so the test is on paired log ratios
    when there are enough groups. ``counts``: the check's between-process residue of count
    metrics, which a count metric is tested with instead of the run-to-run noise of times
    (:mod:`perfgate.core.decision._counts`)."""
    stats = stats if stats is not None else ReferenceStats(policy.confidence)
    sides = sides if sides is not None else sides_of(base, cur, paired=paired)
    n_base, n_cur = len(base.samples), len(cur.samples)
    threshold_only = min(n_base, n_cur) == 1
    values = estimate_values(base, cur, sides, statistic, stats)
    shift = index_shift(base, cur) if sides.kernel else None
    fields: dict[str, Any] = {
        "base": base,
        "cur": cur,
        "statistic": statistic,
        "threshold": policy.threshold_for(cur.name),
        "threshold_only": threshold_only,
        "kernel": sides.kernel,
        "raw_change": values.raw_change,
        "normalised_change": values.normalised_change,
        "derived_from": derived_from,
        "index_change": None if shift is None else math.expm1(shift),
    }
    fields.update(base_value=values.base_value, cur_value=values.cur_value, log_worse=values.log_worse)
    if threshold_only:
        return Estimate(**fields)
    needed = min_samples_for(statistic)
    if min(n_base, n_cur) < needed:
        reason = reasons.too_few_samples(statistic, needed, n_base, n_cur)
        return Estimate(**fields, fixed=Verdict.INCONCLUSIVE, reason=reason, required_n=needed)
    se = log_ratio_se(
        values.test_base,
        stats.ci(sides.base, statistic),
        values.test_cur,
        stats.ci(sides.cur, statistic),
        policy.confidence,
    )
    test = paired_test(base, cur, statistic, values.log_worse) if paired else None
    if test is None and values.log_worse is not None and math.isinf(values.log_worse):
        # a rate that fell to 0 (a total loss) or a time that vanished: no noise makes that a fluke
        test = OneSidedTest(log_worse=values.log_worse, se=None, p_value=0.0 if values.log_worse > 0 else 1.0)
    if test is None and (values.log_worse is None or se is None):
        side = "baseline" if values.test_base == 0 else "current"
        reason = reasons.zero_to_test(side, statistic)
        return Estimate(**fields, se=se, fixed=Verdict.INCONCLUSIVE, reason=reason)
    if test is None and counts is not None and is_count(cur):
        assert values.log_worse is not None
        history = history_of(policy.noise, cur.name) if statistic == "median" else None
        test = counts_test(values.log_worse, base, cur, statistic, counts, history, policy.noise_runs)
    if test is None:
        assert values.log_worse is not None and se is not None
        test = unpaired_test(values.log_worse, se, cur, sides, statistic, policy, runs, stats, shift)
    return Estimate(**{**fields, **test_fields(test, values.base_value, values.cur_value)})  # made once


def _worse_from_log(log_worse: float, direction: Direction) -> float:
    # positive means worse: +x % time, or -x % throughput (the metric's own change, in the worse sense);
    # an interval bound from a tiny, skewed sample ([1, 1, 1004]) overflows: unbounded
    return direction.worse(_own_terms(log_worse, direction))


def judge(
    p: Estimate, policy: Policy, n_tests: int, stats: SampleStats | None = None, *, p_adjusted: float | None = None
) -> Comparison:
    """The comparison of one estimate: the rule's verdict (:func:`decide`), its reason, what more
    measurement would decide it, and the memory floor; ``p_adjusted`` is its p-value adjusted by Holm
    over a family of ``n_tests`` (:func:`perfgate.core.decision.holm_family`; ``None`` for an estimate
    without a test)."""
    direction = p.cur.direction
    worse = None if p.log_worse is None else _worse_from_log(p.log_worse, direction)
    change = None if p.base_value == 0 else p.cur_value / p.base_value - 1.0
    if p.kernel:  # the decided change is the normalised one; the raw one is reported beside it
        change = p.normalised_change
    if p.relative_to is not None and p.log_worse is not None:
        # the decided change is the metric's own, relative to its run; the whole one is reported beside it
        change = _own_terms(p.log_worse, direction)
    ci = None
    # only a test needs a quantile (a threshold-only check of flat files never loads scipy.special)
    z_ci = confidence_z(p, policy.confidence) if p.se is not None else math.nan
    if p.log_worse is not None and p.se is not None:
        lo, hi = p.log_worse - z_ci * p.se, p.log_worse + z_ci * p.se
        ci = (_worse_from_log(lo, direction), _worse_from_log(hi, direction))
    ruling = decide(p, policy, n_tests, p_adjusted=p_adjusted, ci=ci, z_ci=z_ci)
    verdict, reason = ruling.verdict, reasons.of_ruling(ruling, p, policy, p_adjusted, ci)
    required = p.required_n
    if ruling.margin is not None and ruling.z is not None:
        required = advice.required(p, ruling.margin, ruling.z)
    if verdict in FLOORED_VERDICTS and below_floor(policy.catalogue.of(p.cur), p.base_value, p.cur_value, policy):
        verdict, required = Verdict.UNCHANGED, None
        reason = reasons.below_memory_floor(p.cur_value - p.base_value, policy.memory_floor_mb)
    summary = stats.summary if stats is not None else _summary
    return Comparison(
        metric=p.cur.name,
        statistic=p.statistic,
        unit=p.cur.unit,
        direction=direction,
        baseline=summary(p.base),
        current=summary(p.cur),
        baseline_value=p.base_value,
        current_value=p.cur_value,
        change=change,
        worse=worse,
        ci=ci,
        p_value=p.p_value,
        p_adjusted=p_adjusted,
        threshold=p.threshold,
        verdict=verdict,
        reason=reason,
        required_n=required,
        required_unit=advice.required_unit(p),
        threshold_only=p.threshold_only,
        noise=p.noise,
        noise_assumed=p.noise_assumed,
        reference=p.kernel,
        raw_change=p.raw_change,
        index_change=p.index_change,
        derived_from=p.derived_from,
        relative_to=p.relative_to,
    )


def _summary(metric: Metric) -> Summary:
    """The summary of the samples a metric stands for (its true count, for the bounded form)."""
    return metric_summary(metric) if metric.sizes is not None else summarize(metric.samples)


def statistics_of(metric: Metric, policy: Policy, single: bool) -> tuple[str, ...]:
    """The statistics a metric is compared on (the median alone with a single sample a side)."""
    if single:
        return ("median",)
    return policy.catalogue.of(metric).statistics


def unmatched(metric: Metric, side: str, policy: Policy) -> Comparison:
    """A metric only one side has: ``missing`` (side ``"baseline"``) or ``new`` (``"current"``)."""
    summary = _summary(metric)
    return Comparison(
        metric=metric.name,
        statistic="median",
        unit=metric.unit,
        direction=metric.direction,
        baseline=summary if side == "baseline" else None,
        current=summary if side == "current" else None,
        baseline_value=summary.median if side == "baseline" else None,
        current_value=summary.median if side == "current" else None,
        change=None,
        worse=None,
        ci=None,
        p_value=None,
        p_adjusted=None,
        threshold=policy.threshold_for(metric.name),
        verdict=Verdict.MISSING if side == "baseline" else Verdict.NEW,
        reason=reasons.MISSING if side == "baseline" else reasons.NEW,
    )


def _informational(base: Metric, cur: Metric, policy: Policy) -> Comparison:
    b, c = _summary(base), _summary(cur)
    return Comparison(
        metric=cur.name,
        statistic="median",
        unit=cur.unit,
        direction=cur.direction,
        baseline=b,
        current=c,
        baseline_value=b.median,
        current_value=c.median,
        change=None if b.median == 0 else c.median / b.median - 1.0,
        worse=None,
        ci=None,
        p_value=None,
        p_adjusted=None,
        threshold=policy.threshold_for(cur.name),
        verdict=Verdict.INFORMATIONAL,
        reason=reasons.INFORMATIONAL,
    )


def split_metrics(
    baseline: Run, current: Run, policy: Policy, estimate: Callable[[Metric, Metric], list[Estimate]]
) -> tuple[list[Estimate], list[Comparison]]:
    """The metrics both runs have, estimated by ``estimate``; the others (new, missing, informational) decided."""
    estimates: list[Estimate] = []
    fixed: list[Comparison] = []
    for cur in current.metrics.values():
        base = baseline.metrics.get(cur.name)
        if base is None:
            fixed.append(unmatched(cur, "current", policy))
        elif cur.direction is Direction.INFO:
            fixed.append(_informational(base, cur, policy))
        else:
            estimates.extend(estimate(base, cur))
    fixed.extend(
        unmatched(m, "baseline", policy) for name, m in baseline.metrics.items() if name not in current.metrics
    )
    return estimates, fixed


def prepare(
    baseline: Run,
    current: Run,
    policy: Policy,
    *,
    paired: bool,
    runs: tuple[int, int],
    derived: dict[str, str],
    stats: SampleStats,
    sides: dict[str, Sides],
    counts: Mapping[str, Residue] | None = None,
    clocks: Mapping[str, str] | None = None,
) -> tuple[list[Comparison], list[Comparison], CommonShift | None, SharedPhase]:
    """Every comparison of a check decided: (the tested ones, the new/missing/informational ones,
    the run's common shift when that step applies: :mod:`perfgate.core.decision._common_shift`, and the
    run's own control: :mod:`perfgate.core.decision._shared_phase`).

    A stored comparison tests each timing metric against the rest of its run first; the common
    shift is then tested on the metrics that moved with the run, and the per-metric tests spend
    what it leaves of α. ``clocks``: the metrics timed on another clock than the CPU's (a CUDA
    stage: ``"cuda"``), each clock its own control."""

    def each(base: Metric, cur: Metric) -> list[Estimate]:
        single = min(len(base.samples), len(cur.samples)) == 1
        return [
            estimate_unpaired(
                base,
                cur,
                stat,
                policy,
                paired,
                runs,
                stats=stats,
                sides=sides.get(cur.name),
                derived_from=derived.get(cur.name, ""),
                counts=(counts or {}).get(cur.unit),
            )
            for stat in statistics_of(cur, policy, single)
        ]

    estimates, fixed = split_metrics(baseline, current, policy, each)
    phase = SharedPhase()
    tested = estimates
    shift_of: list[Estimate] | None = None
    if not paired:
        tested, phase = relative_to_run(estimates, policy, runs=runs, clocks=clocks)
        cpu = [c for c in phase.controls if c.clock.startswith("cpu")]
        if cpu:
            moved = frozenset().union(*(c.moved for c in cpu if c.whole_run))
            shift_of = [e for e in estimates if is_median(e.statistic) and not e.derived_from and e.cur.name in moved]
    family = holm_family(tested, alpha=policy.alpha, confidence=policy.confidence, common=not paired, shift_of=shift_of)
    shift = family.shift
    per_metric = policy if shift is None else dataclasses.replace(policy, alpha=family.metric_alpha)
    decided = [
        judge(e, per_metric, family.size, stats, p_adjusted=a)
        for e, a in zip(family.estimates, family.adjusted, strict=True)
    ]
    if phase.controls:
        decided = _judged_together(decided, phase, per_metric)
    if shift is not None:
        totals = {e.key: e for e in estimates}

        def whole(c: Comparison) -> Comparison | None:
            """The metric's whole change (not relative to the run), decided for its values and interval."""
            e = totals.get((c.metric, c.statistic))
            if e is None or e.p_value is None or e.fixed is not None:
                return None
            return judge(e, per_metric, family.size, stats, p_adjusted=e.p_value)

        decided = [_within_shift(c, shift, whole) for c in decided]
    return decided, fixed, shift, phase


def _own_terms(worse_log: float, direction: Direction) -> float:
    """A direction-adjusted log change as the metric's own relative change (a throughput's sign flips)."""
    try:
        return math.expm1(direction.worse(worse_log))
    except OverflowError:
        return math.inf


def _judged_together(decided: list[Comparison], phase: SharedPhase, policy: Policy) -> list[Comparison]:
    """Metrics without residual noise of their own (one process a side, no history) make no claim
    alone; many of them moving the same way past the threshold do (:func:`breadth`)."""
    out = list(decided)
    for control in phase.controls:
        if control.source != "none":
            continue
        alone = [
            i for i, c in enumerate(out) if c.metric in control.tested and c.relative_to is not None and c.noise_assumed
        ]
        for i in alone:
            c = out[i]
            if c.verdict is not Verdict.UNCHANGED or c.reason:
                out[i] = dataclasses.replace(c, verdict=Verdict.INCONCLUSIVE, reason=ALONE, noise="", required_n=None)
        medians = [i for i in alone if is_median(out[i].statistic) and not out[i].derived_from]
        ways = {
            sign: [
                i
                for i in medians
                if (w := _tested_log(out[i])) is not None
                and sign * w > log_threshold(out[i].threshold, out[i].direction)
            ]
            for sign in (1.0, -1.0)
        }
        for sign, verdict, word in ((1.0, Verdict.REGRESSED, "slower"), (-1.0, Verdict.IMPROVED, "faster")):
            past = ways[sign]
            claimed, p = breadth(len(past), len(ways[-sign]), len(medians), policy.alpha)
            if not claimed:
                continue
            names = {out[i].metric for i in past}
            reason = reasons.moved_together(len(past), len(medians), word, p)
            for j, c in enumerate(out):
                if c.metric in names or c.derived_from in names:
                    if is_median(c.statistic) or c.derived_from in names:
                        out[j] = dataclasses.replace(c, verdict=verdict, reason=reason, required_n=None)
    return out


def _tested_log(c: Comparison) -> float | None:
    """The direction-adjusted log change a comparison was decided on (its ``worse``)."""
    return None if c.worse is None else _log_of(c.worse, c.direction)


def _log_of(worse: float, direction: Direction) -> float | None:
    """The direction-adjusted log change of a ``worse`` (the inverse of :func:`_worse_from_log`)."""
    try:
        return direction.worse(math.log1p(direction.worse(worse)))
    except ValueError:
        return None


def _within_shift(c: Comparison, shift: CommonShift, whole_of: Callable[[Comparison], Comparison | None]) -> Comparison:
    """A metric's verdict in a run that moved as a whole (:mod:`perfgate.core.decision._common_shift`).

    A shift the kernels or a measured noise call the code's makes each metric that moved with
    it (past the threshold) regressed, or improved, on its whole change; one that nothing can tell
    from the machine's makes no claim of them, and a claim against its direction (faster than a
    run that is slower as a whole) is withheld too: the code or the machine, said once in the report."""
    moving = shift.slower_past or shift.faster_past
    if not moving:
        return c
    slower = shift.slower_past
    decided = shift.regressed if slower else shift.improved
    with_run = c.metric in shift.names or c.derived_from in shift.names
    if with_run and c.verdict is not Verdict.REGRESSED and c.verdict is not Verdict.IMPROVED:
        whole = whole_of(c)
        log_whole = None if whole is None or whole.worse is None else _log_of(whole.worse, c.direction)
        past = log_whole is not None and (log_whole if slower else -log_whole) > log_threshold(c.threshold, c.direction)
        if whole is not None and past:
            if decided:
                return dataclasses.replace(
                    whole,
                    verdict=Verdict.REGRESSED if slower else Verdict.IMPROVED,
                    reason=reasons.with_the_run(shift, slower, decided=True),
                    required_n=None,
                )
            return dataclasses.replace(
                whole,
                verdict=Verdict.INCONCLUSIVE,
                reason=reasons.with_the_run(shift, slower, decided=False),
                required_n=None,
            )
    against = Verdict.IMPROVED if slower else Verdict.REGRESSED
    if not decided and c.verdict is against and c.relative_to is not None:
        # slower than the rest of a run that is faster as a whole: the code, if the metric is
        # also slower than its baseline past the threshold; else it may be the rest that moved
        whole = whole_of(c)
        log_whole = None if whole is None or whole.worse is None else _log_of(whole.worse, c.direction)
        sign = -1.0 if slower else 1.0
        if log_whole is not None and sign * log_whole > log_threshold(c.threshold, c.direction):
            return c
        return dataclasses.replace(
            c,
            verdict=Verdict.INCONCLUSIVE,
            reason=reasons.against_the_run(slower),
            required_n=None,
        )
    if not decided and with_run and c.verdict is (Verdict.REGRESSED if slower else Verdict.IMPROVED):
        return dataclasses.replace(
            c,
            verdict=Verdict.INCONCLUSIVE,
            reason=reasons.with_the_run(shift, slower, decided=False),
            required_n=None,
        )
    return c
