"""The resident-worker engine of ``perfgate ab``: both revisions interleaved in short blocks, pair by pair.

Pair after pair, until every gated metric is decided or the time budget is spent:

1. a fresh worker process is started for each revision (``python -m perfgate.ab.worker``
   in that revision's own tree, so it imports that revision's code) and runs every stage's
   set-up, with the same seed on both sides; while one pair measures, the next one starts
   and sets up on another CPU, and on every CPU once the measuring pair has ended (a set-up
   never shares a CPU with blocks); which side starts first is drawn per pair, and every
   worker gets a memory layout drawn at random before anything is imported
   (:mod:`perfgate.ab.layout`: a fresh interpreter's layout is otherwise fixed by the
   source text, and a comment can move a stage's speed by 8 %);
2. both workers are pinned to one CPU (``os.sched_setaffinity``; the CPU changes from pair to
   pair) and alternate **blocks**: ``k`` timed calls of one stage, about
   :attr:`ResidentOptions.block_time` of work, on one side and then on the other, the side
   that goes first drawn per block from a generator seeded by ``(seed, pair)``
   (:func:`block_orders`), stage after stage in rounds, so a slow phase of the machine hits
   every stage and both sides alike;
3. the pair's log ratio of every metric is estimated from its blocks, the workers end, and at
   the looks fixed by the budget the check decides (:mod:`perfgate.core.paired`).

Every worker is a fresh interpreter. Workers forked from one template process per revision
start faster, but they inherit the template's memory layout, so every pair of a check shares
one layout offset between the sides, which the test across pairs cannot see: measured on a
pure-Python stage, that design raised false alarms in A/A checks (``benchmarks/ab.py``).
Block sizes and counts are fixed from the first pair's set-up and kept for the whole check.

Deadlines: a hung stage ends the check within its time budget plus a grace,
:func:`grace_seconds` (``max(10 s, 25 % of the budget)``). Every exchange with a worker (its
start, its set-up, a block) must be answered by ``max(start + budget, now + floor) + grace``,
where ``start`` is the check's start and the floor (:attr:`ResidentOptions.setup_floor`,
:attr:`ResidentOptions.block_floor`), times :attr:`ResidentOptions.deadline_scale` for ways of
measuring slower than native, is what every set-up or block may take even when the budget is
spent or smaller: the pairs the test needs at least are measured past the budget, and a first
set-up on a slow machine may need more than a small budget. A worker that misses its deadline
is killed with every other worker, and the check ends with one line naming the stage, what it
was doing (its set-up, its first calls, a block) and the side.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import math
import os
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from perfgate.ab.layout import Layout, draw, start_order, worker_args
from perfgate.ab.workers import Channel, WorkerHung, Workers, allow, pin
from perfgate.core.codec import format_timestamp
from perfgate.core.compare import CheckResult
from perfgate.core.metrics import BUILTIN_METRICS, Direction, MetricInfo
from perfgate.core.paired import (
    MIN_PAIRS,
    SequentialLooks,
    block_log_ratio,
    decide_look,
    tail_log_ratio,
)
from perfgate.core.policy import Policy
from perfgate.core.schema import GitInfo, Machine, Metric, Run
from perfgate.core.stats import QUANTILES
from perfgate.core.units import TIME_UNITS
from perfgate.errors import PerfgateError

__all__ = [
    "DEFAULT_TIME_BUDGET",
    "MAX_TIME_BUDGET",
    "ProtocolMissing",
    "ResidentOptions",
    "ResidentOutcome",
    "Side",
    "block_orders",
    "block_seconds",
    "grace_seconds",
    "measure_resident",
]

DEFAULT_TIME_BUDGET = 80.0  # seconds: a DQN or PPO check ends within 90 s here
MAX_TIME_BUDGET = 86_400.0  # one day: a budget past it is a typo (and inf a way to never stop)
GRACE_SECONDS = 10.0  # at least this much past the budget before a worker counts as hung
GRACE_FRACTION = 0.25  # ... and at least this fraction of the budget
_KEEP = 20_000  # samples per side and pair kept in the runs for the report (the test uses all)

ProgressFn = Callable[[str], None]


class ProtocolMissing(PerfgateError):
    """The revision's perfgate has no resident worker (it predates the protocol)."""


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
        time_budget: seconds for the whole check; pairs are added only while they fit.
        block_time: seconds of work per block and side.
        stage_time: seconds per stage and pair, both sides together (sets the block count).
        min_blocks, max_blocks: bounds on blocks per stage and pair.
        max_pairs: at most this many worker pairs.
        looks: looks at the data (α is spent over them).
        overlap: with two CPUs or more, the next pair sets up on another CPU while a pair measures.
        setup_floor, block_floor: native seconds a worker's start and set-up, or one block, may
            always take, even when the budget is spent (see the module docstring, "Deadlines").
        deadline_scale: how many times slower than native this way of measuring runs the
            stages (1 here; about 20 for a mode that runs them under valgrind); it scales the floors.
        randomise_layout: give every worker a memory layout drawn at random (:mod:`perfgate.ab.layout`);
            off, every worker starts with hash seed 0 and no padding, and a layout-only change can
            read as a change of speed.
    """

    model: str
    suite: str = "pipeline"
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
class _Plan:
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
    # per worker, in start order: pair, side, whether it started first, its layout draw (perfgate.ab.layout)
    layouts: tuple[dict[str, Any], ...] = ()

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
        return (
            f"interleaved A/B in resident workers: {self.pairs} fresh worker pairs, each alternating short blocks "
            f"of every stage in random order (seed {self.seed}); {pin_text}; {layout_text}; looked after "
            f"{', '.join(map(str, self.looks))} pairs and stopped: {self.stopped} ({self.seconds:.0f} s)"
        )


def block_orders(seed: int, pair: int, n: int) -> tuple[str, ...]:
    """Which side goes first in each of a pair's ``n`` blocks: ``"A"`` or ``"B"``, reproducible from its seed."""
    rng = np.random.default_rng([seed, pair])
    return tuple("A" if x else "B" for x in rng.random(n) < 0.5)


def grace_seconds(time_budget: float) -> float:
    """Seconds past the time budget before a worker counts as hung: ``max(10 s, 25 % of the budget)``."""
    return max(GRACE_SECONDS, GRACE_FRACTION * time_budget)


@dataclass(frozen=True, slots=True)
class _Clock:
    """The check's deadlines (module docstring, "Deadlines"); times are ``time.monotonic()``."""

    started: float
    options: ResidentOptions

    @property
    def grace(self) -> float:
        return grace_seconds(self.options.time_budget)

    def deadline(self, floor: float) -> float:
        """When an exchange that starts now and may always take ``floor`` native seconds must be answered."""
        budget_end = self.started + self.options.time_budget
        return max(budget_end, time.monotonic() + floor * self.options.deadline_scale) + self.grace

    def left(self, deadline: float) -> float:
        return max(0.1, deadline - time.monotonic())  # 0.1: a reply already in the pipe is still read

    def within(self, deadline: float, floor: float, what: str) -> str:
        """Words for ``deadline``: "within 30 s of the check's start (the --time-budget 20 s plus 10 s grace)"."""
        budget, grace = self.options.time_budget, self.grace
        if deadline - grace <= self.started + budget + 1.0:  # 1 s: the budget set it, give or take the start
            return (
                f"within {deadline - self.started:.0f} s of the check's start "
                f"(the --time-budget {budget:g} s plus {grace:.0f} s grace)"
            )
        scale = self.options.deadline_scale
        times = f" × {scale:g} for this way of measuring" if scale != 1 else ""
        return (
            f"within {floor * scale + grace:.0f} s (the {floor:g} s{times} {what} may take, plus {grace:.0f} s grace)"
        )


_HUNG_HINT = "it hangs, or, if it is only slow, give a larger --time-budget"


def _tail(ch: Channel) -> str:
    """``": "`` and the worker's last stderr line, if it wrote one."""
    tail = ch.stderr_tail()
    return "" if tail == "no output" else f": {tail}"


def _greet(ch: Channel, side: Side, clock: _Clock, deadline: float) -> None:
    """Read a fresh worker's greeting; ProtocolMissing when its perfgate has no resident worker."""
    from perfgate.ab.worker import PROTOCOL, PROTOCOL_VERSION

    try:
        hello = ch.receive(clock.left(deadline))
    except WorkerHung:
        within = clock.within(deadline, clock.options.setup_floor, "every set-up")
        raise PerfgateError(f"the {side.label} did not start {within}: {ch.stderr_tail()}") from None
    except PerfgateError as exc:
        if "No module named perfgate.ab.worker" in str(exc) or "No module named 'perfgate.ab" in str(exc):
            raise ProtocolMissing(f"the {side.label} has no resident worker") from None
        raise PerfgateError(f"the {side.label} does not start: {ch.stderr_tail()}") from None
    if hello.get("protocol") != PROTOCOL or hello.get("version") != PROTOCOL_VERSION:
        ch.kill()
        raise ProtocolMissing(f"the {side.label} speaks worker protocol {hello.get('version')!r}")


def _setup_request(options: ResidentOptions) -> dict[str, Any]:
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


def _plan(stages_a: list[dict[str, Any]], stages_b: list[dict[str, Any]], options: ResidentOptions) -> list[_Plan]:
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
            _Plan(
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


@dataclass(slots=True)
class _Data:
    """Everything measured so far: per metric, per pair, both sides' kept samples and the log ratios."""

    kept: dict[str, list[tuple[list[float], list[float]]]] = field(default_factory=dict)
    ratios: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    units: dict[str, tuple[str, Direction]] = field(default_factory=dict)
    derived: dict[str, str] = field(default_factory=dict)
    orders: list[tuple[str, ...]] = field(default_factory=list)
    # stages only one side has (added or removed by the change): their typical time, to report new/missing
    one_side: tuple[dict[str, Metric], dict[str, Metric]] = field(default_factory=lambda: ({}, {}))
    machine: dict[str, Any] = field(default_factory=dict)
    software: dict[str, str] = field(default_factory=dict)

    def add(self, metric: str, unit: str, direction: Direction, a: list[float], b: list[float]) -> None:
        self.units.setdefault(metric, (unit, direction))
        self.kept.setdefault(metric, []).append((_thin(a), _thin(b)))

    def ratio(self, metric: str, statistic: str, value: float) -> None:
        self.ratios.setdefault((metric, statistic), []).append(value)


def _thin(values: list[float]) -> list[float]:
    if len(values) <= _KEEP:
        return values
    idx = np.linspace(0, len(values) - 1, _KEEP).round().astype(int)
    return [values[i] for i in idx]


def _statistics(metric: str, options: ResidentOptions) -> tuple[str, ...]:
    info = options.metric_info.get(metric) or BUILTIN_METRICS.get(metric)
    return info.statistics if info else ("median",)


def _finish_setup(ch: Channel, clock: _Clock, deadline: float) -> dict[str, Any]:
    """A worker's set-up reply, read past its progress lines; a missed deadline names the stage it hung in."""
    step, stage = "", None
    while True:
        try:
            reply = ch.receive(clock.left(deadline))
        except WorkerHung:
            within = clock.within(deadline, clock.options.setup_floor, "every set-up")
            if stage is None:  # a worker that predates the progress lines: the stage is not known
                what = "did not finish its stages' set-up"
            elif step == "calls":
                what = f"stage {stage!r} did not return from its first calls (its warm-up)"
            else:
                what = f"stage {stage!r} did not finish its set-up"
            raise PerfgateError(f"{what} {within}, on the {ch.label}; {_HUNG_HINT}{_tail(ch)}") from None
        if "progress" not in reply:
            return reply
        step, stage = str(reply["progress"]), str(reply.get("stage"))


def _measure_pair(
    pair: int, chans: dict[str, Channel], plans: list[_Plan], options: ResidentOptions, data: _Data, clock: _Clock
) -> None:
    """Alternate blocks of every stage between the two workers of one pair and record the pair's ratios."""
    total = sum(p.blocks for p in plans)
    orders = block_orders(options.seed, pair, total)
    data.orders.append(orders)
    timings: dict[str, dict[str, list[list[float]]]] = {p.name: {"A": [], "B": []} for p in plans}
    i = 0
    for r in range(max(p.blocks for p in plans)):
        for p in plans:
            if r >= p.blocks:
                continue
            first = orders[i]
            i += 1
            for side in (first, "B" if first == "A" else "A"):
                deadline = clock.deadline(options.block_floor)
                try:
                    request = {"op": "time", "stage": p.name, "calls": p.calls, "encoding": "f64"}
                    reply = chans[side].request(request, clock.left(deadline))
                except WorkerHung:
                    within = clock.within(deadline, options.block_floor, "every block")
                    raise PerfgateError(
                        f"stage {p.name!r} did not finish a block of {p.calls} calls {within}, on the "
                        f"{chans[side].label}; {_HUNG_HINT}{_tail(chans[side])}"
                    ) from None
                timings[p.name][side].append(block_seconds(reply, p.scale))
    for p in plans:
        a, b = timings[p.name]["A"], timings[p.name]["B"]
        flat_a, flat_b = [x for blk in a for x in blk], [x for blk in b for x in blk]
        data.add(p.metric, p.unit, Direction.LOWER, flat_a, flat_b)
        middle = block_log_ratio(a, b)
        for stat in _statistics(p.metric, options):
            q = QUANTILES.get(stat, 0.5)
            data.ratio(p.metric, stat, middle if q == 0.5 else tail_log_ratio(a, b, q))
        if p.throughput_metric and p.items_per_call:
            rate_a = [p.items_per_call * p.scale / x for x in flat_a if x > 0]
            rate_b = [p.items_per_call * p.scale / x for x in flat_b if x > 0]
            data.add(p.throughput_metric, "samples/s", Direction.HIGHER, rate_a, rate_b)
            data.ratio(p.throughput_metric, "median", -middle)  # items / time: the same ratio, inverted
            data.derived[p.throughput_metric] = p.metric


def block_seconds(reply: Mapping[str, Any], scale: float) -> list[float]:
    """A block's samples in the metric's unit: packed float64 from a worker that knows the encoding, else numbers."""
    packed = reply.get("seconds_f64")
    if packed is not None:
        values: list[float] = (np.frombuffer(base64.b64decode(packed), dtype=np.float64) * scale).tolist()
        return values
    return [float(x) * scale for x in reply["seconds"]]


def _add_memory(memory_a: Mapping[str, float], memory_b: Mapping[str, float], data: _Data) -> None:
    for name in memory_a.keys() & memory_b.keys():
        a, b = float(memory_a[name]), float(memory_b[name])
        data.add(name, "MB", Direction.LOWER, [a], [b])
        if a > 0 and b > 0:
            data.ratio(name, "median", math.log(b / a))


def _runs(data: _Data, sides: tuple[Side, Side], options: ResidentOptions, config: dict[str, Any]) -> tuple[Run, Run]:
    machine = data.machine
    created = format_timestamp(datetime.now(UTC))
    runs = []
    for k, side in enumerate(sides):
        metrics = {}
        for name, per_pair in data.kept.items():
            unit, direction = data.units[name]
            parts = [pp[k] for pp in per_pair if pp[k]]
            info = BUILTIN_METRICS.get(name)
            metrics[name] = Metric(
                name=name,
                unit=info.unit if info else unit,
                direction=info.direction if info else direction,
                samples=tuple(x for part in parts for x in part),
                groups=tuple(len(part) for part in parts),
            )
        metrics.update(data.one_side[k])
        runs.append(
            Run(
                run_id=uuid.uuid4().hex,
                suite=options.suite,
                model=options.model,
                created_at=created,
                git=side.git,
                machine=Machine.of(machine),
                config={**config, "ab": {"role": side.role, "label": side.label}},
                metrics=metrics,
                software=data.software,
            )
        )
    return runs[0], runs[1]


def _with_budgets(result: CheckResult, seconds: float, pairs: int, pair_seconds: float) -> CheckResult:
    """Say, for each comparison more pairs would decide, the time budget those pairs would take."""
    fixed = max(0.0, seconds - pairs * pair_seconds)  # the first pair's start, not overlapped
    comparisons = tuple(
        dataclasses.replace(c, required_seconds=fixed + c.required_n * pair_seconds)
        if c.required_unit == "pairs" and c.required_n is not None
        else c
        for c in result.comparisons
    )
    return dataclasses.replace(result, comparisons=comparisons)


def _decide_now(
    data: _Data,
    sides: tuple[Side, Side],
    options: ResidentOptions,
    config: dict[str, Any],
    policy: Policy,
    alpha: float,
) -> CheckResult:
    baseline, current = _runs(data, sides, options, config)
    return decide_look(baseline, current, data.ratios, policy, alpha=alpha, derived=data.derived)


def measure_resident(
    sides: tuple[Side, Side],
    options: ResidentOptions,
    policy: Policy,
    *,
    progress: ProgressFn | None = None,
) -> ResidentOutcome:
    """Measure both sides pair by pair in resident workers and decide; see the module docstring.

    Raises:
        ProtocolMissing: a side's perfgate has no resident worker (the caller falls back).
        PerfgateError: a worker crashed, hung or could not import its revision (one line, naming it).
    """
    started = time.monotonic()
    clock = _Clock(started, options)
    cpus = tuple(sorted(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else (0,)
    from perfgate.bench.machine import collect_machine, collect_software

    data = _Data(machine=collect_machine(), software=collect_software())
    plans: list[_Plan] = []
    rule: SequentialLooks | None = None
    pinned = True
    stopped = "maximum pairs"
    pair_seconds = 0.0
    config: dict[str, Any] = {}
    setup_seconds: list[float] = []
    measure_seconds: list[float] = []
    setup_deadlines: dict[int, float] = {}  # per pair: when both workers' start and set-up must be done
    layouts: list[dict[str, Any]] = []
    with Workers() as workers:
        overlap = options.overlap and len(cpus) > 1
        request = _setup_request(options)

        def start_pair(pair: int, cpu: int | None) -> dict[str, Channel]:
            """Start both workers of a pair (pinned to ``cpu`` if given) and send them their set-up; do not wait."""
            chans = {}
            setup_deadlines[pair] = clock.deadline(options.setup_floor)
            by_name = dict(zip("AB", sides, strict=True))
            order = start_order(options.seed, pair)  # neither side always starts first
            args = worker_args("perfgate.ab.worker", randomise=options.randomise_layout)
            for name in order:
                side = by_name[name]
                layout = draw(options.seed, pair, name) if options.randomise_layout else Layout()
                layouts.append({"pair": pair, "side": name, "first": name == order[0], **layout.record()})
                chans[name] = workers.spawn(
                    f"{side.label} worker (pair {pair + 1})", side.path, layout.env(side.env), args
                )
                if cpu is not None:
                    pin(chans[name].pid, cpu)
            for name in order:
                _greet(chans[name], by_name[name], clock, setup_deadlines[pair])
                chans[name].send(request)
            return chans

        def finish_setup(chans: dict[str, Channel], deadline: float) -> dict[str, dict[str, Any]]:
            replies = {}
            for name in "AB":  # the baseline's error first, whichever side started first
                ch = chans[name]
                reply = _finish_setup(ch, clock, deadline)
                if reply.get("ok") is not True:
                    ch.kill()
                    raise PerfgateError(f"the {ch.label} cannot be imported or set up: {reply.get('error')}")
                replies[name] = reply
            return replies

        t_last = time.monotonic()
        upcoming: dict[str, Channel] | None = start_pair(0, None)  # the first pair sets up on every CPU
        for pair in range(options.max_pairs):
            t_pair = time.monotonic()
            assert upcoming is not None  # started before the loop, or at the end of the previous pair
            chans: dict[str, Channel] = upcoming
            upcoming = None
            replies = finish_setup(chans, setup_deadlines[pair])
            if not plans:
                plans = _plan(replies["A"]["stages"], replies["B"]["stages"], options)
                data.one_side = (
                    _one_side(replies["A"]["stages"], replies["B"]["stages"]),
                    _one_side(replies["B"]["stages"], replies["A"]["stages"]),
                )
                if not plans:
                    raise PerfgateError("the two revisions have no stage in common to compare")
                config = {
                    "stages": {
                        p.name: {"metric": p.metric, "calls_per_block": p.calls, "blocks_per_pair": p.blocks}
                        for p in plans
                    }
                }
            t_measure = time.monotonic()
            setup_seconds.append(t_measure - t_pair)
            cpu = cpus[pair % len(cpus)]
            pinned = all([pin(ch.pid, cpu) for ch in chans.values()]) and pinned
            elapsed = t_measure - started
            if overlap and pair + 1 < options.max_pairs and elapsed + 2 * pair_seconds <= options.time_budget:
                # the next pair sets up on the other CPU while this one measures
                upcoming = start_pair(pair + 1, cpus[(pair + 1) % len(cpus)])
            _measure_pair(pair, chans, plans, options, data, clock)
            _add_memory(replies["A"].get("memory", {}), replies["B"].get("memory", {}), data)
            measure_seconds.append(time.monotonic() - t_measure)
            for ch in chans.values():
                ch.close()
            if upcoming is not None:  # this pair's CPU is free: the next pair ends its set-up on every CPU
                for ch in upcoming.values():
                    allow(ch.pid, set(cpus))
            n = pair + 1
            now = time.monotonic()
            took, t_last = now - t_last, now
            pair_seconds = took if n <= 2 else 0.5 * (pair_seconds + took)
            elapsed = now - started
            if n == 2:  # the looks are fixed here, from the budget and the pairs' time only
                fit = n + int(max(0.0, options.time_budget - elapsed) // max(pair_seconds, 1e-3))
                rule = SequentialLooks(policy.alpha, min(options.max_pairs, max(MIN_PAIRS, fit)), options.looks)
            out_of_time = n >= MIN_PAIRS and elapsed + pair_seconds > options.time_budget
            looked = len(rule.looked) if rule else 0
            result_of = functools.partial(_decide_now, data, sides, options, config, policy)
            stop = rule.look(n, result_of, out_of_time) if rule else None
            if rule and len(rule.looked) > looked and progress:
                progress(f"pair {n}: look {len(rule.looked)} of {len(rule.schedule)} ({elapsed:.0f} s)")
            if stop:
                stopped = "maximum pairs" if stop == "time budget" and n == options.max_pairs else stop
                break
            if not (rule and len(rule.looked) > looked) and progress:
                progress(f"pair {n} measured ({elapsed:.0f} s)")
            if upcoming is None and pair + 1 < options.max_pairs:
                upcoming = start_pair(pair + 1, None)
    baseline, current = _runs(data, sides, options, config)
    if rule is None or not rule.results:
        raise PerfgateError("the check ended before its first look")  # max_pairs >= MIN_PAIRS makes this unreachable
    seconds = time.monotonic() - started
    merged = _with_budgets(rule.merged(), seconds, len(data.orders), pair_seconds)
    outcome = ResidentOutcome(
        result=merged,
        baseline=baseline,
        current=current,
        pairs=len(data.orders),
        looks=tuple(rule.looked),
        schedule=rule.schedule,
        stopped=stopped,
        pinned=pinned,
        cpus=cpus,
        seed=options.seed,
        seconds=seconds,
        pair_seconds=pair_seconds,
        plan=tuple(dataclasses.asdict(p) for p in plans),
        setup_seconds=tuple(setup_seconds),
        measure_seconds=tuple(measure_seconds),
        orders=tuple(data.orders),
        log_ratios={k: tuple(v) for k, v in data.ratios.items()},
        derived=dict(data.derived),
        layouts=tuple(x for x in layouts if x["pair"] < len(data.orders)),  # not a pair started but never measured
    )
    return dataclasses.replace(
        outcome,
        result=dataclasses.replace(merged, baseline=baseline, current=current, baseline_source=outcome.describe()),
    )
