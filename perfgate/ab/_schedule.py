"""The schedule of a resident A/B check: pair after pair, start the workers, alternate blocks, stop.

Each pair's two workers start in the order :func:`~perfgate.workers.layout.start_order` draws, each
with its own layout, and are sent their set-up; while a pair measures, the next one sets up on
another CPU (with two CPUs or more). A pair's workers are pinned to one CPU and alternate
blocks of every stage in rounds, the long stages' after the others' (:func:`block_sequence`), the
side that goes first drawn per block (:func:`block_orders`).
After each pair the stopping rule looks when a look is due, or early when the budget ends first.
After a look that decided some stages and not others, later pairs measure only the undecided
ones, each with more blocks, in the time the decided stages took (:func:`~perfgate.ab._plan.focus_stages`).

The budget is a budget: the check ends within it plus :func:`grace_seconds` (``max(10 s, 25 %
of the budget)``), whatever its pairs do (:mod:`perfgate.ab.resident`, "Deadlines"). Past the
pairs the test needs (:data:`~perfgate.core.paired.MIN_PAIRS`), a pair starts only while the
slowest pair so far, from its start to its end, still fits in what is left of the budget
(:func:`~perfgate.ab._plan.pair_fits`), and one whose blocks would end past budget + grace is
cut: its workers ended, its blocks dropped (:meth:`_Pairs.blocks` says why). Every exchange
with a worker must be answered by that end (:attr:`_Clock.end`).
"""

from __future__ import annotations

import base64
import functools
import os
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from perfgate.ab._collect import USAGE_KEYS, Measured, Samples, decide_now
from perfgate.ab._plan import (
    CheckPlan,
    ResidentOptions,
    Side,
    StagePlan,
    focus_stages,
    grace_seconds,
    looks,
    pair_fits,
    plan_check,
    setup_request,
)
from perfgate.core.paired import MIN_PAIRS, SCREEN_CALLS, undecided
from perfgate.core.policy import Policy
from perfgate.errors import PerfgateError
from perfgate.workers.layout import Layout, draw, start_order, worker_args
from perfgate.workers.spawn import Channel, WorkerHung, Workers, allow, module_missing, pin, worker_module

__all__ = ["ProtocolMissing", "block_orders", "block_seconds", "block_sequence", "grace_seconds", "schedule"]

ProgressFn = Callable[[str], None]
Now = Callable[[], float]


class ProtocolMissing(PerfgateError):
    """The revision's perfgate has no resident worker (it predates the protocol)."""


class _Cut(Exception):
    """A pair past the minimum would end past the check's end: it is dropped and its workers ended."""


def block_orders(seed: int, pair: int, n: int) -> tuple[str, ...]:
    """Which side goes first in each of a pair's ``n`` blocks: ``"A"`` or ``"B"``, reproducible from its seed."""
    rng = np.random.default_rng([seed, pair])
    return tuple("A" if x else "B" for x in rng.random(n) < 0.5)


def block_sequence(stages: Sequence[StagePlan]) -> list[StagePlan]:
    """The stage of each of a pair's blocks, in order: rounds of every stage, the long stages' after the others'.

    A stage of fewer than :data:`~perfgate.core.paired.SCREEN_CALLS` calls a block (a training
    step of half a second or more) runs its blocks back to back, in rounds of its own after
    the other stages' rounds: between the other stages' blocks, the TFT's step spread 2.7 %
    per A/A pair (three checks), and 1.7-2.2 % with its blocks back to back (three checks;
    ``docs/noise.md`` §7). The order depends on the plan only, never on what was measured.
    """
    out: list[StagePlan] = []
    for group in ([p for p in stages if p.calls >= SCREEN_CALLS], [p for p in stages if p.calls < SCREEN_CALLS]):
        for r in range(max((p.blocks for p in group), default=0)):
            out.extend(p for p in group if r < p.blocks)
    return out


def block_seconds(reply: Mapping[str, Any], scale: float) -> list[float]:
    """A block's samples in the metric's unit: packed float64 from a worker that knows the encoding, else numbers."""
    packed = reply.get("seconds_f64")
    if packed is not None:
        values: list[float] = (np.frombuffer(base64.b64decode(packed), dtype=np.float64) * scale).tolist()
        return values
    return [float(x) * scale for x in reply["seconds"]]


def block_usage(reply: Mapping[str, Any], calls: int) -> dict[str, int]:
    """A block's calls and, from a worker that reports them, its page faults and involuntary switches."""
    out = {"calls": calls}
    usage = reply.get("rusage")
    if isinstance(usage, Mapping):
        out.update({k: int(usage[k]) for k in USAGE_KEYS if isinstance(usage.get(k), int)})
    return out


@dataclass(frozen=True, slots=True)
class _Clock:
    """The check's deadlines (module docstring); times are ``now()``, ``time.monotonic()`` unless a test fakes it."""

    started: float
    options: ResidentOptions
    now: Now = time.monotonic

    @property
    def grace(self) -> float:
        return grace_seconds(self.options.time_budget)

    @property
    def end(self) -> float:
        """When the check must have ended: its start, plus the budget, plus the grace."""
        return self.started + self.options.time_budget + self.grace

    def deadline(self, floor: float) -> float:
        """When an exchange outside the check's pairs that starts now and may always take ``floor`` s must end."""
        budget_end = self.started + self.options.time_budget
        return max(budget_end, self.now() + floor * self.options.deadline_scale) + self.grace

    def left(self, deadline: float) -> float:
        return max(0.1, deadline - self.now())  # 0.1: a reply already in the pipe is still read

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


def _greet(ch: Channel, side: Side, module: str, clock: _Clock, deadline: float, *, cut: bool = False) -> None:
    """Read a fresh worker's greeting (``module`` runs it); ProtocolMissing when its perfgate has no resident worker.

    ``cut``: a missed deadline raises :class:`_Cut` (the pair is dropped) instead of an error.
    """
    from perfgate.workers.resident import PROTOCOL, PROTOCOL_VERSION

    try:
        hello = ch.receive(clock.left(deadline))
    except WorkerHung:
        if cut:
            raise _Cut from None
        within = clock.within(deadline, clock.options.setup_floor, "every set-up")
        raise PerfgateError(f"the {side.label} did not start {within}: {ch.stderr_tail()}") from None
    except PerfgateError as exc:
        if module_missing(str(exc), module):
            raise ProtocolMissing(f"the {side.label} has no resident worker") from None
        raise PerfgateError(f"the {side.label} does not start: {ch.stderr_tail()}") from None
    if hello.get("protocol") != PROTOCOL or hello.get("version") != PROTOCOL_VERSION:
        ch.kill()
        raise ProtocolMissing(f"the {side.label} speaks worker protocol {hello.get('version')!r}")


def _finish_setup(ch: Channel, clock: _Clock, deadline: float, *, cut: bool = False) -> dict[str, Any]:
    """A worker's set-up reply, read past its progress lines; a missed deadline names the stage it hung in.

    ``cut``: a missed deadline raises :class:`_Cut` (the pair is dropped) instead of an error.
    """
    step, stage = "", None
    while True:
        try:
            reply = ch.receive(clock.left(deadline))
        except WorkerHung:
            if cut:
                raise _Cut from None
            within = clock.within(deadline, clock.options.setup_floor, "every set-up")
            if stage is None:  # a worker that predates the progress lines: the stage is not known
                what = "did not finish its stages' set-up"
            elif step == "import":
                what = f"stages module {stage!r} did not finish importing"
            elif step == "calls":
                what = f"stage {stage!r} did not return from its first calls (its warm-up)"
            else:
                what = f"stage {stage!r} did not finish its set-up"
            raise PerfgateError(f"{what} {within}, on the {ch.label}; {_HUNG_HINT}{_tail(ch)}") from None
        if "progress" not in reply:
            return reply
        step = str(reply["progress"])
        stage = str(reply.get("module") if step == "import" else reply.get("stage"))


def schedule(
    sides: tuple[Side, Side],
    options: ResidentOptions,
    policy: Policy,
    started: float,
    progress: ProgressFn | None,
    *,
    now: Now = time.monotonic,
) -> Measured:
    """Measure pair after pair until the stopping rule stops the check; every worker is ended on return or error.

    ``started`` is the check's start on the clock ``now`` (``time.monotonic`` unless a test fakes it).
    """
    cpus = tuple(sorted(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else (0,)
    from perfgate.bench.machine import collect_machine, collect_software

    measured = Measured(samples=Samples(), machine=collect_machine(), software=collect_software(), cpus=cpus)
    with Workers() as workers:
        _Pairs(sides, options, policy, progress, workers, _Clock(started, options, now), measured).run()
    return measured


class _Pairs:
    """The pairs of one check: their workers, their blocks, and after each pair the stopping rule."""

    def __init__(
        self,
        sides: tuple[Side, Side],
        options: ResidentOptions,
        policy: Policy,
        progress: ProgressFn | None,
        workers: Workers,
        clock: _Clock,
        measured: Measured,
    ) -> None:
        self.sides, self.options, self.policy, self.progress = sides, options, policy, progress
        self.workers, self.clock, self.measured = workers, clock, measured
        self.cpus = measured.cpus
        self.overlap = options.overlap and len(self.cpus) > 1
        self.request = setup_request(options)
        self.spawned: dict[int, float] = {}  # per pair: when its workers were started
        # per stage: the slowest of the measured pairs' mean seconds for one block on one side
        self.pace: dict[str, float] = {}
        # what the next pairs measure: the plan's stages, or after a look only the undecided ones (focus_stages)
        self.focus: tuple[StagePlan, ...] | None = None
        # the worker module each side's tree has (a revision from before perfgate.ab: its older name)
        self.modules: dict[str, str] = {}
        for name, side in zip("AB", sides, strict=True):
            module = worker_module(side.path)
            if module is None:
                raise ProtocolMissing(f"the {side.label} has no resident worker")
            self.modules[name] = module

    def elapsed(self) -> float:
        return self.clock.now() - self.clock.started

    @staticmethod
    def needed(pair: int) -> bool:
        """Pair ``pair`` (from 0) is one of those the test needs at least: started whatever, never cut."""
        return pair < MIN_PAIRS

    def may_start(self, pair: int) -> bool:
        """May pair ``pair`` (from 0) start now: a needed one, or one the fit rule lets start."""
        if pair >= self.options.max_pairs:
            return False
        return self.needed(pair) or pair_fits(self.measured.pair_spans, self.elapsed(), self.options.time_budget)

    def run(self) -> None:
        clock = self.clock
        t_last = clock.now()
        upcoming: dict[str, Channel] | None = self.start_pair(0, None)  # the first pair sets up on every CPU
        for pair in range(self.options.max_pairs):
            assert upcoming is not None  # started before the loop, or at the end of the previous pair
            chans: dict[str, Channel] = upcoming
            try:
                upcoming = self.measure_pair(pair, chans)
            except _Cut:  # whatever the next pair had started is ended on leaving (Workers)
                for ch in chans.values():
                    ch.kill()
                self.cut(pair)
                return
            now = clock.now()
            took, t_last = now - t_last, now
            more = upcoming is not None or self.may_start(pair + 1)
            if self.stop_after(pair + 1, took, now - clock.started, running=upcoming is not None, more=more):
                return
            if upcoming is None:
                if not more:
                    return  # the last of max_pairs
                try:
                    upcoming = self.start_pair(pair + 1, None)
                except _Cut:
                    self.cut(pair + 1)
                    return

    def start_pair(self, pair: int, cpu: int | None) -> dict[str, Channel]:
        """Start both workers of a pair (pinned to ``cpu`` if given) and send them their set-up; do not wait."""
        options, clock = self.options, self.clock
        chans = {}
        self.spawned[pair] = clock.now()
        by_name = dict(zip("AB", self.sides, strict=True))
        order = start_order(options.seed, pair)  # neither side always starts first
        for name in order:
            side = by_name[name]
            layout = draw(options.seed, pair, name) if options.randomise_layout else Layout()
            self.measured.layouts.append({"pair": pair, "side": name, "first": name == order[0], **layout.record()})
            args = worker_args(self.modules[name], randomise=options.randomise_layout)
            chans[name] = self.workers.spawn(
                f"{side.label} worker (pair {pair + 1})", side.path, layout.env(side.env), args
            )
            if cpu is not None:
                pin(chans[name].pid, cpu)
        try:
            for name in order:
                _greet(chans[name], by_name[name], self.modules[name], clock, clock.end, cut=not self.needed(pair))
                chans[name].send(self.request)
        except _Cut:
            for ch in chans.values():
                ch.kill()
            raise
        return chans

    def finish_setup(self, pair: int, chans: dict[str, Channel]) -> dict[str, dict[str, Any]]:
        replies = {}
        for name in "AB":  # the baseline's error first, whichever side started first
            ch = chans[name]
            reply = _finish_setup(ch, self.clock, self.clock.end, cut=not self.needed(pair))
            if reply.get("ok") is not True:
                ch.kill()
                raise PerfgateError(f"the {ch.label} cannot be imported or set up: {reply.get('error')}")
            replies[name] = reply
        return replies

    def measure_pair(self, pair: int, chans: dict[str, Channel]) -> dict[str, Channel] | None:
        """Set up, measure and record one pair; return the next pair when it was started meanwhile.

        Raises :class:`_Cut`, having recorded nothing of this pair, when it would end past the check's end.
        """
        m, clock, cpus = self.measured, self.clock, self.cpus
        t_pair = clock.now()
        replies = self.finish_setup(pair, chans)
        if m.plan is None:
            m.plan = plan_check(replies["A"]["stages"], replies["B"]["stages"], self.options)
        t_measure = clock.now()
        cpu = cpus[pair % len(cpus)]
        pinned = all([pin(ch.pid, cpu) for ch in chans.values()])
        upcoming = None
        if self.overlap and self.may_start(pair + 1):
            # the next pair sets up on the other CPU while this one measures
            try:
                upcoming = self.start_pair(pair + 1, cpus[(pair + 1) % len(cpus)])
            except _Cut:  # the end has come while it started: this pair is cut next, or (needed) ends in an error
                upcoming = None
        stages = self.focus or m.plan.stages
        orders = block_orders(self.options.seed, pair, sum(p.blocks for p in stages))
        timings, usage = self.blocks(pair, chans, stages, orders)
        for ch in chans.values():
            ch.close(min(5.0, clock.left(clock.end)))
        if upcoming is not None:  # this pair's CPU is free: the next pair ends its set-up on every CPU
            for ch in upcoming.values():
                allow(ch.pid, set(cpus))
        end = clock.now()
        m.pinned = pinned and m.pinned
        m.setup_seconds.append(t_measure - t_pair)
        m.measure_seconds.append(end - t_measure)
        m.pair_spans.append(end - self.spawned[pair])
        m.samples.orders.append(orders)
        m.pair_blocks.append({p.name: p.blocks for p in stages})
        m.samples.add_blocks(m.plan.stages, timings, self.options)
        m.add_usage(usage)
        m.samples.add_memory(replies["A"].get("memory", {}), replies["B"].get("memory", {}))
        return upcoming

    def blocks(
        self, pair: int, chans: dict[str, Channel], stages: tuple[StagePlan, ...], orders: tuple[str, ...]
    ) -> tuple[dict[str, dict[str, list[list[float]]]], dict[str, dict[str, Counter[str]]]]:
        """Every stage's blocks in :func:`block_sequence` order, on one side then the other, first as ``orders`` says.

        Returns the blocks' samples, and per stage and side the calls and the workers' page faults and
        involuntary context switches over them (a worker that does not report its usage adds calls only).

        A pair past the needed ones is cut (:class:`_Cut`) before a block when its remaining blocks,
        at this pair's own pace per stage so far (else the slowest earlier pair's), would end past the
        check's end, or when a block is not answered by that end. Its finished blocks are dropped,
        not kept: the test across pairs takes one log ratio per pair as one draw of the same
        design, and a cut pair would bring one of fewer blocks (with the stages later in a round,
        and the second side of a block, missing more often), so a noisier and differently weighted
        draw; the drop depends on time only, never on what the blocks measured.
        """
        options, clock = self.options, self.clock
        cuttable = not self.needed(pair)
        timings: dict[str, dict[str, list[list[float]]]] = {p.name: {"A": [], "B": []} for p in stages}
        usage: dict[str, dict[str, Counter[str]]] = {p.name: {"A": Counter(), "B": Counter()} for p in stages}
        left = {p.name: 2 * p.blocks for p in stages}  # blocks still to measure, both sides
        spent: dict[str, list[float]] = {p.name: [] for p in stages}  # this pair's seconds per block
        for i, p in enumerate(block_sequence(stages)):
            first = orders[i]
            for side in (first, "B" if first == "A" else "A"):
                if cuttable and clock.now() + self._still(left, spent) > clock.end:
                    raise _Cut
                t_block = clock.now()
                try:
                    request = {"op": "time", "stage": p.name, "calls": p.calls, "encoding": "f64", "rusage": True}
                    reply = chans[side].request(request, clock.left(clock.end))
                except WorkerHung:
                    if cuttable:
                        raise _Cut from None
                    within = clock.within(clock.end, options.block_floor, "every block")
                    raise PerfgateError(
                        f"stage {p.name!r} did not finish a block of {p.calls} calls {within}, on the "
                        f"{chans[side].label}; {_HUNG_HINT}{_tail(chans[side])}"
                    ) from None
                spent[p.name].append(clock.now() - t_block)
                left[p.name] -= 1
                timings[p.name][side].append(block_seconds(reply, p.scale))
                usage[p.name][side].update(block_usage(reply, p.calls))
        for name, seconds in spent.items():
            self.pace[name] = max(self.pace.get(name, 0.0), sum(seconds) / len(seconds))
        return timings, usage

    def _still(self, left: Mapping[str, int], spent: Mapping[str, list[float]]) -> float:
        """Seconds the blocks ``left`` will take: per stage, this pair's mean block so far, else the slowest pair's."""
        total = 0.0
        for name, n in left.items():
            done = spent[name]
            total += n * (sum(done) / len(done) if done else self.pace.get(name, 0.0))
        return total

    def cut(self, pair: int) -> None:
        """Pair ``pair`` (from 0), past the needed ones, was cut: look at the pairs measured, and stop."""
        m, rule, n = self.measured, self.measured.rule, len(self.measured.samples.orders)
        assert rule is not None and n == pair >= MIN_PAIRS  # the needed pairs are never cut
        m.pairs_cut += 1
        if self.progress:
            self.progress(f"pair {pair + 1} cut: it would end past the budget plus grace ({self.elapsed():.0f} s)")
        if rule.looked and rule.looked[-1] == n:  # already looked at these pairs (not decided): nothing new to see
            m.stopped = "time budget"
            return
        result_of = functools.partial(decide_now, m, self.sides, self.options, self.policy)
        m.stopped = rule.look(n, result_of, out_of_time=True) or "time budget"

    def stop_after(self, n: int, took: float, elapsed: float, *, running: bool, more: bool) -> bool:
        """After pair ``n`` (which took ``took`` s, ``elapsed`` s into the check): look if due; True to stop.

        ``running``: the next pair is already started; ``more``: a next pair will be measured
        (running, or the fit rule lets it start); without one, the check looks now and stops.
        """
        m, options, progress = self.measured, self.options, self.progress
        m.pair_seconds = took if n <= 2 else 0.5 * (m.pair_seconds + took)
        if n == 2:  # the looks are fixed here, from the budget and the pairs' time only
            slowest = max(m.pair_spans)
            m.rule = looks(self.policy, options, n, elapsed, m.pair_seconds, slowest=slowest, running=int(running))
        rule = m.rule
        out_of_time = n >= MIN_PAIRS and not more
        looked = len(rule.looked) if rule else 0
        result_of = functools.partial(decide_now, m, self.sides, options, self.policy)
        stop = rule.look(n, result_of, out_of_time) if rule else None
        new_look = rule is not None and len(rule.looked) > looked
        if rule is not None and new_look and progress:
            progress(f"pair {n}: look {len(rule.looked)} of {len(rule.schedule)} ({elapsed:.0f} s)")
        if stop:
            m.stopped = "maximum pairs" if stop == "time budget" and n == options.max_pairs else stop
            return True
        if not new_look and progress:
            progress(f"pair {n} measured ({elapsed:.0f} s)")
        if new_look and options.focus and rule is not None and m.plan is not None:
            self.refocus(m.plan, undecided(rule.merged()))
        return False

    def refocus(self, plan: CheckPlan, still: frozenset[str]) -> None:
        """After a look: the next pairs measure the stages with a metric ``still`` undecided (focus_stages)."""
        stages = focus_stages(plan, still, self.pace)
        focus = None if stages == plan.stages else stages
        if focus is not None and focus != self.focus and self.progress:
            names = ", ".join(f"{p.name} ({p.blocks} blocks)" for p in focus)
            self.progress(f"the next pairs measure only what is still undecided: {names}")
        self.focus = focus
