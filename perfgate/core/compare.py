"""The regression decision: a current run against its baseline, metric by metric.

A metric **regresses** when its direction-adjusted relative change exceeds its threshold
*and* the one-sided test that the current run is worse is significant after Holm's
correction over every comparison of the check. Everything else is ``improved``,
``unchanged``, ``inconclusive`` (over the threshold but not significant, the confidence
interval still reaching past the threshold, or too few samples for a tail quantile — each
with the sample size that would decide), ``missing``, ``new`` or ``informational``.
With a single sample on either side only the threshold applies. Budgets are checked on the
current run alone and hold without any baseline.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from scipy import stats as sps

from perfgate.core.metrics import BUILTIN_METRICS, Direction, describe
from perfgate.core.noise import between_groups, group_locations
from perfgate.core.policy import Budget, Policy
from perfgate.core.schema import Metric, Run
from perfgate.core.significance import holm, log_ratio_se, mann_whitney_worse, z_test_worse
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
# Degrees of freedom below which the groups' own spread is not used: a t test on 1 or 2
# degrees of freedom is too weak to gate on; the within-run test is used instead.
_MIN_NOISE_DF = 3
_BOUNDARY_SLACK = 1e-12  # in log-ratio units


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
    sigma_run: float | None = None  # run-to-run SD of the log location, when known
    groups: tuple[int, int] = (1, 1)
    noise: str = ""


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


def _prepare(base: Metric, cur: Metric, statistic: str, policy: Policy, paired: bool = False) -> _Pending:
    threshold = policy.threshold_for(cur.name)
    n_base, n_cur = len(base.samples), len(cur.samples)
    threshold_only = min(n_base, n_cur) == 1
    base_value = _statistic_value(base.samples, statistic)
    cur_value = _statistic_value(cur.samples, statistic)
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
        base_value=base_value,
        cur_value=cur_value,
        log_worse=log_worse,
        se=None,
        p_value=None,
        threshold_only=threshold_only,
    )
    if threshold_only:
        return pending
    needed = min_samples_for(statistic)
    if min(n_base, n_cur) < needed:
        pending.fixed = Verdict.INCONCLUSIVE
        pending.reason = f"{statistic} is compared from {needed} samples per side; this check has {n_base}/{n_cur}"
        pending.required_n = needed
        return pending
    base_ci = quantile_ci(base.samples, statistic, policy.confidence)
    cur_ci = quantile_ci(cur.samples, statistic, policy.confidence)
    pending.se = log_ratio_se(base_value, base_ci, cur_value, cur_ci, policy.confidence)
    higher_is_worse = cur.direction is Direction.LOWER
    if paired and _paired_test(pending):
        pass
    elif _fold_run_noise(pending, policy):
        pass
    elif statistic in ("median", "p50"):
        pending.p_value = mann_whitney_worse(base.samples, cur.samples, higher_is_worse=higher_is_worse)
    elif log_worse is not None and pending.se is not None:
        pending.p_value = z_test_worse(log_worse, pending.se)
    else:
        pending.fixed = Verdict.INCONCLUSIVE
        side = "baseline" if base_value == 0 else "current"
        pending.reason = f"the {side} {statistic} is 0; the log-ratio test is undefined"
    return pending


def _fold_run_noise(p: _Pending, policy: Policy) -> bool:
    """Test on the log ratio with the run-to-run noise in its standard error, when it is known.

    The between-run SD comes from the runs' own groups (worker processes, pooled runs) and
    from the machine's calibration (``Policy.noise``); the larger is used. The standard error
    of the log ratio is then at least ``sigma * sqrt(1/G_base + 1/G_current)``. With only the
    groups' own estimate the test is a t test on their degrees of freedom (at least 3); a
    calibration from the history makes it a z test. Returns False when neither estimate
    exists (the caller then falls back to the within-run test).
    """
    if p.log_worse is None or not math.isfinite(p.log_worse) or p.se is None:
        return False
    q = QUANTILES[p.statistic]
    data = between_groups(p.base, p.cur, q)
    if data is not None and data.df < _MIN_NOISE_DF:
        data = None  # one or two spare groups say too little about the spread to test on
    calibrated = policy.noise_for(p.cur.name, p.statistic)
    if data is None and calibrated is None:
        return False
    g_base, g_cur = len(p.base.group_samples()), len(p.cur.group_samples())
    sigma = max(data.sigma if data else 0.0, calibrated or 0.0)
    p.sigma_run = sigma
    p.groups = (g_base, g_cur)
    p.df = data.df if calibrated is None and data is not None else None
    p.se = max(p.se, sigma * math.sqrt(1.0 / g_base + 1.0 / g_cur))
    null = sps.t(p.df) if p.df is not None else sps.norm
    p.p_value = float(null.sf(p.log_worse / p.se)) if p.se > 0 else (0.0 if p.log_worse > 0 else 1.0)
    sources = []
    if data is not None:
        sources.append(f"{g_base}+{g_cur} independent repetitions")
    if calibrated is not None:
        sources.append("this machine's calibration")
    p.noise = f"run-to-run σ {sigma:.1%} ({' and '.join(sources)})"
    return True


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


def _decide(p: _Pending, p_adjusted: float | None, policy: Policy, n_tests: int) -> Comparison:
    direction = p.cur.direction
    worse = None if p.log_worse is None else _worse_from_log(p.log_worse, direction)
    change = None if p.base_value == 0 else p.cur_value / p.base_value - 1.0
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
    unit = "samples" if p.sigma_run is None else "processes"

    def need(margin: float, z: float) -> int | None:
        if p.sigma_run is not None:  # more repetitions of the whole run, not more samples, decide it
            return _required_groups(p.sigma_run, margin, z, min(p.groups))
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

    def prepare(base: Metric, cur: Metric) -> list[_Pending]:
        single = min(len(base.samples), len(cur.samples)) == 1
        return [_prepare(base, cur, stat, policy, paired) for stat in _statistics_of(cur, policy, single)]

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
