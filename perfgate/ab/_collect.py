"""Collect: a resident A/B check's pairs turned into samples, runs and the paired decision.

Each pair's blocks become both sides' samples (thinned to :data:`_KEEP` per side and pair for
the report; the test uses every sample through the log ratios) and one log ratio per metric
and statistic, estimated block by block (:func:`perfgate.core.paired.block_log_ratio`,
:func:`~perfgate.core.paired.tail_log_ratio`). At a look the runs so far are decided
(:func:`decide_now`); at the end the looks' verdicts are merged into the check's result
(:func:`collect`), with the time budget more pairs would take for what is still undecided, and
how long the check took against its budget and grace.
"""

from __future__ import annotations

import dataclasses
import math
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
from scipy import special

from perfgate.ab._plan import CheckPlan, ResidentOptions, Side, StagePlan, grace_seconds, statistics
from perfgate.core.codec import format_timestamp
from perfgate.core.compare import CheckResult
from perfgate.core.metrics import Direction, metric_info
from perfgate.core.paired import SequentialLooks, block_log_ratio, decide_look, tail_log_ratio
from perfgate.core.policy import Policy
from perfgate.core.result import Verdict
from perfgate.core.schema import Machine, Metric, Run
from perfgate.core.stats import QUANTILES
from perfgate.errors import PerfgateError

__all__ = ["Measured", "ResidentOutcome", "Samples", "collect", "decide_now", "fault_hints", "runs", "with_budgets"]

_KEEP = 20_000  # samples per side and pair kept in the runs for the report (the test uses all)
# what a worker reports of a block (perfgate.workers.resident, "rusage"), and its name in the JSON report
USAGE_KEYS = ("minflt", "majflt", "nivcsw")
_USAGE_NAMES = {"minflt": "minor_faults", "majflt": "major_faults", "nivcsw": "involuntary_switches"}
# a changed stage's minor page faults a call are worth a hint when one side has at least this many a call
# and the pairs say the two differ by this factor or more (fault_hints: a hint of why, never the verdict)
FAULTS_FLOOR = 1.0
FAULTS_FACTOR = 1.25
FAULTS_MIN_PAIRS = 3  # pairs that measured the stage, for a test across pairs (fault_hints)
FAULTS_ALPHA = 0.01


@dataclass(slots=True)
class Samples:
    """Everything measured so far: per metric, per pair, both sides' kept samples and the log ratios."""

    kept: dict[str, list[tuple[list[float], list[float]]]] = field(default_factory=dict)
    ratios: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    units: dict[str, tuple[str, Direction]] = field(default_factory=dict)
    derived: dict[str, str] = field(default_factory=dict)
    orders: list[tuple[str, ...]] = field(default_factory=list)  # per pair: the side that went first per block

    def add(self, metric: str, unit: str, direction: Direction, a: list[float], b: list[float]) -> None:
        self.units.setdefault(metric, (unit, direction))
        self.kept.setdefault(metric, []).append((_thin(a), _thin(b)))

    def ratio(self, metric: str, statistic: str, value: float) -> None:
        self.ratios.setdefault((metric, statistic), []).append(value)

    def add_blocks(
        self,
        stages: tuple[StagePlan, ...],
        timings: Mapping[str, Mapping[str, list[list[float]]]],
        options: ResidentOptions,
    ) -> None:
        """One pair's blocks (per stage and side ``"A"``/``"B"``, each block's samples): samples and log ratios.

        A stage of ``stages`` the pair did not measure (dropped after a look decided it) gets no
        samples and a NaN log ratio, so that every metric's ratios stay one per pair; the test
        across pairs leaves NaN out.
        """
        for p in stages:
            if p.name not in timings:
                self.add(p.metric, p.unit, Direction.LOWER, [], [])
                for stat in statistics(p.metric, options):
                    self.ratio(p.metric, stat, math.nan)
                if p.throughput_metric and p.items_per_call:
                    self.add(p.throughput_metric, "samples/s", Direction.HIGHER, [], [])
                    self.ratio(p.throughput_metric, "median", math.nan)
                continue
            a, b = timings[p.name]["A"], timings[p.name]["B"]
            flat_a, flat_b = [x for blk in a for x in blk], [x for blk in b for x in blk]
            self.add(p.metric, p.unit, Direction.LOWER, flat_a, flat_b)
            middle = block_log_ratio(a, b)
            for stat in statistics(p.metric, options):
                q = QUANTILES.get(stat, 0.5)
                self.ratio(p.metric, stat, middle if q == 0.5 else tail_log_ratio(a, b, q))
            if p.throughput_metric and p.items_per_call:
                rate_a = [p.items_per_call * p.scale / x for x in flat_a if x > 0]
                rate_b = [p.items_per_call * p.scale / x for x in flat_b if x > 0]
                self.add(p.throughput_metric, "samples/s", Direction.HIGHER, rate_a, rate_b)
                self.ratio(p.throughput_metric, "median", -middle)  # items / time: the same ratio, inverted
                self.derived[p.throughput_metric] = p.metric

    def add_memory(self, memory_a: Mapping[str, float], memory_b: Mapping[str, float]) -> None:
        """One pair's memory, measured once per worker: a single sample per side, and its log ratio."""
        for name in memory_a.keys() & memory_b.keys():
            a, b = float(memory_a[name]), float(memory_b[name])
            self.add(name, "MB", Direction.LOWER, [a], [b])
            if a > 0 and b > 0:
                self.ratio(name, "median", math.log(b / a))


@dataclass(slots=True, kw_only=True)
class Measured:
    """What a check's schedule gave, filled in pair by pair."""

    samples: Samples
    machine: dict[str, Any]
    software: dict[str, str]
    cpus: tuple[int, ...]
    plan: CheckPlan | None = None  # made from the first pair's set-up
    rule: SequentialLooks | None = None  # fixed after the second pair
    stopped: str = "maximum pairs"
    pinned: bool = True
    pair_seconds: float = 0.0
    setup_seconds: list[float] = field(default_factory=list)
    measure_seconds: list[float] = field(default_factory=list)
    # per pair measured: from its workers' start to their end (set-up, any wait for the CPU, blocks)
    pair_spans: list[float] = field(default_factory=list)
    pairs_cut: int = 0  # pairs started and cut at the budget plus grace: their blocks dropped
    # per worker, in start order: pair, side, whether it started first, its layout draw
    layouts: list[dict[str, Any]] = field(default_factory=list)
    # per pair measured: the stages it measured and their blocks (fewer stages after a look focused it)
    pair_blocks: list[dict[str, int]] = field(default_factory=list)
    # per pair kept, stage and side ("A", "B"): calls timed and, where the workers report them, their page
    # faults and involuntary context switches during those calls (USAGE_KEYS)
    pair_usage: list[dict[str, dict[str, dict[str, int]]]] = field(default_factory=list)

    def add_usage(self, usage: Mapping[str, Mapping[str, Mapping[str, int]]]) -> None:
        """Add one kept pair's calls and usage, per stage and side."""
        self.pair_usage.append({stage: {side: dict(c) for side, c in sides.items()} for stage, sides in usage.items()})


@dataclass(frozen=True, slots=True, kw_only=True)
class ResidentOutcome:
    """What the engine measured and decided."""

    result: CheckResult
    baseline: Run
    current: Run
    pairs: int
    looks: tuple[int, ...]  # pair counts at which the check looked
    schedule: tuple[int, ...]  # the looks it had planned
    stopped: str  # "decided", "time budget", "maximum pairs"
    pinned: bool
    cpus: tuple[int, ...]
    seed: int
    seconds: float
    pair_seconds: float
    plan: tuple[dict[str, Any], ...]
    setup_seconds: tuple[float, ...]  # per pair: waiting for both workers' start and set-up
    measure_seconds: tuple[float, ...]  # per pair: the blocks
    orders: tuple[tuple[str, ...], ...]  # per pair, the side that went first in each block, in order
    log_ratios: Mapping[tuple[str, str], tuple[float, ...]] = field(default_factory=dict)  # per pair
    derived: Mapping[str, str] = field(default_factory=dict)  # derived metric -> the metric it comes from
    # per worker, in start order: pair, side, whether it started first, its layout draw (perfgate.workers.layout)
    layouts: tuple[dict[str, Any], ...] = ()
    time_budget: float = 0.0  # the check's --time-budget, s
    grace: float = 0.0  # the check ends within time_budget + grace (perfgate.ab.resident, "Deadlines")
    slowest_pair_seconds: float = 0.0  # the slowest pair from its start to its end: the fit rule's
    pairs_cut: int = 0  # pairs started and cut at the budget plus grace, their blocks dropped
    pair_blocks: tuple[dict[str, int], ...] = ()  # per pair: the stages it measured and their blocks
    # per pair kept, stage and side ("A" baseline, "B" current): calls timed and the workers' usage over them
    pair_usage: tuple[Mapping[str, Mapping[str, Mapping[str, int]]], ...] = ()

    @property
    def usage(self) -> dict[str, dict[str, Counter[str]]]:
        """Per stage and side: the calls and usage of every pair kept, summed."""
        out: dict[str, dict[str, Counter[str]]] = {}
        for pair in self.pair_usage:
            for stage, sides in pair.items():
                for side, counts in sides.items():
                    out.setdefault(stage, {"A": Counter(), "B": Counter()})[side].update(counts)
        return out

    def usage_per_call(self) -> dict[str, dict[str, dict[str, float]]]:
        """Per stage and role (``baseline``, ``current``): page faults and involuntary switches a timed call,
        for the stages whose workers reported them (a revision from before the report gives none)."""
        out: dict[str, dict[str, dict[str, float]]] = {}
        for stage, sides in self.usage.items():
            if all(sides[s].get("calls") and any(k in sides[s] for k in USAGE_KEYS) for s in "AB"):
                out[stage] = {
                    role: {_USAGE_NAMES[k]: sides[s].get(k, 0) / sides[s]["calls"] for k in USAGE_KEYS}
                    for s, role in (("A", "baseline"), ("B", "current"))
                }
        return out

    def faults_per_pair(self) -> dict[str, list[list[float] | None]]:
        """Per stage, each pair's minor faults a timed call, ``[baseline, current]``; None where the pair did
        not measure the stage or a side did not report them (no stage at all when no pair reported them)."""
        out: dict[str, list[list[float] | None]] = {}
        for stage in {stage: None for pair in self.pair_usage for stage in pair}:
            per_pair = [_faults_a_call(pair[stage]) if stage in pair else None for pair in self.pair_usage]
            if any(x is not None for x in per_pair):
                out[stage] = [None if x is None else [round(x[0], 3), round(x[1], 3)] for x in per_pair]
        return out

    @property
    def focused_from(self) -> int | None:
        """The first pair (from 1) that measured fewer stages than the first, after a look; None if none did."""
        first = self.pair_blocks[0] if self.pair_blocks else {}
        return next((i + 1 for i, blocks in enumerate(self.pair_blocks) if len(blocks) < len(first)), None)

    def describe(self) -> str:
        pin_text = (
            f"both workers of a pair pinned to one CPU (CPUs {', '.join(map(str, self.cpus))} in turn)"
            if self.pinned
            else "**not pinned to one CPU** (the OS refused sched_setaffinity): noisier blocks"
        )
        randomised = bool(self.layouts) and self.layouts[0]["heap_bytes"] > 0
        layout_text = (
            "every worker with a memory layout drawn at random"
            if randomised
            else "**memory layout not randomised** (--no-randomise-layout): a layout-only change can read as one"
        )
        cut = ", a pair cut at the budget plus grace and dropped" if self.pairs_cut == 1 else ""
        cut = f", {self.pairs_cut} pairs cut at the budget plus grace and dropped" if self.pairs_cut > 1 else cut
        focus = ""
        if self.focused_from is not None:
            focus = (
                f"; from pair {self.focused_from}, after a look, only the stages still undecided, "
                "with the time of those decided"
            )
        return (
            f"interleaved A/B in resident workers: {self.pairs} fresh worker pairs, each alternating short blocks "
            f"of every stage in random order (seed {self.seed}){focus}; {pin_text}; {layout_text}; looked after "
            f"{', '.join(map(str, self.looks))} pairs and stopped: {self.stopped} ({self.seconds:.0f} s of its "
            f"{self.time_budget:g} s time budget, {self.grace:.0f} s grace{cut})"
        )


def _thin(values: list[float]) -> list[float]:
    if len(values) <= _KEEP:
        return values
    idx = np.linspace(0, len(values) - 1, _KEEP).round().astype(int)
    return [values[i] for i in idx]


def runs(measured: Measured, plan: CheckPlan, sides: tuple[Side, Side], options: ResidentOptions) -> tuple[Run, Run]:
    """Both sides' runs from what the pairs measured so far: group i of every metric is pair i."""
    data, config = measured.samples, plan.config
    machine = measured.machine
    created = format_timestamp(datetime.now(UTC))
    out = []
    for k, side in enumerate(sides):
        metrics = {}
        for name, per_pair in data.kept.items():
            unit, direction = data.units[name]
            parts = [pp[k] for pp in per_pair if pp[k]]
            info = metric_info(name)
            metrics[name] = Metric(
                name=name,
                unit=info.unit if info else unit,
                direction=info.direction if info else direction,
                samples=tuple(x for part in parts for x in part),
                groups=tuple(len(part) for part in parts),
            )
        metrics.update(plan.one_side[k])
        out.append(
            Run(
                run_id=uuid.uuid4().hex,
                suite=options.suite,
                model=options.model,
                created_at=created,
                git=side.git,
                machine=Machine.of(machine),
                config={**config, "ab": {"role": side.role, "label": side.label}},
                metrics=metrics,
                software=measured.software,
            )
        )
    return out[0], out[1]


def with_budgets(
    result: CheckResult, seconds: float, pairs: int, pair_seconds: float, margin: float = 0.0
) -> CheckResult:
    """Say, for each comparison more pairs would decide, the time budget those pairs would take.

    ``margin``: what the slowest pair adds over a typical one, since a pair starts only while the
    slowest fits (:func:`~perfgate.ab._plan.pair_fits`).
    """
    fixed = max(0.0, seconds - pairs * pair_seconds)  # the first pair's start, not overlapped
    comparisons = tuple(
        dataclasses.replace(c, required_seconds=fixed + c.required_n * pair_seconds + margin)
        if c.required_unit == "pairs" and c.required_n is not None
        else c
        for c in result.comparisons
    )
    return dataclasses.replace(result, comparisons=comparisons)


def decide_now(
    measured: Measured, sides: tuple[Side, Side], options: ResidentOptions, policy: Policy, alpha: float
) -> CheckResult:
    """The paired decision on the pairs measured so far, at level ``alpha`` (one look of the stopping rule)."""
    assert measured.plan is not None  # a look comes after the first pair's set-up
    baseline, current = runs(measured, measured.plan, sides, options)
    return decide_look(
        baseline, current, measured.samples.ratios, policy, alpha=alpha, derived=measured.samples.derived
    )


def collect(
    measured: Measured,
    sides: tuple[Side, Side],
    options: ResidentOptions,
    started: float,
    *,
    now: Callable[[], float] = time.monotonic,
) -> ResidentOutcome:
    """The check's outcome: its runs, the looks' merged verdicts and how the pairs were measured.

    ``started`` is the check's start on the clock ``now`` (``time.monotonic`` unless a test fakes it).
    """
    rule, plan, data = measured.rule, measured.plan, measured.samples
    if rule is None or not rule.results or plan is None:
        raise PerfgateError("the check ended before its first look")  # max_pairs >= MIN_PAIRS makes this unreachable
    baseline, current = runs(measured, plan, sides, options)
    seconds = now() - started
    spans = measured.pair_spans
    slowest = max(spans, default=0.0)
    margin = slowest - sum(spans) / len(spans) if spans else 0.0
    merged = with_budgets(rule.merged(), seconds, len(data.orders), measured.pair_seconds, margin)
    outcome = ResidentOutcome(
        result=merged,
        baseline=baseline,
        current=current,
        pairs=len(data.orders),
        looks=tuple(rule.looked),
        schedule=rule.schedule,
        stopped=measured.stopped,
        pinned=measured.pinned,
        cpus=measured.cpus,
        seed=options.seed,
        seconds=seconds,
        pair_seconds=measured.pair_seconds,
        plan=plan.records(),
        setup_seconds=tuple(measured.setup_seconds),
        measure_seconds=tuple(measured.measure_seconds),
        orders=tuple(data.orders),
        log_ratios={k: tuple(v) for k, v in data.ratios.items()},
        derived=dict(data.derived),
        # not a pair started but never measured
        layouts=tuple(x for x in measured.layouts if x["pair"] < len(data.orders)),
        time_budget=options.time_budget,
        grace=grace_seconds(options.time_budget),
        slowest_pair_seconds=slowest,
        pairs_cut=measured.pairs_cut,
        pair_blocks=tuple(measured.pair_blocks),
        pair_usage=tuple(measured.pair_usage),
    )
    hints = merged.hints + fault_hints(merged, plan.stages, outcome.pair_usage)
    return dataclasses.replace(
        outcome,
        result=dataclasses.replace(
            merged, baseline=baseline, current=current, baseline_source=outcome.describe(), hints=hints
        ),
    )


def fault_hints(
    result: CheckResult,
    stages: tuple[StagePlan, ...],
    pair_usage: Sequence[Mapping[str, Mapping[str, Mapping[str, int]]]],
) -> tuple[str, ...]:
    """A hint for each stage the check found changed (regressed, improved, or past its threshold undecided)
    whose minor page faults a call differ between the sides pair after pair: fresh memory mapped in by
    every call is a usual cause of a slower one. It hints at why, never decides what: the verdict is
    the times'.

    Processes of the same code can differ severalfold in a long stage's faults (in an A/A check of
    the TFT, one side's training steps took 1,300 minor faults a call over the check's 11 pairs and
    the other side's 7,000), so the sides' totals are not compared. Each pair that measured the
    stage gives the log ratio of its sides' faults a call (plus one, so that none is not infinitely
    fewer); the hint needs :data:`FAULTS_MIN_PAIRS` of them, their geometric mean beyond
    :data:`FAULTS_FACTOR` either way, a two-sided t test across them below :data:`FAULTS_ALPHA`,
    and one side with :data:`FAULTS_FLOOR` faults a call or more."""
    of_metric = {m: p.name for p in stages for m in (p.metric, p.throughput_metric) if m}
    changed: list[str] = []
    for c in result.comparisons:
        past = c.worse is not None and c.worse >= result.policy.threshold_for(c.metric)
        stage = of_metric.get(c.derived_from or c.metric)
        moved = c.verdict in (Verdict.REGRESSED, Verdict.IMPROVED) or (c.verdict is Verdict.INCONCLUSIVE and past)
        if stage is not None and moved and stage not in changed:
            changed.append(stage)
    hints = []
    for stage in changed:
        per_pair = [_faults_a_call(pair[stage]) for pair in pair_usage if stage in pair]
        kept = [ab for ab in per_pair if ab is not None]
        if len(kept) < FAULTS_MIN_PAIRS:
            continue
        a, b = (float(np.mean(side)) for side in zip(*kept, strict=True))
        logs = np.array([math.log((y + 1.0) / (x + 1.0)) for x, y in kept])
        mean, sd = float(logs.mean()), float(logs.std(ddof=1))
        t = math.inf if sd == 0.0 else abs(mean) / (sd / math.sqrt(len(logs)))
        p = 0.0 if math.isinf(t) else float(2.0 * special.stdtr(len(logs) - 1, -t))
        if max(a, b) < FAULTS_FLOOR or abs(mean) < math.log(FAULTS_FACTOR) or p >= FAULTS_ALPHA:
            continue
        hints.append(
            f"stage {stage!r}: {_count(b)} minor page faults a timed call in the current revision against "
            f"{_count(a)} in the baseline, {'more' if mean > 0 else 'fewer'} across its {len(kept)} pairs "
            f"({math.exp(mean):.2g}× on the pairs' geometric mean, one added to each side): pages of fresh "
            "memory mapped in during each call (a large buffer freed and made again faults its pages every "
            "time), a usual cause of a change in time"
        )
    return tuple(hints)


def _faults_a_call(sides: Mapping[str, Mapping[str, int]]) -> tuple[float, float] | None:
    """One pair's minor faults a timed call of a stage, baseline and current; None where a side did not report."""
    counts = [sides.get(s, {}) for s in "AB"]
    if not all(c.get("calls") and "minflt" in c for c in counts):
        return None
    a, b = (c["minflt"] / c["calls"] for c in counts)
    return a, b


def _count(x: float) -> str:
    return f"{x:,.0f}" if x >= 10 else f"{x:.2g}"
