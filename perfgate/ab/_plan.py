"""The plan of a resident A/B check: what to measure on which trees, and when to look.

The options (:class:`ResidentOptions`) say what to run and how long the check may take. The
stages to compare come from the first pair's set-up replies (:func:`plan_check`): a stage both
revisions have is timed in blocks of ``calls`` calls, ``blocks`` per pair, fixed from the two
sides' typical call times and kept for the whole check; a stage only one side has is reported
new or missing from its typical time. The looks at the data (:func:`looks`) are fixed after
the second pair, from the time budget and the pairs' time only, before any look at the data.

The fit rule (:func:`pair_fits`): past the :data:`~perfgate.core.paired.MIN_PAIRS` pairs the
test needs, a pair is started only while the slowest pair seen so far (from its start to its
end: set-up, any wait for the CPU, and its blocks), not the mean, still fits in what is left of
the budget. The looks count the pairs that rule will let start.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfgate.core.metrics import Direction, MetricCatalogue, MetricInfo, default_suite
from perfgate.core.paired import MIN_PAIRS, SequentialLooks
from perfgate.core.policy import Policy
from perfgate.core.schema import GitInfo, Metric
from perfgate.core.units import TIME_UNITS
from perfgate.errors import PerfgateError

__all__ = [
    "DEFAULT_TIME_BUDGET",
    "MAX_TIME_BUDGET",
    "CheckPlan",
    "ResidentOptions",
    "Side",
    "StagePlan",
    "focus_stages",
    "grace_seconds",
    "looks",
    "pair_fits",
    "plan_check",
    "setup_request",
    "statistics",
]

DEFAULT_TIME_BUDGET = 80.0  # seconds: a DQN or PPO check ends within 90 s here
MAX_TIME_BUDGET = 86_400.0  # one day: a budget past it is a typo (and inf a way to never stop)
GRACE_SECONDS = 10.0  # a check ends within its budget plus at least this much ...
GRACE_FRACTION = 0.25  # ... or this fraction of the budget, whichever is more
MAX_FOCUS = 4.0  # after a look, a stage still undecided gets at most this many times its planned blocks


@dataclass(frozen=True, slots=True, kw_only=True)
class Side:
    """One revision as the engine sees it: a label for messages, its tree and its environment."""

    role: str  # "baseline" or "current"
    label: str  # "baseline `main` (abc123def456)"
    path: Path
    env: Mapping[str, str]
    git: GitInfo = field(default_factory=GitInfo)


@dataclass(frozen=True, slots=True, kw_only=True)
class ResidentOptions:
    """What the engine measures and how long it may take.

    Attributes:
        model, suite, stages_modules: what to run (as ``perfgate bench``).
        seed: the random seed of the block order (recorded in the report; reproducible).
        setup_seed: the random seed every stage's set-up gets, the same on both sides.
        params: stage parameters (``quick``, ``threads``), the same on both sides.
        data: DBN file for the reference pipeline (None: the synthetic default).
        time_budget: seconds for the whole check; pairs are added only while the slowest pair
            seen still fits (:func:`pair_fits`), and the check ends within it plus
            ``grace_seconds(time_budget)`` (:mod:`perfgate.ab.resident`, "Deadlines").
        block_time: seconds of work per block and side.
        stage_time: seconds per stage and pair, both sides together (sets the block count).
        min_blocks, max_blocks: bounds on blocks per stage and pair.
        max_pairs: at most this many worker pairs.
        looks: looks at the data (α is spent over them).
        overlap: with two CPUs or more, the next pair sets up on another CPU while a pair measures.
        setup_floor, block_floor: native seconds a worker's start and set-up, or one block, may
            always take in a pass outside the check's pairs (the profiling pass of
            :mod:`perfgate.ab.explain`); the check's own exchanges end with its budget plus
            grace (:mod:`perfgate.ab.resident`, "Deadlines").
        deadline_scale: how many times slower than native this way of measuring runs the
            stages (1 here; about 20 for a mode that runs them under valgrind); it scales the floors.
        randomise_layout: give every worker a memory layout drawn at random (:mod:`perfgate.workers.layout`);
            off, every worker starts with hash seed 0 and no padding, and a layout-only change can
            read as a change of speed.
        focus: after a look that leaves some stages undecided, later pairs measure only those,
            with the time the decided stages took (:func:`focus_stages`); off, every pair
            measures every stage as planned.
    """

    model: str
    suite: str = field(default_factory=default_suite)
    stages_modules: tuple[str, ...] = ()
    seed: int = 0
    setup_seed: int = 0
    device: str = "cpu"
    params: Mapping[str, Any] = field(default_factory=dict)
    data: Path | None = None
    time_budget: float = DEFAULT_TIME_BUDGET
    block_time: float = 0.02
    stage_time: float = 1.2
    min_blocks: int = 8
    max_blocks: int = 40
    max_pairs: int = 20
    looks: int = 3
    overlap: bool = True
    setup_floor: float = 20.0
    block_floor: float = 5.0
    deadline_scale: float = 1.0
    metric_info: Mapping[str, MetricInfo] = field(default_factory=dict)
    randomise_layout: bool = True
    focus: bool = True

    def __post_init__(self) -> None:
        if not 0 < self.time_budget <= MAX_TIME_BUDGET:  # also refuses NaN
            raise ValueError(f"time_budget must be > 0 and <= {MAX_TIME_BUDGET:g} s, got {self.time_budget}")
        for name in ("setup_floor", "block_floor", "deadline_scale"):
            if not 0 < getattr(self, name) < math.inf:
                raise ValueError(f"{name} must be positive and finite, got {getattr(self, name)}")
        if not 1 <= self.min_blocks <= self.max_blocks:
            raise ValueError(f"need 1 <= min_blocks <= max_blocks, got {self.min_blocks}, {self.max_blocks}")
        if self.max_pairs < MIN_PAIRS:
            raise ValueError(f"max_pairs must be >= {MIN_PAIRS}, got {self.max_pairs}")


@dataclass(frozen=True, slots=True)
class StagePlan:
    """One stage's block plan: ``calls`` per block, ``blocks`` per pair."""

    name: str
    metric: str
    unit: str
    scale: float
    calls: int
    blocks: int
    throughput_metric: str | None
    items_per_call: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckPlan:
    """What every pair of a check measures, fixed from the first pair's set-up."""

    stages: tuple[StagePlan, ...]
    # stages only one side has (added or removed by the change): their typical time, to report new/missing
    one_side: tuple[dict[str, Metric], dict[str, Metric]]

    @property
    def config(self) -> dict[str, Any]:
        """The runs' ``config``: each stage's metric, calls per block and blocks per pair."""
        return {
            "stages": {
                p.name: {"metric": p.metric, "calls_per_block": p.calls, "blocks_per_pair": p.blocks}
                for p in self.stages
            }
        }

    def records(self) -> tuple[dict[str, Any], ...]:
        return tuple(dataclasses.asdict(p) for p in self.stages)


def plan_check(stages_a: list[dict[str, Any]], stages_b: list[dict[str, Any]], options: ResidentOptions) -> CheckPlan:
    """The plan from both sides' set-up replies (``stages``); an error when they have no stage in common."""
    stages = _stage_plans(stages_a, stages_b, options)
    if not stages:
        raise PerfgateError("the two revisions have no stage in common to compare")
    return CheckPlan(stages=tuple(stages), one_side=(_one_side(stages_a, stages_b), _one_side(stages_b, stages_a)))


def focus_stages(
    plan: CheckPlan, undecided: Collection[str], pace: Mapping[str, float], max_scale: float = MAX_FOCUS
) -> tuple[StagePlan, ...]:
    """The stages the pairs after a look measure: those with a metric still ``undecided``, given the decided ones' time.

    A stage is kept when its metric or its throughput is undecided; its blocks per pair are
    scaled by the planned time of every stage over that of the kept ones (``pace``: seconds per
    block and side, per stage), at most ``max_scale`` times, so that a pair takes about the time
    the looks were planned on. Calls per block stay as planned. When no stage or every stage
    is kept (only memory undecided, or nothing decided yet), the plan's stages, unchanged.

    A decided metric's verdict is final (:func:`~perfgate.core.paired.merge_looks`), so no
    later pair could change it; the time goes where it can. Both sides of a pair still run the
    same blocks in a drawn order, so a pair's log ratio stays symmetric about the true change
    whatever the look decided.
    """
    keep = [p for p in plan.stages if p.metric in undecided or (p.throughput_metric or "") in undecided]
    if not keep or len(keep) == len(plan.stages):
        return plan.stages

    def seconds(stages: Sequence[StagePlan]) -> float:
        return sum(2 * p.blocks * pace.get(p.name, 0.0) for p in stages)

    kept = seconds(keep)
    scale = min(max_scale, seconds(plan.stages) / kept) if kept > 0 else 1.0
    return tuple(dataclasses.replace(p, blocks=max(p.blocks, round(p.blocks * scale))) for p in keep)


def grace_seconds(time_budget: float) -> float:
    """Seconds past the time budget by which a check has ended: ``max(10 s, 25 % of the budget)``.

    A pair cut there is dropped, and a worker that has not answered by then counts as hung.
    """
    return max(GRACE_SECONDS, GRACE_FRACTION * time_budget)


def pair_fits(spans: Sequence[float], elapsed: float, budget: float) -> bool:
    """The fit rule: may a pair start ``elapsed`` s into a ``budget`` s check whose pairs took ``spans`` s each?

    Only when the slowest of them (each from its start to its end: set-up, any wait for the
    CPU, blocks) still fits in what is left: the mean would let a check whose pairs get slower
    start one that ends past the budget (a TFT check took 246 s of its 240 s that way).
    """
    return elapsed + max(spans, default=0.0) <= budget


def looks(
    policy: Policy,
    options: ResidentOptions,
    pairs: int,
    elapsed: float,
    pair_seconds: float,
    *,
    slowest: float,
    running: int = 0,
) -> SequentialLooks:
    """The stopping rule, fixed after ``pairs`` pairs from the budget and the pairs' time only.

    The pairs planned: those measured, the ``running`` ones already started, and those the fit
    rule will start, one every ``pair_seconds`` while the ``slowest`` pair still fits.
    """
    room = options.time_budget - elapsed - slowest
    more = 0 if room < 0 else 1 + int(room // max(pair_seconds, 1e-3))
    fit = pairs + running + more
    return SequentialLooks(policy.alpha, min(options.max_pairs, max(MIN_PAIRS, fit)), options.looks)


def setup_request(options: ResidentOptions) -> dict[str, Any]:
    return {
        "op": "setup",
        "suite": options.suite,
        "model": options.model,
        "stages_modules": list(options.stages_modules),
        "seed": options.setup_seed,
        "device": options.device,
        "data": str(options.data) if options.data else None,
        "params": dict(options.params),
        "progress": True,  # progress lines name the stage that hangs; a worker that predates them sends none
    }


def _one_side(stages: list[dict[str, Any]], other: list[dict[str, Any]]) -> dict[str, Metric]:
    there = {(s["name"], s["metric"]) for s in other}
    return {
        s["metric"]: Metric(
            name=s["metric"],
            unit=s["unit"],
            direction=Direction.LOWER,
            samples=(float(s["typical_s"]) * TIME_UNITS[s["unit"]],),
        )
        for s in stages
        if (s["name"], s["metric"]) not in there
    }


def _stage_plans(
    stages_a: list[dict[str, Any]], stages_b: list[dict[str, Any]], options: ResidentOptions
) -> list[StagePlan]:
    b_by_name = {s["name"]: s for s in stages_b}
    plans = []
    for s in stages_a:
        other = b_by_name.get(s["name"])
        if other is None or other["metric"] != s["metric"]:
            continue  # on one side only: reported new or missing (_one_side)
        typical = max(1e-9, math.sqrt(float(s["typical_s"]) * float(other["typical_s"])))
        calls = max(1, min(200_000, round(options.block_time / typical)))
        blocks = round(options.stage_time / (2 * calls * typical))
        plans.append(
            StagePlan(
                name=s["name"],
                metric=s["metric"],
                unit=s["unit"],
                scale=TIME_UNITS[s["unit"]],
                calls=calls,
                blocks=max(options.min_blocks, min(options.max_blocks, blocks)),
                throughput_metric=s.get("throughput_metric"),
                items_per_call=s.get("items_per_call"),
            )
        )
    return plans


def statistics(metric: str, options: ResidentOptions) -> tuple[str, ...]:
    info = MetricCatalogue.over(options.metric_info).get(metric)
    return info.statistics if info else ("median",)
