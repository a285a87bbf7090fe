"""The regression decision: a current run against its baseline, metric by metric.

A metric **regresses** when its direction-adjusted relative change exceeds its threshold
*and* the one-sided test that the current run is worse is significant after Holm's
correction over every comparison of the check. Everything else is ``improved``,
``unchanged``, ``inconclusive`` (over the threshold but not significant, the confidence
interval still reaching past the threshold, or too few samples for a tail quantile — each
with the sample size that would decide), ``missing``, ``new`` or ``informational``.
With a single sample on either side only the threshold applies. Budgets are checked on the
current run alone and hold without any baseline.

Two runs measured at different times differ by the machine's phase, which neither run's
samples show, so every unpaired test is a test on the log ratio of the two locations whose
standard error includes the run-to-run noise (:mod:`perfgate.core.noise`): this machine's
calibration, or the spread of a baseline pooled from runs spread out in time, or else a
conservative assumption that the report names. When both sides carry the machine-speed
index (reference kernels timed with the samples), the locations compared are the stage's
times in units of its reference, and the raw change is reported beside them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from scipy import stats as sps

from perfgate.core.metrics import BUILTIN_METRICS, Direction, describe
from perfgate.core.noise import (
    TAIL_FACTOR,
    NoiseModel,
    between_groups,
    common_kernel,
    group_locations,
    independent_runs,
    normalised,
)
from perfgate.core.policy import Budget, Policy
from perfgate.core.schema import Metric, Run
from perfgate.core.significance import holm, log_ratio_se
from perfgate.core.stats import QUANTILES, Summary, min_samples_for, quantile, quantile_ci, summarize
from perfgate.errors import MismatchError

__all__ = [
    "BudgetCheck",
    "CheckResult",
    "Comparison",
    "Verdict",
    "budgets_only",
    "check_budgets",
    "compare_runs",
]

_MAX_REQUIRED_N = 10_000_000
# Degrees of freedom from which consecutive worker processes' own spread may raise the
# assumed per-process noise (fewer say too little about it)
_MIN_NOISE_DF = 3
# pooled runs from which the baseline's own spread between runs is the run-to-run noise
_MIN_SPREAD_RUNS = 3
_BOUNDARY_SLACK = 1e-12  # in log-ratio units
_MEMORY_UNITS = {"B", "KB", "KiB", "MB", "MiB", "GB", "GiB", "bytes"}


class Verdict(StrEnum):
    REGRESSED = "regressed"
    IMPROVED = "improved"
    UNCHANGED = "unchanged"
    INCONCLUSIVE = "inconclusive"
    INFORMATIONAL = "informational"
    MISSING = "missing"
    NEW = "new"


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    """One metric (and one location statistic of it) compared across two runs.

    ``change`` is the raw relative change of the statistic (current / baseline - 1);
    ``worse`` the direction-adjusted one, positive when the current run is worse (a 15 %
    throughput drop is ``worse = +0.15``). ``ci`` bounds ``worse`` at the policy's
    confidence level.
    """

    metric: str
    statistic: str
    unit: str
    direction: Direction
    baseline: Summary | None
    current: Summary | None
    baseline_value: float | None
    current_value: float | None
    change: float | None
    worse: float | None
    ci: tuple[float, float] | None
    p_value: float | None
    p_adjusted: float | None
    threshold: float
    verdict: Verdict
    reason: str = ""
    required_n: int | None = None
    required_unit: str = "samples"  # or "processes", or "pairs" (perfgate ab): what more of would decide it
    required_seconds: float | None = None  # perfgate ab: the time budget those pairs would take
    threshold_only: bool = False
    noise: str = ""  # the run-to-run noise folded into the test, when there was any
    noise_assumed: bool = False  # that noise was the default assumption, not measured on this machine
    reference: str = ""  # the reference kernel both sides were normalised by ("" = raw values compared)
    raw_change: float | None = None  # with a reference: the raw relative change, beside the normalised one

    @property
    def label(self) -> str:
        return self.metric if self.statistic == "median" else f"{self.metric} ({self.statistic})"

    @property
    def description(self) -> str:
        return describe(self.metric)


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetCheck:
    """One budget evaluated on the current run."""

    budget: Budget
    unit: str
    direction: Direction
    value: float | None  # None: the metric was not measured
    n: int
    ok: bool
    note: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckResult:
    """Everything one check found; the report and the exit code are derived from it."""

    current: Run
    baseline: Run | None
    comparisons: tuple[Comparison, ...]
    budgets: tuple[BudgetCheck, ...]
    policy: Policy
    machine_mismatch: bool = False
    baseline_source: str = ""

    def with_verdict(self, verdict: Verdict) -> list[Comparison]:
        return [c for c in self.comparisons if c.verdict is verdict]

    @property
    def regressions(self) -> list[Comparison]:
        return self.with_verdict(Verdict.REGRESSED)

    @property
    def broken_budgets(self) -> list[BudgetCheck]:
        return [b for b in self.budgets if not b.ok]

    @property
    def failed(self) -> bool:
        return bool(self.regressions or self.broken_budgets)

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0


def _statistic_value(samples: tuple[float, ...], statistic: str) -> float:
    if statistic == "mean":
        return math.fsum(samples) / len(samples)
    if statistic == "max":
        return max(samples)
    if statistic == "min":
        return min(samples)
    return quantile(samples, statistic)


def check_budgets(run: Run, budgets: tuple[Budget, ...]) -> tuple[BudgetCheck, ...]:
    """Evaluate absolute limits on one run; no baseline is needed."""
    results = []
    for budget in budgets:
        metric = run.metrics.get(budget.metric)
        if metric is None:
            info = BUILTIN_METRICS.get(budget.metric)
            results.append(
                BudgetCheck(
                    budget=budget,
                    unit=info.unit if info else "",
                    direction=info.direction if info else Direction.LOWER,
                    value=None,
                    n=0,
                    ok=True,
                    note="not measured in this run",
                )
            )
            continue
        value = _statistic_value(metric.samples, budget.statistic)
        ok = value >= budget.limit if metric.direction is Direction.HIGHER else value <= budget.limit
        note = ""
        if budget.statistic in QUANTILES and len(metric.samples) < min_samples_for(budget.statistic):
            note = (
                f"estimated from {len(metric.samples)} samples; {min_samples_for(budget.statistic)} "
                f"give a reliable {budget.statistic}"
            )
        results.append(
            BudgetCheck(
                budget=budget,
                unit=metric.unit,
                direction=metric.direction,
                value=value,
                n=len(metric.samples),
                ok=ok,
                note=note,
            )
        )
    return tuple(results)


@dataclass(slots=True)
class _Pending:
    """A comparison before the family-wise correction decides its verdict."""

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


def _required_n(n_now: int, se: float | None, margin: float, z: float) -> int | None:
    """Samples per side at which an estimate ``margin`` away from the boundary is decided."""
    if se is None or se <= 0 or n_now < 2:
        return None
    if margin <= 1e-12:
        return None
    need = math.ceil(n_now * (z * se / margin) ** 2)
    return min(max(need, n_now + 1), _MAX_REQUIRED_N)


def _prepare(
    base: Metric,
    cur: Metric,
    statistic: str,
    policy: Policy,
    paired: bool = False,
    runs: tuple[int, int] = (1, 1),
) -> _Pending:
    threshold = policy.threshold_for(cur.name)
    n_base, n_cur = len(base.samples), len(cur.samples)
    threshold_only = min(n_base, n_cur) == 1
    raw_base, raw_cur = _statistic_value(base.samples, statistic), _statistic_value(cur.samples, statistic)
    kernel = None if threshold_only or paired else common_kernel(base, cur)
    tb, tc = (normalised(base), normalised(cur)) if kernel else (None, None)
    test_base, test_cur = (tb, tc) if tb is not None and tc is not None else (base, cur)
    base_value, cur_value = (
        _statistic_value(test_base.samples, statistic),
        _statistic_value(test_cur.samples, statistic),
    )
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
    pending = _Pending(
        base=base,
        cur=cur,
        statistic=statistic,
        threshold=threshold,
        base_value=raw_base,
        cur_value=raw_cur,
        log_worse=log_worse,
        se=None,
        p_value=None,
        threshold_only=threshold_only,
        kernel=kernel or "",
        raw_change=(raw_cur / raw_base - 1.0) if kernel and raw_base > 0 else None,
        normalised_change=(cur_value / base_value - 1.0) if kernel and base_value > 0 else None,
    )
    if threshold_only:
        return pending
    needed = min_samples_for(statistic)
    if min(n_base, n_cur) < needed:
        pending.fixed = Verdict.INCONCLUSIVE
        pending.reason = f"{statistic} is compared from {needed} samples per side; this check has {n_base}/{n_cur}"
        pending.required_n = needed
        return pending
    base_ci = quantile_ci(test_base.samples, statistic, policy.confidence)
    cur_ci = quantile_ci(test_cur.samples, statistic, policy.confidence)
    pending.se = log_ratio_se(base_value, base_ci, cur_value, cur_ci, policy.confidence)
    if paired and _paired_test(pending):
        return pending
    if log_worse is not None and math.isinf(log_worse):
        # a rate that fell to 0 (a total loss) or a time that vanished: no noise makes that a fluke
        pending.p_value = 0.0 if log_worse > 0 else 1.0
        pending.se = None
        return pending
    if log_worse is None or pending.se is None:
        pending.fixed = Verdict.INCONCLUSIVE
        side = "baseline" if base_value == 0 else "current"
        pending.reason = f"the {side} {statistic} is 0; the log-ratio test is undefined"
        return pending
    _fold_run_noise(pending, policy, test_base, test_cur, runs)
    return pending


def _assumed(policy: Policy, unit: str, kernel: str, statistic: str) -> NoiseModel:
    if unit in _MEMORY_UNITS:
        return policy.assumed_memory
    model = policy.assumed_normalised if kernel else policy.assumed_raw
    factor = TAIL_FACTOR.get(statistic, 1.0)
    return NoiseModel(phase=model.phase * factor, process=model.process * factor)


def _fold_run_noise(p: _Pending, policy: Policy, base: Metric, cur: Metric, runs: tuple[int, int]) -> None:
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
    assert p.log_worse is not None and p.se is not None
    q = QUANTILES[p.statistic]
    g_base, g_cur = len(base.group_samples()), len(cur.group_samples())
    r_base = g_base if runs[0] > 1 else 1
    r_cur = g_cur if runs[1] > 1 else 1
    p.groups = (g_base, g_cur)
    p.within_se = p.se
    calibrated = policy.noise_for(p.cur.name, p.statistic, normalised=bool(p.kernel))
    scale = "in units of its reference" if p.kernel else ""
    if calibrated is not None:
        p.fixed_variance = calibrated**2 * (1.0 / r_base + 1.0 / r_cur)
        p.noise = f"run-to-run σ {calibrated:.1%} {scale} (this machine's calibration)".replace("  ", " ")
    elif r_base >= _MIN_SPREAD_RUNS:
        logs = group_locations(base, q)
        spread = float(logs.std(ddof=1)) if len(logs) > 1 else 0.0
        p.fixed_variance = spread**2 * (1.0 / r_base + 1.0 / r_cur)
        p.df = max(len(logs) - 1, 1)
        p.noise = f"run-to-run σ {spread:.1%} {scale} (the spread of the baseline's {r_base} runs)".replace("  ", " ")
    else:
        model = _assumed(policy, p.cur.unit, p.kernel, p.statistic)
        # only worker-process groups; a pooled side's groups are runs, whose spread is another thing
        processes = between_groups(base if r_base == 1 else None, cur if r_cur == 1 else None, q)
        if processes is not None and processes.df >= _MIN_NOISE_DF:
            model = NoiseModel(phase=model.phase, process=max(model.process, processes.sigma))
        p.fixed_variance = model.phase**2 * (1.0 / r_base + 1.0 / r_cur)
        p.process_sigma = model.process
        p.noise_assumed = True
        one_run = model.sigma(1, min(g_base, g_cur))
        p.noise = f"run-to-run σ {one_run:.1%} {scale} assumed".replace("  ", " ")
    process_variance = p.process_sigma**2 * (1.0 / g_base + 1.0 / g_cur)
    total = p.within_se**2 + p.fixed_variance + process_variance
    p.se = math.sqrt(total)
    if p.df is None and p.within_se > 0:
        # the within-run part is estimated from few samples when a side has few: its degrees of
        # freedom carry over to the whole variance in proportion (Welch-Satterthwaite), the
        # run-to-run part being taken as known
        within_df = min(len(base.samples), len(cur.samples)) - 1
        effective = total**2 / (p.within_se**4 / max(within_df, 1))
        p.df = math.floor(effective) if effective < 1000 else None
    null = sps.t(p.df) if p.df is not None else sps.norm
    p.p_value = float(null.sf(p.log_worse / p.se)) if p.se > 0 else (0.0 if p.log_worse > 0 else 1.0)


def _paired_test(p: _Pending) -> bool:
    """Paired t test over interleaved repetitions (``perfgate ab``): group i of each side ran
    next to each other, so their log ratio cancels the machine's phase at that moment.

    The estimate is the mean of the k paired log ratios, its standard error their SD over
    sqrt(k), on k - 1 degrees of freedom. Needs the same number (at least 3) of groups on
    both sides; returns False otherwise.
    """
    if p.log_worse is None or not math.isfinite(p.log_worse):
        return False
    q = QUANTILES[p.statistic]
    a, b = group_locations(p.base, q), group_locations(p.cur, q)
    k = len(p.base.group_samples())
    if k < 3 or len(a) != k or len(b) != k or len(p.cur.group_samples()) != k:
        return False
    d = b - a if p.cur.direction is Direction.LOWER else a - b
    p.log_worse = float(d.mean())
    p.se = float(d.std(ddof=1)) / math.sqrt(k)
    p.df = k - 1
    p.sigma_run = float(d.std(ddof=1)) / math.sqrt(2.0)
    p.groups = (k, k)
    p.p_value = float(sps.t(p.df).sf(p.log_worse / p.se)) if p.se > 0 else (0.0 if p.log_worse > 0 else 1.0)
    p.noise = f"paired over {k} interleaved repetitions (SD of paired log ratios {float(d.std(ddof=1)):.1%})"
    return True


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


def _decide(p: _Pending, p_adjusted: float | None, policy: Policy, n_tests: int) -> Comparison:
    direction = p.cur.direction
    worse = None if p.log_worse is None else _worse_from_log(p.log_worse, direction)
    change = None if p.base_value == 0 else p.cur_value / p.base_value - 1.0
    if p.kernel:  # the decided change is the normalised one; the raw one is reported beside it
        change = p.normalised_change
    ci = None
    null = sps.t(p.df) if p.df is not None else sps.norm
    z_ci = float(null.ppf(0.5 + policy.confidence / 2.0))
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
        z_alpha = float(null.isf(policy.alpha / max(n_tests, 1)))
        z_power = float(sps.norm.ppf(policy.power))
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
    return Comparison(
        metric=p.cur.name,
        statistic=p.statistic,
        unit=p.cur.unit,
        direction=direction,
        baseline=summarize(p.base.samples),
        current=summarize(p.cur.samples),
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


def compare_runs(
    baseline: Run,
    current: Run,
    policy: Policy,
    *,
    allow_machine_mismatch: bool = False,
    baseline_source: str = "",
    paired: bool = False,
) -> CheckResult:
    """Compare ``current`` against ``baseline`` under ``policy``.

    ``paired`` says that group i of both runs was measured side by side (``perfgate ab``
    alternates the two versions), so timing metrics are tested on paired log ratios.

    Raises:
        MismatchError: the runs are of different models, of different machines (unless
            ``allow_machine_mismatch``), or a metric changed its unit or direction.
    """
    if baseline.model_key != current.model_key:
        raise MismatchError(
            f"baseline is of model {baseline.model!r}, current run of {current.model!r}; "
            "compare runs of the same model (each model has its own baseline)"
        )
    fp_base, fp_cur = baseline.machine.fingerprint, current.machine.fingerprint
    mismatch = bool(fp_base and fp_cur and fp_base != fp_cur)
    if mismatch and not allow_machine_mismatch:
        raise MismatchError(
            f"baseline was measured on machine {fp_base}, current run on {fp_cur}; timings do not "
            "carry across machines. Record a baseline on this machine, or pass --allow-machine-mismatch"
        )
    for name, cur in current.metrics.items():
        base = baseline.metrics.get(name)
        if base is not None and (base.unit != cur.unit or base.direction is not cur.direction):
            raise MismatchError(
                f"metric {name!r} is {base.unit}/{base.direction.value} in the baseline and "
                f"{cur.unit}/{cur.direction.value} now; re-record the baseline"
            )

    runs = (independent_runs(baseline), independent_runs(current))

    def prepare(base: Metric, cur: Metric) -> list[_Pending]:
        single = min(len(base.samples), len(cur.samples)) == 1
        return [_prepare(base, cur, stat, policy, paired, runs) for stat in _statistics_of(cur, policy, single)]

    pending, fixed = _split(baseline, current, policy, prepare)
    tested = [p for p in pending if p.p_value is not None and p.fixed is None]
    adjusted = _holm_by_id(tested)
    decided = [_decide(p, adjusted.get(id(p)), policy, len(tested)) for p in pending]
    return CheckResult(
        current=current,
        baseline=baseline,
        comparisons=tuple(decided + fixed),
        budgets=check_budgets(current, policy.budgets_for(current.model_key)),
        policy=policy,
        machine_mismatch=mismatch,
        baseline_source=baseline_source,
    )


def budgets_only(current: Run, policy: Policy) -> CheckResult:
    """A check with no baseline yet: every metric is ``new``, the budgets still hold."""
    return CheckResult(
        current=current,
        baseline=None,
        comparisons=tuple(_unpaired(m, "current", policy) for m in current.metrics.values()),
        budgets=check_budgets(current, policy.budgets_for(current.model_key)),
        policy=policy,
        baseline_source="none yet: only the budgets were checked",
    )
