"""The verdict of one comparison: its estimate, its test, and the rule that decides it.

A metric **regresses** when its direction-adjusted relative change exceeds its threshold
*and* the one-sided test that the current run is worse is significant after Holm's
correction over every comparison of the check. Everything else is ``improved``,
``unchanged``, ``inconclusive`` (over the threshold but not significant, the confidence
interval still reaching past the threshold, or too few samples for a tail quantile — each
with the sample size that would decide), ``missing``, ``new`` or ``informational``.
With a single sample on either side only the threshold applies.

Two runs measured at different times differ by the machine's phase, which neither run's
samples show, so every unpaired test is a test on the log ratio of the two locations whose
standard error includes the run-to-run noise (:mod:`perfgate.core.noise`): this machine's
calibration, or the spread of a baseline pooled from runs spread out in time, or else a
conservative assumption that the report names. When both sides carry the machine-speed
index (reference kernels timed with the samples), the locations compared are the stage's
times in units of its reference, and the raw change is reported beside them.

Each step is a function that returns its result: :func:`_estimate` (the values and their
log ratio), :func:`_paired_test` and :func:`_unpaired_test` (standard error, degrees of
freedom, p-value, the noise folded in); :func:`_prepare` assembles them into the pending
comparison that :func:`_decide` turns into a verdict once the family-wise correction is known.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from perfgate.core.distributions import norm_ppf, t_isf, t_ppf, t_sf
from perfgate.core.metrics import BUILTIN_METRICS, Direction
from perfgate.core.noise import (
    TAIL_FACTOR,
    NoiseModel,
    between_groups,
    common_kernel,
    group_locations,
    normalised,
)
from perfgate.core.policy import Policy
from perfgate.core.result import Comparison, Verdict
from perfgate.core.samplestats import ReferenceStats, SampleStats
from perfgate.core.schema import Metric, Run
from perfgate.core.significance import holm, log_ratio_se
from perfgate.core.stats import QUANTILES, min_samples_for, summarize

__all__ = ["Sides", "prepare", "sides_of"]

_MAX_REQUIRED_N = 10_000_000
# Degrees of freedom from which consecutive worker processes' own spread may raise the
# assumed per-process noise (fewer say too little about it)
_MIN_NOISE_DF = 3
# pooled runs from which the baseline's own spread between runs is the run-to-run noise
_MIN_SPREAD_RUNS = 3
_BOUNDARY_SLACK = 1e-12  # in log-ratio units
_MEMORY_UNITS = {"B", "KB", "KiB", "MB", "MiB", "GB", "GiB", "bytes"}


@dataclass(slots=True)
class _Pending:
    """A comparison before the family-wise correction decides its verdict.

    Mutable for the paired decision of ``perfgate ab`` (:mod:`perfgate.core.paired`), which
    fills in its own test; the unpaired one builds it whole in :func:`_prepare`.
    """

    base: Metric
    cur: Metric
    statistic: str
    threshold: float
    base_value: float
    cur_value: float
    log_worse: float | None  # direction-adjusted log ratio; None when a value is 0
    se: float | None
    p_value: float | None
    threshold_only: bool
    fixed: Verdict | None = None  # decided before the test (too few samples)
    reason: str = ""
    required_n: int | None = None
    df: int | None = None  # degrees of freedom of a t test; None: normal
    sigma_run: float | None = None  # paired: SD of the per-repetition log ratios over sqrt(2)
    groups: tuple[int, int] = (1, 1)
    noise: str = ""
    noise_assumed: bool = False
    fixed_variance: float = 0.0  # run-to-run variance more worker processes would not reduce
    process_sigma: float = 0.0  # per-process SD, which more worker processes average out
    within_se: float = 0.0
    kernel: str = ""
    raw_change: float | None = None
    normalised_change: float | None = None
    derived_from: str = ""


@dataclass(frozen=True, slots=True)
class Sides:
    """What both sides of one metric are tested on: the raw samples, or both in units of a
    shared reference kernel (``kernel`` is then its name)."""

    kernel: str
    base: Metric
    cur: Metric


def sides_of(base: Metric, cur: Metric, *, paired: bool = False) -> Sides:
    """The samples a metric's test runs on (see :class:`Sides`)."""
    threshold_only = min(len(base.samples), len(cur.samples)) == 1
    kernel = None if threshold_only or paired else common_kernel(base, cur)
    if kernel:
        nb, nc = normalised(base), normalised(cur)
        if nb is not None and nc is not None:
            return Sides(kernel=kernel, base=nb, cur=nc)
    return Sides(kernel="", base=base, cur=cur)


@dataclass(frozen=True, slots=True)
class _Estimate:
    """The statistic on both sides and its direction-adjusted log ratio."""

    base_value: float  # raw, as reported
    cur_value: float
    test_base: float  # what is tested (normalised, with a kernel)
    test_cur: float
    log_worse: float | None
    raw_change: float | None
    normalised_change: float | None


def _estimate(base: Metric, cur: Metric, sides: Sides, statistic: str, stats: SampleStats) -> _Estimate:
    raw_base, raw_cur = stats.value(base, statistic), stats.value(cur, statistic)
    if sides.kernel:
        base_value, cur_value = stats.value(sides.base, statistic), stats.value(sides.cur, statistic)
    else:
        base_value, cur_value = raw_base, raw_cur
    log_worse: float | None = None
    if base_value > 0 and cur_value > 0:
        log_ratio = math.log(cur_value / base_value)
        log_worse = log_ratio if cur.direction is Direction.LOWER else -log_ratio
    elif base_value == cur_value:
        log_worse = 0.0
    elif base_value > 0:
        # the current value is 0: a time that vanished is infinitely better, a rate that fell
        # to 0 is a total loss (worse = +100 %) and must not pass as "undefined"
        log_worse = -math.inf if cur.direction is Direction.LOWER else math.inf
    return _Estimate(
        base_value=raw_base,
        cur_value=raw_cur,
        test_base=base_value,
        test_cur=cur_value,
        log_worse=log_worse,
        raw_change=(raw_cur / raw_base - 1.0) if sides.kernel and raw_base > 0 else None,
        normalised_change=(cur_value / base_value - 1.0) if sides.kernel and base_value > 0 else None,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class _Test:
    """A one-sided test of the log ratio: its estimate, standard error and p-value, and how
    the run-to-run noise entered it (what more repetitions of what would reduce it)."""

    log_worse: float
    se: float | None
    p_value: float
    df: int | None = None
    sigma_run: float | None = None
    groups: tuple[int, int] = (1, 1)
    noise: str = ""
    noise_assumed: bool = False
    fixed_variance: float = 0.0
    process_sigma: float = 0.0
    within_se: float = 0.0


def _one_sided(log_worse: float, se: float, df: int | None) -> float:
    return t_sf(log_worse / se, df) if se > 0 else (0.0 if log_worse > 0 else 1.0)


def _prepare(
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
) -> _Pending:
    """One comparison, estimated and tested, waiting for the family-wise correction."""
    stats = stats if stats is not None else ReferenceStats(policy.confidence)
    sides = sides if sides is not None else sides_of(base, cur, paired=paired)
    n_base, n_cur = len(base.samples), len(cur.samples)
    threshold_only = min(n_base, n_cur) == 1
    est = _estimate(base, cur, sides, statistic, stats)

    p = _Pending(
        base=base,
        cur=cur,
        statistic=statistic,
        threshold=policy.threshold_for(cur.name),
        base_value=est.base_value,
        cur_value=est.cur_value,
        log_worse=est.log_worse,
        se=None,
        p_value=None,
        threshold_only=threshold_only,
        kernel=sides.kernel,
        raw_change=est.raw_change,
        normalised_change=est.normalised_change,
        derived_from=derived_from,
    )
    if threshold_only:
        return p
    needed = min_samples_for(statistic)
    if min(n_base, n_cur) < needed:
        p.fixed = Verdict.INCONCLUSIVE
        p.reason = f"{statistic} is compared from {needed} samples per side; this check has {n_base}/{n_cur}"
        p.required_n = needed
        return p
    se = log_ratio_se(
        est.test_base, stats.ci(sides.base, statistic), est.test_cur, stats.ci(sides.cur, statistic), policy.confidence
    )
    test = _paired_test(base, cur, statistic, est.log_worse) if paired else None
    if test is None and est.log_worse is not None and math.isinf(est.log_worse):
        # a rate that fell to 0 (a total loss) or a time that vanished: no noise makes that a fluke
        test = _Test(log_worse=est.log_worse, se=None, p_value=0.0 if est.log_worse > 0 else 1.0)
    if test is None and (est.log_worse is None or se is None):
        side = "baseline" if est.test_base == 0 else "current"
        p.se = se
        p.fixed = Verdict.INCONCLUSIVE
        p.reason = f"the {side} {statistic} is 0; the log-ratio test is undefined"
        return p
    if test is None:
        assert est.log_worse is not None and se is not None
        test = _unpaired_test(est.log_worse, se, cur, sides, statistic, policy, runs, stats)
    p.log_worse, p.se, p.p_value, p.df = test.log_worse, test.se, test.p_value, test.df
    p.sigma_run, p.groups, p.noise, p.noise_assumed = test.sigma_run, test.groups, test.noise, test.noise_assumed
    p.fixed_variance, p.process_sigma, p.within_se = test.fixed_variance, test.process_sigma, test.within_se
    return p


def _assumed(policy: Policy, unit: str, kernel: str, statistic: str) -> NoiseModel:
    if unit in _MEMORY_UNITS:
        return policy.assumed_memory
    model = policy.assumed_normalised if kernel else policy.assumed_raw
    factor = TAIL_FACTOR.get(statistic, 1.0)
    return NoiseModel(phase=model.phase * factor, process=model.process * factor)


def _unpaired_test(
    log_worse: float,
    within_se: float,
    cur_metric: Metric,
    sides: Sides,
    statistic: str,
    policy: Policy,
    runs: tuple[int, int],
    stats: SampleStats,
) -> _Test:
    """Test the log ratio with the run-to-run noise in its standard error.

    Where that noise comes from, first found first:

    1. this machine's calibration (``Policy.noise``, from ``perfgate calibrate``): the SD of
       one run's log location; a z test;
    2. a baseline pooled from at least three runs spread out in time: the SD between those
       runs; a t test on runs - 1 degrees of freedom;
    3. the assumption for this kind of machine (:class:`~perfgate.core.noise.NoiseModel`,
       phase and per-process terms; normalised values have a much smaller phase term). The
       spread between consecutive worker processes may raise the per-process term, never
       lower it. A z test, and the report says the noise was assumed.

    ``runs`` says how many independent runs each side pooled (1 for a fresh run).
    """
    base, cur = sides.base, sides.cur
    q = QUANTILES[statistic]
    g_base, g_cur = len(base.groups or (0,)), len(cur.groups or (0,))
    r_base = g_base if runs[0] > 1 else 1
    r_cur = g_cur if runs[1] > 1 else 1
    name = cur_metric.name
    calibrated = policy.noise_for(name, statistic, normalised=bool(sides.kernel))
    scale = "in units of its reference" if sides.kernel else ""
    df: int | None = None
    process_sigma = 0.0
    assumed = False
    if calibrated is not None:
        fixed_variance = calibrated**2 * (1.0 / r_base + 1.0 / r_cur)
        noise = f"run-to-run σ {calibrated:.1%} {scale} (this machine's calibration)".replace("  ", " ")
    elif r_base >= _MIN_SPREAD_RUNS:
        logs = stats.group_logs(base, q)
        spread = float(logs.std(ddof=1)) if len(logs) > 1 else 0.0
        fixed_variance = spread**2 * (1.0 / r_base + 1.0 / r_cur)
        df = max(len(logs) - 1, 1)
        noise = f"run-to-run σ {spread:.1%} {scale} (the spread of the baseline's {r_base} runs)".replace("  ", " ")
    else:
        model = _assumed(policy, cur_metric.unit, sides.kernel, statistic)
        # only worker-process groups; a pooled side's groups are runs, whose spread is another thing.
        # A side of one group has no spread of its own: with one group on each side there is none
        proc_base = base if r_base == 1 and g_base > 1 else None
        proc_cur = cur if r_cur == 1 and g_cur > 1 else None
        processes = between_groups(proc_base, proc_cur, q) if proc_base or proc_cur else None
        if processes is not None and processes.df >= _MIN_NOISE_DF:
            model = NoiseModel(phase=model.phase, process=max(model.process, processes.sigma))
        fixed_variance = model.phase**2 * (1.0 / r_base + 1.0 / r_cur)
        process_sigma = model.process
        assumed = True
        one_run = model.sigma(1, min(g_base, g_cur))
        noise = f"run-to-run σ {one_run:.1%} {scale} assumed".replace("  ", " ")
    process_variance = process_sigma**2 * (1.0 / g_base + 1.0 / g_cur)
    total = within_se**2 + fixed_variance + process_variance
    se = math.sqrt(total)
    if df is None and within_se > 0:
        # the within-run part is estimated from few samples when a side has few: its degrees of
        # freedom carry over to the whole variance in proportion (Welch-Satterthwaite), the
        # run-to-run part being taken as known
        within_df = min(len(base.samples), len(cur.samples)) - 1
        effective = total**2 / (within_se**4 / max(within_df, 1))
        # (the slack keeps a whole number computed a rounding error below itself, 18.999999999999996
        # where the run-to-run part is 0, from losing a degree of freedom)
        df = math.floor(effective + 1e-9) if effective < 1000 else None
    return _Test(
        log_worse=log_worse,
        se=se,
        p_value=_one_sided(log_worse, se, df),
        df=df,
        groups=(g_base, g_cur),
        noise=noise,
        noise_assumed=assumed,
        fixed_variance=fixed_variance,
        process_sigma=process_sigma,
        within_se=within_se,
    )


def _paired_test(base: Metric, cur: Metric, statistic: str, log_worse: float | None) -> _Test | None:
    """Paired t test over interleaved repetitions (``perfgate ab``): group i of each side ran
    next to each other, so their log ratio cancels the machine's phase at that moment.

    The estimate is the mean of the k paired log ratios, its standard error their SD over
    sqrt(k), on k - 1 degrees of freedom. Needs the same number (at least 3) of groups on
    both sides; None otherwise.
    """
    if log_worse is None or not math.isfinite(log_worse):
        return None
    q = QUANTILES[statistic]
    a, b = group_locations(base, q), group_locations(cur, q)
    k = len(base.group_samples())
    if k < 3 or len(a) != k or len(b) != k or len(cur.group_samples()) != k:
        return None
    d = b - a if cur.direction is Direction.LOWER else a - b
    sd = float(d.std(ddof=1))
    mean = float(d.mean())
    se = sd / math.sqrt(k)
    return _Test(
        log_worse=mean,
        se=se,
        p_value=_one_sided(mean, se, k - 1),
        df=k - 1,
        sigma_run=sd / math.sqrt(2.0),
        groups=(k, k),
        noise=f"paired over {k} interleaved repetitions (SD of paired log ratios {sd:.1%})",
    )


def _required_n(n_now: int, se: float | None, margin: float, z: float) -> int | None:
    """Samples per side at which an estimate ``margin`` away from the boundary is decided."""
    if se is None or se <= 0 or n_now < 2:
        return None
    if margin <= 1e-12:
        return None
    need = math.ceil(n_now * (z * se / margin) ** 2)
    return min(max(need, n_now + 1), _MAX_REQUIRED_N)


def _required_groups(sigma: float, margin: float, z: float, have: int) -> int | None:
    """Independent repetitions per side at which ``margin`` is resolved against ``sigma``."""
    if sigma <= 0 or margin <= 1e-12:
        return None
    return min(max(math.ceil(2.0 * (z * sigma / margin) ** 2), have + 1), _MAX_REQUIRED_N)


def _required_processes(p: _Pending, margin: float, z: float) -> int | None:
    """Worker processes per side that would resolve ``margin``; None when no number would,
    because the part of the noise shared by a whole run (its phase) is larger than that."""
    if p.process_sigma <= 0 or margin <= 1e-12:
        return None
    room = (margin / z) ** 2 - p.within_se**2 - p.fixed_variance
    if room <= 0:
        return None
    need = math.ceil(2.0 * p.process_sigma**2 / room)
    return min(max(need, min(p.groups) + 1), _MAX_REQUIRED_N)


def _log_threshold(threshold: float, direction: Direction) -> float:
    # worse > t  <=>  log ratio beyond this bound, for either direction. The slack keeps a
    # change of exactly the threshold (100 -> 110 at 10 %) from "exceeding" it by rounding:
    # log(110 / 100) is one ulp above log1p(0.10).
    if direction is Direction.HIGHER:
        return math.inf if threshold >= 1.0 else -math.log1p(-threshold) + _BOUNDARY_SLACK
    return math.log1p(threshold) + _BOUNDARY_SLACK


def _worse_from_log(log_worse: float, direction: Direction) -> float:
    # positive means worse: +x % time, or -x % throughput
    try:
        return math.expm1(log_worse) if direction is Direction.LOWER else -math.expm1(-log_worse)
    except OverflowError:  # an interval bound from a tiny, skewed sample ([1, 1, 1004]): unbounded
        return math.inf if direction is Direction.LOWER else -math.inf


def _decide(
    p: _Pending, p_adjusted: float | None, policy: Policy, n_tests: int, stats: SampleStats | None = None
) -> Comparison:
    direction = p.cur.direction
    worse = None if p.log_worse is None else _worse_from_log(p.log_worse, direction)
    change = None if p.base_value == 0 else p.cur_value / p.base_value - 1.0
    if p.kernel:  # the decided change is the normalised one; the raw one is reported beside it
        change = p.normalised_change
    ci = None
    # only a test needs a quantile (a threshold-only check of flat files never loads scipy.special)
    z_ci = t_ppf(0.5 + policy.confidence / 2.0, p.df) if p.se is not None else math.nan
    if p.log_worse is not None and p.se is not None:
        lo, hi = p.log_worse - z_ci * p.se, p.log_worse + z_ci * p.se
        ci = (_worse_from_log(lo, direction), _worse_from_log(hi, direction))
    bound = _log_threshold(p.threshold, direction)
    n_now = min(len(p.base.samples), len(p.cur.samples))
    verdict: Verdict
    reason = p.reason
    required = p.required_n
    unit = "processes" if p.sigma_run is not None or p.fixed_variance > 0 or p.process_sigma > 0 else "samples"

    def need(margin: float, z: float) -> int | None:
        if p.sigma_run is not None:  # paired: more repetitions of the whole run, not more samples, decide it
            return _required_groups(p.sigma_run, margin, z, min(p.groups))
        if p.noise and (p.fixed_variance > 0 or p.process_sigma > 0):
            # unpaired: more worker processes, when the run-wide noise leaves room for them
            return _required_processes(p, margin, z)
        return _required_n(n_now, p.se, margin, z)

    if p.fixed is not None:
        verdict = p.fixed
    elif p.log_worse is None:
        verdict = Verdict.INCONCLUSIVE
        reason = f"the baseline {p.statistic} is 0; a relative change is undefined"
    elif p.threshold_only:
        verdict = (
            Verdict.REGRESSED
            if p.log_worse > bound
            else Verdict.IMPROVED
            if -p.log_worse > bound
            else Verdict.UNCHANGED
        )
        reason = "one sample per side: only the threshold applies, no significance test"
    else:
        assert p_adjusted is not None
        z_alpha = t_isf(policy.alpha / max(n_tests, 1), p.df)
        z_power = norm_ppf(policy.power)
        if p.log_worse > bound:
            if p_adjusted < policy.alpha:
                verdict = Verdict.REGRESSED
            else:
                verdict = Verdict.INCONCLUSIVE
                reason = (
                    f"over the threshold but not significant (adjusted p = {p_adjusted:.3g} ≥ α = {policy.alpha:g})"
                )
                required = need(p.log_worse, z_alpha + z_power)
        elif -p.log_worse > bound and (ci[1] < 0 if ci is not None else p.log_worse == -math.inf):
            verdict = Verdict.IMPROVED
        elif ci is not None and ci[1] > p.threshold and p.log_worse <= bound:
            verdict = Verdict.INCONCLUSIVE
            reason = (
                f"the {policy.confidence:.0%} interval reaches {ci[1]:+.1%}, past the {p.threshold:.0%} threshold: "
                "too noisy to rule out a regression"
            )
            required = need(bound - p.log_worse, z_ci + z_power)
        else:
            verdict = Verdict.UNCHANGED
    summary = stats.summary if stats is not None else (lambda m: summarize(m.samples))
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
        required_unit=unit,
        threshold_only=p.threshold_only,
        noise=p.noise,
        noise_assumed=p.noise_assumed,
        reference=p.kernel,
        raw_change=p.raw_change,
        derived_from=p.derived_from,
    )


def _statistics_of(metric: Metric, policy: Policy, single: bool) -> tuple[str, ...]:
    if single:
        return ("median",)
    info = policy.metric_info.get(metric.name) or BUILTIN_METRICS.get(metric.name)
    return info.statistics if info else ("median",)


def _unpaired(metric: Metric, side: str, policy: Policy) -> Comparison:
    summary = summarize(metric.samples)
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
        reason="in the baseline, not measured now" if side == "baseline" else "no baseline for this metric yet",
    )


def _informational(base: Metric, cur: Metric, policy: Policy) -> Comparison:
    b, c = summarize(base.samples), summarize(cur.samples)
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
        reason="informational: reported, never gates",
    )


def _holm_by_id(tested: list[_Pending]) -> dict[int, float]:
    """Holm-adjusted p-values of the tested comparisons, keyed by ``id()`` of each pending one."""
    p_values = [p.p_value for p in tested if p.p_value is not None]
    return dict(zip((id(p) for p in tested), holm(p_values), strict=True))


def _split(
    baseline: Run, current: Run, policy: Policy, prepare: Callable[[Metric, Metric], list[_Pending]]
) -> tuple[list[_Pending], list[Comparison]]:
    """The metrics both runs have, prepared for testing; the others (new, missing, informational) decided."""
    pending: list[_Pending] = []
    fixed: list[Comparison] = []
    for cur in current.metrics.values():
        base = baseline.metrics.get(cur.name)
        if base is None:
            fixed.append(_unpaired(cur, "current", policy))
        elif cur.direction is Direction.INFO:
            fixed.append(_informational(base, cur, policy))
        else:
            pending.extend(prepare(base, cur))
    fixed.extend(
        _unpaired(m, "baseline", policy) for name, m in baseline.metrics.items() if name not in current.metrics
    )
    return pending, fixed


def _family(pending: list[_Pending]) -> list[_Pending]:
    """The tested comparisons that count in Holm's family: a derived one only when the metric
    it is derived from has no test of its own for that statistic (or its median)."""
    tested = [p for p in pending if p.p_value is not None and p.fixed is None]
    own = {(p.cur.name, p.statistic) for p in tested if not p.derived_from}
    return [
        p
        for p in tested
        if not p.derived_from or ((p.derived_from, p.statistic) not in own and (p.derived_from, "median") not in own)
    ]


def _share_source_tests(pending: list[_Pending], family: list[_Pending], adjusted: dict[int, float]) -> None:
    """A derived comparison outside the family takes its source's test: the same p-values."""
    by_key = {(p.cur.name, p.statistic): p for p in family}
    in_family = {id(p) for p in family}
    for p in pending:
        if not p.derived_from or id(p) in in_family or p.p_value is None or p.fixed is not None:
            continue
        src = by_key.get((p.derived_from, p.statistic)) or by_key.get((p.derived_from, "median"))
        if src is None:
            continue
        adjusted[id(p)] = adjusted[id(src)]
        p.p_value = src.p_value
        p.noise = f"derived from {p.derived_from}: tested with it, counted once"


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
) -> tuple[list[Comparison], list[Comparison]]:
    """Every comparison of a check decided: (the tested ones, the new/missing/informational ones)."""

    def each(base: Metric, cur: Metric) -> list[_Pending]:
        single = min(len(base.samples), len(cur.samples)) == 1
        return [
            _prepare(
                base,
                cur,
                stat,
                policy,
                paired,
                runs,
                stats=stats,
                sides=sides.get(cur.name),
                derived_from=derived.get(cur.name, ""),
            )
            for stat in _statistics_of(cur, policy, single)
        ]

    pending, fixed = _split(baseline, current, policy, each)
    family = _family(pending)
    adjusted = _holm_by_id(family)
    _share_source_tests(pending, family, adjusted)
    decided = [_decide(p, adjusted.get(id(p)), policy, len(family), stats) for p in pending]
    return decided, fixed
