"""The schedule of a resident A/B check: pair after pair, start the workers, alternate blocks, stop.

Each pair's two workers start in the order :func:`~perfgate.ab.layout.start_order` draws, each
with its own layout, and are sent their set-up; while a pair measures, the next one sets up on
another CPU (with two CPUs or more). A pair's workers are pinned to one CPU and alternate
blocks of every stage in rounds, the side that goes first drawn per block (:func:`block_orders`).
After each pair the stopping rule looks when a look is due, or early when the budget ends first.
Every exchange with a worker has a deadline (:class:`_Clock`; :mod:`perfgate.ab.resident`,
"Deadlines").
"""

from __future__ import annotations

import base64
import functools
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from perfgate.ab._collect import Measured, Samples, decide_now
from perfgate.ab._plan import CheckPlan, ResidentOptions, Side, StagePlan, looks, plan_check, setup_request
from perfgate.ab.layout import Layout, draw, start_order, worker_args
from perfgate.ab.workers import Channel, WorkerHung, Workers, allow, module_missing, pin, worker_module
from perfgate.core.paired import MIN_PAIRS
from perfgate.core.policy import Policy
from perfgate.errors import PerfgateError

__all__ = ["ProtocolMissing", "block_orders", "block_seconds", "grace_seconds", "schedule"]

GRACE_SECONDS = 10.0  # at least this much past the budget before a worker counts as hung
GRACE_FRACTION = 0.25  # ... and at least this fraction of the budget

ProgressFn = Callable[[str], None]


class ProtocolMissing(PerfgateError):
    """The revision's perfgate has no resident worker (it predates the protocol)."""


def block_orders(seed: int, pair: int, n: int) -> tuple[str, ...]:
    """Which side goes first in each of a pair's ``n`` blocks: ``"A"`` or ``"B"``, reproducible from its seed."""
    rng = np.random.default_rng([seed, pair])
    return tuple("A" if x else "B" for x in rng.random(n) < 0.5)


def grace_seconds(time_budget: float) -> float:
    """Seconds past the time budget before a worker counts as hung: ``max(10 s, 25 % of the budget)``."""
    return max(GRACE_SECONDS, GRACE_FRACTION * time_budget)


def block_seconds(reply: Mapping[str, Any], scale: float) -> list[float]:
    """A block's samples in the metric's unit: packed float64 from a worker that knows the encoding, else numbers."""
    packed = reply.get("seconds_f64")
    if packed is not None:
        values: list[float] = (np.frombuffer(base64.b64decode(packed), dtype=np.float64) * scale).tolist()
        return values
    return [float(x) * scale for x in reply["seconds"]]


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


def _greet(ch: Channel, side: Side, module: str, clock: _Clock, deadline: float) -> None:
    """Read a fresh worker's greeting (``module`` runs it); ProtocolMissing when its perfgate has no resident worker."""
    from perfgate.ab.worker import PROTOCOL, PROTOCOL_VERSION

    try:
        hello = ch.receive(clock.left(deadline))
    except WorkerHung:
        within = clock.within(deadline, clock.options.setup_floor, "every set-up")
        raise PerfgateError(f"the {side.label} did not start {within}: {ch.stderr_tail()}") from None
    except PerfgateError as exc:
        if module_missing(str(exc), module):
            raise ProtocolMissing(f"the {side.label} has no resident worker") from None
        raise PerfgateError(f"the {side.label} does not start: {ch.stderr_tail()}") from None
    if hello.get("protocol") != PROTOCOL or hello.get("version") != PROTOCOL_VERSION:
        ch.kill()
        raise ProtocolMissing(f"the {side.label} speaks worker protocol {hello.get('version')!r}")


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
    sides: tuple[Side, Side], options: ResidentOptions, policy: Policy, started: float, progress: ProgressFn | None
) -> Measured:
    """Measure pair after pair until the stopping rule stops the check; every worker is ended on return or error."""
    cpus = tuple(sorted(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else (0,)
    from perfgate.bench.machine import collect_machine, collect_software

    measured = Measured(samples=Samples(), machine=collect_machine(), software=collect_software(), cpus=cpus)
    with Workers() as workers:
        _Pairs(sides, options, policy, progress, workers, _Clock(started, options), measured).run()
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
        self.setup_deadlines: dict[int, float] = {}  # per pair: when both workers' start and set-up must be done
        # the worker module each side's tree has (a revision from before perfgate.ab: its older name)
        self.modules: dict[str, str] = {}
        for name, side in zip("AB", sides, strict=True):
            module = worker_module(side.path)
            if module is None:
                raise ProtocolMissing(f"the {side.label} has no resident worker")
            self.modules[name] = module

    def run(self) -> None:
        m, options, cpus = self.measured, self.options, self.cpus
        t_last = time.monotonic()
        upcoming: dict[str, Channel] | None = self.start_pair(0, None)  # the first pair sets up on every CPU
        for pair in range(options.max_pairs):
            t_pair = time.monotonic()
            assert upcoming is not None  # started before the loop, or at the end of the previous pair
            chans: dict[str, Channel] = upcoming
            upcoming = None
            replies = self.finish_setup(chans, self.setup_deadlines[pair])
            if m.plan is None:
                m.plan = plan_check(replies["A"]["stages"], replies["B"]["stages"], options)
            t_measure = time.monotonic()
            m.setup_seconds.append(t_measure - t_pair)
            cpu = cpus[pair % len(cpus)]
            m.pinned = all([pin(ch.pid, cpu) for ch in chans.values()]) and m.pinned
            elapsed = t_measure - self.clock.started
            if self.overlap and pair + 1 < options.max_pairs and elapsed + 2 * m.pair_seconds <= options.time_budget:
                # the next pair sets up on the other CPU while this one measures
                upcoming = self.start_pair(pair + 1, cpus[(pair + 1) % len(cpus)])
            self.measure_pair(pair, chans, m.plan, replies)
            m.measure_seconds.append(time.monotonic() - t_measure)
            for ch in chans.values():
                ch.close()
            if upcoming is not None:  # this pair's CPU is free: the next pair ends its set-up on every CPU
                for ch in upcoming.values():
                    allow(ch.pid, set(cpus))
            now = time.monotonic()
            took, t_last = now - t_last, now
            if self.stop_after(pair + 1, took, now - self.clock.started):
                break
            if upcoming is None and pair + 1 < options.max_pairs:
                upcoming = self.start_pair(pair + 1, None)

    def start_pair(self, pair: int, cpu: int | None) -> dict[str, Channel]:
        """Start both workers of a pair (pinned to ``cpu`` if given) and send them their set-up; do not wait."""
        options, clock = self.options, self.clock
        chans = {}
        self.setup_deadlines[pair] = clock.deadline(options.setup_floor)
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
        for name in order:
            _greet(chans[name], by_name[name], self.modules[name], clock, self.setup_deadlines[pair])
            chans[name].send(self.request)
        return chans

    def finish_setup(self, chans: dict[str, Channel], deadline: float) -> dict[str, dict[str, Any]]:
        replies = {}
        for name in "AB":  # the baseline's error first, whichever side started first
            ch = chans[name]
            reply = _finish_setup(ch, self.clock, deadline)
            if reply.get("ok") is not True:
                ch.kill()
                raise PerfgateError(f"the {ch.label} cannot be imported or set up: {reply.get('error')}")
            replies[name] = reply
        return replies

    def measure_pair(
        self, pair: int, chans: dict[str, Channel], plan: CheckPlan, replies: Mapping[str, Mapping[str, Any]]
    ) -> None:
        """Alternate blocks of every stage between the two workers of one pair and record the pair."""
        samples = self.measured.samples
        orders = block_orders(self.options.seed, pair, sum(p.blocks for p in plan.stages))
        samples.orders.append(orders)
        samples.add_blocks(plan.stages, self.blocks(chans, plan.stages, orders), self.options)
        samples.add_memory(replies["A"].get("memory", {}), replies["B"].get("memory", {}))

    def blocks(
        self, chans: dict[str, Channel], stages: tuple[StagePlan, ...], orders: tuple[str, ...]
    ) -> dict[str, dict[str, list[list[float]]]]:
        """Every stage's blocks in rounds, each block on one side and then the other, first as ``orders`` says."""
        options, clock = self.options, self.clock
        timings: dict[str, dict[str, list[list[float]]]] = {p.name: {"A": [], "B": []} for p in stages}
        i = 0
        for r in range(max(p.blocks for p in stages)):
            for p in stages:
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
        return timings

    def stop_after(self, n: int, took: float, elapsed: float) -> bool:
        """After pair ``n`` (which took ``took`` s, ``elapsed`` s into the check): look if due; True to stop."""
        m, options, progress = self.measured, self.options, self.progress
        m.pair_seconds = took if n <= 2 else 0.5 * (m.pair_seconds + took)
        if n == 2:  # the looks are fixed here, from the budget and the pairs' time only
            m.rule = looks(self.policy, options, n, elapsed, m.pair_seconds)
        rule = m.rule
        out_of_time = n >= MIN_PAIRS and elapsed + m.pair_seconds > options.time_budget
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
        return False
