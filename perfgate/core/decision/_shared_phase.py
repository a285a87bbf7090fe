"""A run is its own control: each metric tested against what the rest of its run did.

In a stored comparison every timing metric of one run shares the machine's phase that
minute, so each metric's log ratio (current over baseline, direction-adjusted) is

    L_i = s + d_i + e_i

the run's **common shift** ``s`` (the machine, or a change of the code that touched
everything), the metric's **own change** ``d_i`` and its **residual noise** ``e_i``. The
phase is in ``s`` alone: what most metrics moved together is the machine, what one moved
apart from the rest, beyond its own residual noise, is the code (``docs/noise.md`` §4, "A run as its own control").

:func:`relative_to_run` takes a check's estimates and, per clock (the CPU, or a CUDA
device: a GPU stage's time does not follow the CPU's phase), does three things:

1. **The shift, robustly.** ``s`` is the median of the raw log ratios of the clock's timing
   medians (a derived throughput is not independent evidence and is left out). A median is
   what a majority moved together: a minority that moved, however far, does not drag it.
   Its standard error is the spread of the metrics around it, 1.25 × SD / √k. At least
   :data:`MIN_CONTROL` medians make a control; with fewer the estimates stay as they are.
2. **Each metric against the shift.** Every timing median of the clock (a throughput's too;
   a tail quantile keeps its own test, :func:`_eligible`) is replaced by one of ``d = L − s``,
   tested against the metric's own residual noise, the first available of:

   * **history** — a baseline pooled from at least :data:`MIN_HISTORY_RUNS` runs spread in
     time: per metric, the SD over those runs of its log location once each run's own shift
     is removed (:func:`residual_sigmas`); the current run is one more such run;
   * **a calibration** (``perfgate calibrate``): the same residual SD, learned the same way
     from the store's history and kept per machine and model (keys ending ``@residual``);
   * **the run's own processes** — the spread between the worker processes of both runs,
     which shared the phase, so their spread is exactly the part that is not shared;
     never below :data:`PROCESS_FLOOR` per side;
   * **nothing** — a run of one process has no such spread: a single benchmark can move by
     25 % or 2× between fresh processes of identical code (string hashing, thread state and
     memory layout are drawn per process). No metric of it is then called regressed or
     improved alone; the reason is said once (:data:`SINGLE_PROCESS`).

   Each test also carries the shift's own uncertainty and :data:`SHIFT_SPREAD` × the raw
   shift: metrics follow a change of the machine's speed by different factors (0.7 to 2.0
   here between two days), so a run that moved as a whole leaves each metric less certain. A
   residual learned from history already holds that for shifts as large as its runs' (up to
   :data:`LEARNED_SHIFT`); only the part beyond is added.
3. **Breadth.** Where metrics have no residual noise of their own, many of them moving the
   same way beyond the threshold is still evidence: a per-process offset strikes each
   benchmark on its own, at most :data:`BREADTH_RATE` of them past the threshold in one
   direction, and as often faster as slower. When the count that moved one way is improbable
   under that rate (binomial) and against the count that moved the other way (a sign test),
   both at the per-metric α, those metrics moved together with the code (:func:`breadth`).

The shift itself is then tested as before (:mod:`perfgate.core.decision._common_shift`), on the
metrics that moved with it: against the reference kernels where the run has them, against a
measured noise where there is one; otherwise a shift past the threshold exits 2.

Tested in ``tests/core/test_shared_phase.py``: the partial-regression family (k of n metrics
moved, every k below n/2), single-process A/A with 25 % and 2× offsets, a majority shift.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from perfgate.core.decision._counts import is_count
from perfgate.core.decision._estimate import Estimate
from perfgate.core.decision._moderated import OUTLIER_LEVEL, _f_sf, fit_prior
from perfgate.core.distributions import t_sf
from perfgate.core.noise import (
    MIN_CONTROL,
    BetweenGroups,
    between_groups,
    group_locations,
    normalised,
    residuals_of,
)
from perfgate.core.policy import Policy, residual_key
from perfgate.core.result import Control, SharedPhase
from perfgate.core.schema import Metric
from perfgate.core.stats import QUANTILES
from perfgate.core.units import MEMORY_UNITS

__all__ = [
    "BREADTH_RATE",
    "MIN_CONTROL",
    "MIN_HISTORY_RUNS",
    "PROCESS_FLOOR",
    "SHIFT_SPREAD",
    "SINGLE_PROCESS",
    "breadth",
    "is_median",
    "relative_to_run",
    "robust_shift",
    "tightest_majority",
]

# runs a pooled baseline needs for its per-metric residual SD to stand for the metric's noise
MIN_HISTORY_RUNS = 3
# the least residual SD of one run's log location, when learned from its processes: they
# share the phase that minute, and a metric's response to the phase differs a little from run
# to run; and when learned from history (an SD from few runs can come out near 0)
PROCESS_FLOOR = 0.015
HISTORY_FLOOR = 0.005
# the SD of a metric's residual per unit of the run's raw log shift (metrics follow a change of
# the machine's speed by 0.7-2.0 times, docs/noise.md §4)
SHIFT_SPREAD = 0.5
# the run shifts a residual learned from history already covers: runs of this machine minutes
# apart differ by a few percent to about 10 % as a whole (docs/noise.md §4: SD 1.8 % on a quiet
# hour), and each metric's residual over them holds how it follows such phases
LEARNED_SHIFT = 0.10
# the most a per-process offset moves benchmarks of one single-process run past the threshold
# in one direction, as a share of them (about 4-5 % were seen in 45 A/A pairs of a 12-benchmark
# suite, docs/noise.md §4), and the fewest metrics a breadth claim names
BREADTH_RATE = 0.10
BREADTH_MIN = 3
_IN_KERNELS = ", in units of its reference kernels"
SINGLE_PROCESS = (
    "each side is one process and there is no history: a single benchmark can move by 25 % or 2× between "
    "fresh processes of identical code, so no metric is judged alone. Record runs on main "
    "(perfgate record, then check --store), calibrate (perfgate calibrate), or measure in several processes "
    "(--processes 4)"
)


def robust_shift(logs: Sequence[float]) -> tuple[float, float]:
    """The median of ``logs`` and its standard error (1.2533 × the robust SD around it / √k)."""
    x = np.asarray(logs, dtype=float)
    centre = float(np.median(x))
    return centre, _robust_se(x, centre)


def _robust_se(x: np.ndarray, centre: float) -> float:
    """1.2533 × the robust SD of ``x`` around ``centre`` / √k: a median's standard error."""
    sd = 1.4826 * float(np.median(np.abs(x - centre)))
    if sd == 0 and len(x) > 1:  # more than half the values equal: their plain SD
        sd = float(x.std(ddof=1))
    return 1.2533 * sd / math.sqrt(len(x))


def tightest_majority(logs: Sequence[float]) -> tuple[float, float]:
    """What the tightest majority of ``logs`` moved together, and its standard error.

    The majority is the ⌊k/2⌋ + 1 sorted values with the least sum of squares about their mean
    (least trimmed squares, whose best subset of a location problem is a window of the sorted
    values), and the centre is their median. Where a run's values fall in two clusters (its
    regressed metrics and a few a neighbour disturbed make half of it) the plain median lands in
    the gap between them, which is no run's shift; the tightest majority is the part that moved
    together. The error is :func:`robust_shift`'s, around that centre."""
    x = np.sort(np.asarray(logs, dtype=float))
    k = len(x)
    h = k // 2 + 1
    sums = np.concatenate(([0.0], np.cumsum(x)))
    squares = np.concatenate(([0.0], np.cumsum(x * x)))
    window = np.arange(k - h + 1)
    total = sums[window + h] - sums[window]
    spread = squares[window + h] - squares[window] - total * total / h
    start = int(np.argmin(np.round(spread, 15)))
    centre = float(np.median(x[start : start + h]))
    return centre, _robust_se(x, centre)


def _as_tested(m: Metric | None, scaled: bool) -> Metric | None:
    """A side as the control compares it: in units of its reference kernel (``scaled``) or raw."""
    if m is None or not scaled:
        return m
    return normalised(m)


def _spread(e: Estimate, base: Metric | None, cur: Metric | None, scaled: bool) -> BetweenGroups | None:
    """The spread between the worker processes of the given sides, for ``e``'s statistic."""
    base, cur = _as_tested(base, scaled), _as_tested(cur, scaled)
    if base is None and cur is None:
        return None
    return between_groups(base, cur, QUANTILES[e.statistic])


def _weighted_shift(values: Sequence[tuple[float, float]], *, weighted: bool) -> tuple[float, float]:
    """The run's shift from its medians' (log ratio, own variance), and its standard error.

    Starting from the tightest majority (:func:`tightest_majority`), the metrics within three of
    their own SDs of it are the ones that moved with the run; the shift is their
    precision-weighted mean, twice refined, and its standard error that of the mean, widened
    when they scatter more than their variances say. When they are not a majority of the run (half
    of it moved apart), or without variances of their own (one process a side), the median and
    its robust error stand (:func:`robust_shift`)."""
    logs = [v for v, _ in values]
    if not weighted or len(values) < MIN_CONTROL:
        return robust_shift(logs)
    centre, se = tightest_majority(logs)
    for _ in range(2):
        inside = [(v, w) for v, w in values if w > 0 and abs(v - centre) <= max(3.0 * math.sqrt(w), 0.02)]
        if len(inside) < MIN_CONTROL // 2 + 1 or 2 * len(inside) <= len(values):
            # no majority moved together within its noise (half the run moved apart): the plain
            # median and its wide error, which no minority can be refined toward
            return robust_shift(logs)
        weights = [1.0 / w for _, w in inside]
        total = math.fsum(weights)
        centre = math.fsum(v * k for (v, _), k in zip(inside, weights, strict=True)) / total
        scatter = math.fsum(k * (v - centre) ** 2 for (v, _), k in zip(inside, weights, strict=True))
        se = math.sqrt(1.0 / total) * max(1.0, math.sqrt(scatter / max(len(inside) - 1, 1)))
    return centre, se


# the share of a run's medians whose scatter sets its dispersion (the majority, which moved with it)
_NORMAL_MEDIAN_CHI2 = 0.4549364231195724  # the median of a chi-square on 1 df


def _dispersion(ratios: Sequence[float]) -> float:
    """How much more the run's medians scatter around its shift than their variances say: the
    median of their squared standardised residuals over a chi-square's median (a minority that
    moved does not set it), when it is past what chance gives; else 1, and 1 with fewer than
    :data:`MIN_CONTROL` of them."""
    if len(ratios) < MIN_CONTROL:
        return 1.0
    dispersion = float(np.median(ratios)) / _NORMAL_MEDIAN_CHI2
    # a median of few chi-squares scatters widely by itself: only a dispersion past its 99 % point
    # under no disturbance (about 1 + 10 / sqrt(k) for k of them, seeded simulation) is taken
    return dispersion if dispersion > 1.0 + 10.0 / math.sqrt(len(ratios)) else 1.0


def _raw_log_worse(e: Estimate, scaled: bool = False) -> float | None:
    """The direction-adjusted log ratio of ``e``: in units of its reference kernel (``scaled``,
    what its own test compares), else of the raw values."""
    if scaled:
        return e.log_worse
    if e.base_value <= 0 or e.cur_value <= 0:
        return None
    log_ratio = math.log(e.cur_value / e.base_value)
    return e.cur.direction.worse(log_ratio)


def _eligible(e: Estimate) -> bool:
    """A timing median the machine's phase moves: it carries a run-to-run term and a test. A tail
    quantile (p95, p99) keeps its own test against the whole run-to-run noise: a run's tail moves
    with more than its phase (one run's p99 of identical code was 34 % below another's while every
    median and the processes' own p99s agreed), which the run's medians cannot stand for."""
    return (
        is_median(e.statistic)
        and e.tested
        and not e.threshold_only
        and e.sigma_run is None
        and e.fixed_variance > 0
        and e.cur.unit not in MEMORY_UNITS
        and not is_count(e.cur)
        and e.log_worse is not None
        and math.isfinite(e.log_worse)
        and _raw_log_worse(e) is not None
    )


def is_median(statistic: str) -> bool:
    return statistic in ("median", "p50")


def _history_residuals(estimates: Sequence[Estimate], runs: int, scaled: bool) -> dict[tuple[str, str], float]:
    """Per (metric, statistic): the residual SD learned from the pooled baseline's runs, each
    run's shift taken from the medians (:func:`perfgate.core.noise.run_shifts`)."""

    def logs_of(e: Estimate) -> np.ndarray | None:
        base = _as_tested(e.base, scaled)
        if base is None:
            return None
        logs = group_locations(base, QUANTILES[e.statistic])
        if len(logs) != runs:
            return None
        return e.cur.direction.sign * logs

    columns = {e.key: logs for e in estimates if (logs := logs_of(e)) is not None}
    return residuals_of(columns, [e.key for e in estimates if is_median(e.statistic) and not e.derived_from])


def _moderate(
    variances: Mapping[int, tuple[float, int]], groups: Mapping[int, tuple[str, str]]
) -> dict[int, tuple[float, int, int]]:
    """Each residual variance shrunk toward its group's (same source and statistic), in the
    empirical-Bayes way the paired gate uses (:mod:`perfgate.core.decision._moderated`): (s̃², df, df lent).
    A metric whose own variance is improbably large for its group (a benchmark that is bimodal
    between processes among quiet ones) keeps its own."""
    out: dict[int, tuple[float, int, int]] = {}
    by_group: dict[tuple[str, str], list[int]] = {}
    for i in variances:
        by_group.setdefault(groups[i], []).append(i)
    for members in by_group.values():
        prior = fit_prior([variances[i] for i in members])
        if prior is None:
            continue
        for i in members:
            s2, df = variances[i]
            lent = prior.df_for(df)
            if lent <= 0 or s2 <= 0 or _f_sf(s2 / prior.s0_sq, df, max(lent, 1)) < OUTLIER_LEVEL:
                continue
            out[i] = ((lent * prior.s0_sq + df * s2) / (lent + df), df + lent, lent)
    return out


def _relative(
    e: Estimate,
    d: float,
    variance: float,
    df: int | None,
    noise: str,
    shift: float,
    *,
    assumed: bool,
    process_sigma: float = 0.0,
    process_variance: float = 0.0,
    scaled: bool = False,
) -> Estimate:
    se = math.sqrt(max(variance, 0.0))
    p = t_sf(d / se, df) if se > 0 else (0.0 if d > 0 else 1.0)
    return e.evolve(
        log_worse=d,
        se=se,
        p_value=p,
        df=df,
        tail=None,
        noise=noise,
        noise_assumed=assumed,
        fixed_variance=max(variance - process_variance, 0.0),
        process_sigma=process_sigma,
        kernel=e.kernel if scaled else "",
        normalised_change=None,
        raw_change=e.cur_value / e.base_value - 1.0,
        index_change=None,
        relative_to=shift,
    )


def relative_to_run(
    estimates: Sequence[Estimate],
    policy: Policy,
    *,
    runs: tuple[int, int],
    clocks: Mapping[str, str] | None = None,
) -> tuple[list[Estimate], SharedPhase]:
    """The check's estimates with every timing estimate of a clock that has a control tested
    against the run's common shift (see the module); the others unchanged."""
    clocks = clocks or {}
    out = list(estimates)
    groups: dict[str, list[int]] = {}
    for i, e in enumerate(estimates):
        if _eligible(e):
            clock = clocks.get(e.cur.name, "cpu")
            groups.setdefault(f"{clock}{_IN_KERNELS}" if e.kernel else clock, []).append(i)
    controls: list[Control] = []
    notes: list[str] = []
    for clock, indices in groups.items():
        medians = [i for i in indices if is_median(estimates[i].statistic) and not estimates[i].derived_from]
        if len(medians) < MIN_CONTROL:
            if len(groups) == 1 or clock.startswith("cpu"):
                notes.append(
                    f"{len(medians)} comparable timing metric{'s' if len(medians) != 1 else ''} on the {clock}: "
                    f"fewer than the {MIN_CONTROL} a run needs to be its own control, so each is tested against "
                    "the run-to-run noise alone"
                )
            continue
        raw_track = _track(estimates, indices, medians, policy, runs, scaled=False)
        track = raw_track
        if clock.endswith(_IN_KERNELS):
            # in units of the kernels, and raw: each metric takes the one with the smaller variance
            # (a kernel that moved apart from the others makes its metrics' normalised test the
            # wider), chosen on the variances alone, before any outcome
            track = _track(estimates, indices, medians, policy, runs, scaled=True)
            for i in indices:
                if raw_track.tests[i][1] < track.tests[i][1]:
                    track.tests[i] = raw_track.tests[i]
        shift, shift_se, sources = track.shift, track.shift_se, track.sources
        for i in indices:
            d, var, own_df, noise, sigma, process_variance, source, shifted, scaled = track.tests[i]
            out[i] = _relative(
                estimates[i],
                d,
                var,
                own_df,
                noise,
                shifted,
                assumed=source == "none",
                process_sigma=sigma,
                process_variance=process_variance,
                scaled=scaled,
            )
        raw = track.values
        moved = frozenset(
            estimates[i].cur.name
            for i in medians
            if (value := raw[i]) is not None and abs(value - shift) <= math.log1p(estimates[i].threshold)
        )
        source = "none" if "none" in sources else min(sources, key=["history", "calibration", "processes"].index)
        controls.append(
            Control(
                clock=clock,
                shift=shift,
                shift_se=shift_se,
                members=frozenset(estimates[i].cur.name for i in medians),
                moved=moved,
                tested=frozenset(estimates[i].cur.name for i in indices),
                source=source,
                raw_shift=raw_track.shift if track is not raw_track else None,
            )
        )
        if source == "none":
            notes.append(SINGLE_PROCESS)
    return out, SharedPhase(controls=tuple(controls), notes=tuple(dict.fromkeys(notes)))


@dataclass(slots=True)
class _Track:
    """One way of taking a clock's metrics relative to their run (raw, or in units of kernels):
    per estimate (d, variance, df, noise, process σ, process variance, source, shift, scaled)."""

    tests: dict[int, tuple[float, float, int | None, str, float, float, str, float, bool]]
    values: dict[int, float | None]
    shift: float
    shift_se: float
    sources: set[str]


def _track(
    estimates: Sequence[Estimate],
    indices: Sequence[int],
    medians: Sequence[int],
    policy: Policy,
    runs: tuple[int, int],
    *,
    scaled: bool,
) -> _Track:
    """The clock's metrics relative to their run's shift, raw or in units of their kernels."""
    raw = {i: _raw_log_worse(estimates[i], scaled) for i in indices}
    history = (
        _history_residuals([estimates[i] for i in indices], runs[0], scaled) if runs[0] >= MIN_HISTORY_RUNS else {}
    )
    sources: set[str] = set()
    # the residual variance of each estimate, from its source: (source, s², df, processes a side)
    found: dict[int, tuple[str, float, int, tuple[int, int]]] = {}
    for i in indices:
        e = estimates[i]
        learned = (
            policy.noise.get(residual_key(e.cur.name, e.statistic, normalised=scaled))
            if not policy.noise_too_young
            else None
        )
        g_base, g_cur = len(e.base.groups or (0,)), len(e.cur.groups or (0,))
        if e.key in history:
            found[i] = ("history", history[e.key] ** 2, runs[0] - 1, (g_base, g_cur))
        elif learned is not None:
            found[i] = ("calibration", learned**2, max(policy.noise_runs - 1, 1), (g_base, g_cur))
        else:
            spread = (
                _spread(e, e.base if g_base > 1 else None, e.cur if g_cur > 1 else None, scaled)
                if runs == (1, 1) and max(g_base, g_cur) > 1
                else None
            )
            if spread is not None and spread.df >= 2:
                found[i] = ("processes", spread.sigma**2, spread.df, (g_base, g_cur))
    moderated = _moderate(
        {i: (f[1], f[2]) for i, f in found.items() if f[0] != "calibration"},
        {i: (found[i][0], estimates[i].statistic) for i in found},
    )
    # each estimate's own variance (its residual noise, the run's processes and its samples)
    own: dict[int, tuple[float, int | None, str, float, float]] = {}
    for i in indices:
        e = estimates[i]
        if i not in found:
            # one process a side, no history: the assumed per-process term gives the interval,
            # and the decision withholds any claim of this metric alone (SINGLE_PROCESS)
            factor = 1.5 if e.statistic == "p95" else 2.0 if e.statistic == "p99" else 1.0
            var = (policy.assumed_raw.process * factor) ** 2 * 2.0 + e.within_se**2
            own[i] = (var, 3, "no residual noise of its own: one process a side and no history", 0.0, 0.0)
            sources.add("none")
            continue
        source, s2, df, (g_base, g_cur) = found[i]
        s2, df, lent = moderated.get(i, (s2, df, 0))
        sources.add(source)
        borrowed = f", {lent} df borrowed from the run's other metrics" if lent else ""
        if source in ("history", "calibration"):
            tau = max(math.sqrt(s2), HISTORY_FLOOR)
            r_base = runs[0] if runs[0] > 1 else 1
            # a side measured in several processes whose spread exceeds the learned residual (a
            # neighbour that came and went during the run) is that much less certain
            sides = [
                max(tau**2, spread.sigma**2 / g) if g > 1 and (spread := _spread(e, None, m, scaled)) else tau**2
                for m, g in ((e.base, g_base if r_base == 1 else 1), (e.cur, g_cur))
            ]
            var = sides[0] / r_base + sides[1] / max(runs[1], 1) + e.within_se**2
            where = (
                f"the baseline's {runs[0]} runs{borrowed}"
                if source == "history"
                else f"{policy.noise_runs} runs of this machine"
            )
            own[i] = (var, df, f"residual σ {tau:.1%} after the run's shift (learned from {where})", 0.0, 0.0)
        else:
            sigma = math.sqrt(s2)
            process_variance = s2 * (1.0 / g_base + 1.0 / g_cur)
            var = max(process_variance, 2.0 * PROCESS_FLOOR**2)
            noise = (
                f"residual σ {sigma:.1%} per process after the run's shift "
                f"(the spread of {g_base} + {g_cur} processes{borrowed}, at least {PROCESS_FLOOR:.1%} a side)"
            )
            own[i] = (var, df, noise, sigma, process_variance)
    # in units of reference kernels, each kind's kernel may have moved apart from the others (a
    # memory kernel slowed by a neighbour the compute one did not see): a metric divided by it
    # is that much less certain relative to the run
    moves = (
        {i: math.log1p(c) for i in indices if (c := estimates[i].index_change) is not None and c > -1.0}
        if scaled
        else {}
    )
    centre_move = float(np.median([moves[i] for i in medians if i in moves] or [0.0]))
    for i, move in moves.items():
        var, own_df, noise, sigma, process_variance = own[i]
        apart = move - centre_move
        if abs(apart) >= 0.005:
            noise += f"; its {estimates[i].kernel} kernel moved {math.expm1(apart):+.1%} apart from the others"
        own[i] = (var + apart**2, own_df, noise, sigma, process_variance)
    shift, shift_se = _weighted_shift(
        [(v, own[i][0]) for i in medians if (v := raw[i]) is not None], weighted="none" not in sources
    )
    base_var = shift_se**2 + (SHIFT_SPREAD * shift) ** 2
    # a residual learned across runs already holds how the metric follows phases as large as
    # theirs: only a shift beyond LEARNED_SHIFT adds to it
    learned_var = shift_se**2 + (SHIFT_SPREAD * max(abs(shift) - LEARNED_SHIFT, 0.0)) ** 2
    from_history = {i for i in found if found[i][0] in ("history", "calibration")}
    extra = {i: learned_var if i in from_history else base_var for i in indices}

    # a run whose metrics scatter around its shift more than their noise says (those that moved
    # with it, within the threshold: not the ones that moved apart) met something its history
    # did not: a neighbour that slowed some stages more than others. Every variance of the
    # clock is widened by that much.
    scale = _dispersion(
        [
            (v - shift) ** 2 / (own[i][0] + extra[i])
            for i in medians
            if (v := raw[i]) is not None and i in found and abs(v - shift) <= math.log1p(estimates[i].threshold)
        ]
    )
    tests = {}
    for i in indices:
        value = raw[i]
        assert value is not None
        var, own_df, noise, sigma, process_variance = own[i]
        source = found[i][0] if i in found else "none"
        if scale > 1.0 and i in found:
            var *= scale
            noise += f"; ×{math.sqrt(scale):.1f}: the run's metrics scatter more than their noise says"
        tests[i] = (value - shift, var + extra[i], own_df, noise, sigma, process_variance, source, shift, scaled)
    return _Track(tests=tests, values=raw, shift=shift, shift_se=shift_se, sources=sources)


def _binomial_sf(m: int, n: int, p: float) -> float:
    """P(X ≥ m) for X ~ Binomial(n, p)."""
    if m <= 0:
        return 1.0
    if m > n:
        return 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    terms = [
        math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * log_p + (n - k) * log_q
        for k in range(m, n + 1)
    ]
    top = max(terms)
    return min(1.0, math.exp(top) * math.fsum(math.exp(t - top) for t in terms))


def breadth(moved: int, against: int, of: int, alpha: float) -> tuple[bool, float]:
    """Whether ``moved`` of ``of`` metrics without noise of their own moving the same way past the
    threshold (``against`` of them the other way) is more than per-process offsets explain, and its
    p-value: the larger of two tests. A per-process offset strikes at most :data:`BREADTH_RATE` of
    the benchmarks past the threshold one way (binomial), and it is as likely to make a benchmark
    slower as faster (a sign test on the ones that moved either way): a change of the code moves
    benchmarks one way while the others stay."""
    if of <= 0 or moved <= 0:
        return False, 1.0
    p = max(_binomial_sf(moved, of, BREADTH_RATE), _binomial_sf(moved, moved + against, 0.5))
    return moved >= BREADTH_MIN and p < alpha, p
