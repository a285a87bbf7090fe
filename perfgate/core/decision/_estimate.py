"""The estimate of one comparison and its one-sided test, each step returning its result.

:func:`sides_of` says what a metric is tested on (raw samples, or both sides in units of a
shared reference kernel); :func:`estimate_values` gives the statistic on both sides and its
direction-adjusted log ratio; :func:`unpaired_test` tests that log ratio with the run-to-run
noise folded into its standard error (:mod:`perfgate.core.noise`), :func:`paired_test` on the
paired log ratios of interleaved repetitions.

:class:`Estimate` is what a check knows of one comparison (a metric and a statistic) before
its verdict: made once, immutable. The stored check makes it in
:mod:`perfgate.core.decision._prepare`, the paired gate of ``perfgate ab`` in
:mod:`perfgate.core.paired`; :func:`perfgate.core.decision._family.holm_family` adds what the family
says (a derived metric's shared test, the Holm-adjusted p-value) by making new ones, and
:func:`perfgate.core.decision._prepare.decide` turns each into a verdict.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from perfgate.core.decision._samplestats import SampleStats
from perfgate.core.decision._tail import Tail, robust_to_scale
from perfgate.core.distributions import t_sf
from perfgate.core.noise import (
    CALIBRATED_TAIL_DF,
    TAIL_FACTOR,
    NoiseModel,
    between_groups,
    common_kernel,
    group_locations,
    normalised,
)
from perfgate.core.policy import MIN_LEARNED_RUNS, Policy
from perfgate.core.result import Verdict
from perfgate.core.schema import Metric
from perfgate.core.stats import QUANTILES
from perfgate.core.units import MEMORY_UNITS

__all__ = [
    "Estimate",
    "OneSidedTest",
    "Sides",
    "Values",
    "estimate_values",
    "paired_test",
    "sides_of",
    "unpaired_test",
]

# Degrees of freedom from which consecutive worker processes' own spread may raise the
# assumed per-process noise (fewer say too little about it)
_MIN_NOISE_DF = 3
# pooled runs from which the baseline's own spread between runs is the run-to-run noise
_MIN_SPREAD_RUNS = 3


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
class Values:
    """The statistic on both sides and its direction-adjusted log ratio."""

    base_value: float  # raw, as reported
    cur_value: float
    test_base: float  # what is tested (normalised, with a kernel)
    test_cur: float
    log_worse: float | None
    raw_change: float | None
    normalised_change: float | None


def estimate_values(base: Metric, cur: Metric, sides: Sides, statistic: str, stats: SampleStats) -> Values:
    raw_base, raw_cur = stats.value(base, statistic), stats.value(cur, statistic)
    if sides.kernel:
        base_value, cur_value = stats.value(sides.base, statistic), stats.value(sides.cur, statistic)
    else:
        base_value, cur_value = raw_base, raw_cur
    log_worse: float | None = None
    if base_value > 0 and cur_value > 0:
        log_ratio = math.log(cur_value / base_value)
        log_worse = cur.direction.worse(log_ratio)
    elif base_value == cur_value:
        log_worse = 0.0
    elif base_value > 0:
        # the current value is 0: a time that vanished is infinitely better, a rate that fell
        # to 0 is a total loss (worse = +100 %) and must not pass as "undefined"
        log_worse = cur.direction.worse(-math.inf)
    return Values(
        base_value=raw_base,
        cur_value=raw_cur,
        test_base=base_value,
        test_cur=cur_value,
        log_worse=log_worse,
        raw_change=(raw_cur / raw_base - 1.0) if sides.kernel and raw_base > 0 else None,
        normalised_change=(cur_value / base_value - 1.0) if sides.kernel and base_value > 0 else None,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class OneSidedTest:
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
    values: tuple[float, float] | None = None  # the two sides' values the test compared, when not the pooled ones
    tail: Tail | None = None  # the log ratio's null distribution when its run-to-run term has a t tail


@dataclass(frozen=True, slots=True, kw_only=True)
class Estimate:
    """One comparison (a metric and a statistic) estimated and, where it can be, tested:
    everything its verdict is decided from except the family-wise correction.

    Holm's adjusted p-value is not part of it: :func:`perfgate.core.decision._family.holm_family` gives it
    beside the estimate (``Family.adjusted``), so the family copies nothing. ``fixed`` is a
    verdict known before any test (too few samples, an undefined ratio, no pairs), with its
    ``reason`` and ``required_n``.
    """

    base: Metric
    cur: Metric
    statistic: str
    threshold: float
    base_value: float
    cur_value: float
    log_worse: float | None  # direction-adjusted log ratio; None when a value is 0
    threshold_only: bool = False
    se: float | None = None
    p_value: float | None = None
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
    index_change: float | None = None  # the reference kernel's relative change between the runs
    tail: Tail | None = None  # the null distribution of a test whose run-to-run term has a t tail
    # the run's common shift (direction-adjusted log) this estimate is taken relative to, when it is
    # tested against the rest of its run (perfgate.core.decision._shared_phase); None: its whole change
    relative_to: float | None = None

    @property
    def key(self) -> tuple[str, str]:
        """(metric, statistic): unique within a check."""
        return (self.cur.name, self.statistic)

    @property
    def tested(self) -> bool:
        """Whether it carries a test of its own (a p-value, no verdict fixed before the test)."""
        return self.p_value is not None and self.fixed is None

    def with_test(self, test: OneSidedTest) -> Estimate:
        """A new estimate that carries ``test`` (and the values it compared, when it names them)."""
        return self.evolve(**test_fields(test, self.base_value, self.cur_value))

    def fixed_as(self, verdict: Verdict, reason: str, required_n: int | None = None) -> Estimate:
        """A new estimate whose verdict is known before any test."""
        return self.evolve(fixed=verdict, reason=reason, required_n=required_n)

    def evolve(self, **changes: Any) -> Estimate:
        """A new estimate with ``changes``: :func:`dataclasses.replace` without its generic
        machinery, which cost a quarter of a 5,000-metric check (two new estimates per comparison).

        Raises:
            TypeError: a name that is not a field.
        """
        unknown = changes.keys() - _ESTIMATE_FIELDS
        if unknown:
            raise TypeError(f"Estimate has no field {sorted(unknown)[0]!r}")
        new = object.__new__(Estimate)
        for name in _ESTIMATE_FIELDS:
            object.__setattr__(new, name, changes[name] if name in changes else getattr(self, name))
        return new


_ESTIMATE_FIELDS = tuple(f.name for f in dataclasses.fields(Estimate))


def test_fields(test: OneSidedTest, base_value: float, cur_value: float) -> dict[str, Any]:
    """The fields of an :class:`Estimate` that ``test`` sets (the values it compared, when it names
    them, else ``base_value`` and ``cur_value``)."""
    values = test.values if test.values is not None else (base_value, cur_value)
    return {
        "base_value": values[0],
        "cur_value": values[1],
        "log_worse": test.log_worse,
        "se": test.se,
        "p_value": test.p_value,
        "df": test.df,
        "sigma_run": test.sigma_run,
        "groups": test.groups,
        "noise": test.noise,
        "noise_assumed": test.noise_assumed,
        "fixed_variance": test.fixed_variance,
        "process_sigma": test.process_sigma,
        "within_se": test.within_se,
        "tail": test.tail,
    }


def _one_sided(log_worse: float, se: float, df: int | None) -> float:
    return t_sf(log_worse / se, df) if se > 0 else (0.0 if log_worse > 0 else 1.0)


def _assumed(policy: Policy, unit: str, kernel: str, statistic: str) -> NoiseModel:
    if unit in MEMORY_UNITS:
        return policy.assumed_memory
    model = policy.assumed_normalised if kernel else policy.assumed_raw
    factor = TAIL_FACTOR.get(statistic, 1.0)
    return NoiseModel(phase=model.phase * factor, process=model.process * factor, tail_df=model.tail_df)


def unpaired_test(
    log_worse: float,
    within_se: float,
    cur_metric: Metric,
    sides: Sides,
    statistic: str,
    policy: Policy,
    runs: tuple[int, int],
    stats: SampleStats,
    shift: float | None = None,
) -> OneSidedTest:
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

    ``runs`` says how many independent runs each side pooled (1 for a fresh run). With a
    reference kernel, ``shift`` is its log change between the runs: the normalisation may be
    off by ``policy.index_shift`` times that, whichever noise applies
    (:data:`~perfgate.core.noise.INDEX_SHIFT`).
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
    kind = policy.assumed_normalised if sides.kernel else policy.assumed_raw
    tail_df = None if cur_metric.unit in MEMORY_UNITS else kind.tail_df
    heavy = 0.0  # the run-to-run variance that has the t tail (a pooled baseline's t test has its own df)
    if calibrated is not None:
        fixed_variance = calibrated**2 * (1.0 / r_base + 1.0 / r_cur)
        heavy = fixed_variance
        if tail_df is not None:
            tail_df = CALIBRATED_TAIL_DF["normalised" if sides.kernel else "raw"]
        source = (
            f"learned from {policy.noise_runs} runs of this machine"
            if policy.noise_runs
            else "this machine's calibration"
        )
        noise = f"run-to-run σ {calibrated:.1%} {scale} ({source})".replace("  ", " ")
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
            model = dataclasses.replace(model, process=max(model.process, processes.sigma))
        fixed_variance = model.phase**2 * (1.0 / r_base + 1.0 / r_cur)
        heavy = fixed_variance
        process_sigma = model.process
        assumed = True
        one_run = model.sigma(1, min(g_base, g_cur))
        noise = f"run-to-run σ {one_run:.1%} {scale} assumed".replace("  ", " ")
        if policy.noise_too_young:
            noise += f" (this machine's noise is learned from {policy.noise_runs} runs; {MIN_LEARNED_RUNS} are needed)"
    if sides.kernel and shift:
        off = policy.index_shift * abs(shift)
        if off > 0:
            fixed_variance += off**2
            noise += f", and {off:.1%} for the reference kernel's change of {math.expm1(shift):+.0%} between the runs"
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
    tail = None
    if tail_df is not None and heavy > 0:
        # the run-to-run term's middle is the robust SD it was measured with; a t adds its tail
        within4_df = within_se**4 / max(min(len(base.samples), len(cur.samples)) - 1, 1) if df is not None else 0.0
        tail = Tail(df=tail_df, heavy=heavy * robust_to_scale(tail_df) ** 2, light=total - heavy, within4_df=within4_df)
    return OneSidedTest(
        log_worse=log_worse,
        se=se,
        p_value=tail.sf(log_worse) if tail is not None else _one_sided(log_worse, se, df),
        df=df,
        groups=(g_base, g_cur),
        noise=noise,
        noise_assumed=assumed,
        fixed_variance=fixed_variance,
        process_sigma=process_sigma,
        within_se=within_se,
        tail=tail,
    )


def paired_test(base: Metric, cur: Metric, statistic: str, log_worse: float | None) -> OneSidedTest | None:
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
    d = cur.direction.sign * (b - a)
    sd = float(d.std(ddof=1))
    mean = float(d.mean())
    se = sd / math.sqrt(k)
    return OneSidedTest(
        log_worse=mean,
        se=se,
        p_value=_one_sided(mean, se, k - 1),
        df=k - 1,
        sigma_run=sd / math.sqrt(2.0),
        groups=(k, k),
        noise=f"paired over {k} interleaved repetitions (SD of paired log ratios {sd:.1%})",
    )
