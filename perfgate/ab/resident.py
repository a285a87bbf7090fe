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

The engine's three steps are private modules of :mod:`perfgate.ab`: the **plan**
(:mod:`perfgate.ab._plan`: the options, the stages and blocks from the first pair's set-up,
the looks from the budget), the **schedule** (:mod:`perfgate.ab._schedule`: pair after pair,
the workers' start, the blocks, the deadlines, the stopping rule) and the **collect** step
(:mod:`perfgate.ab._collect`: pairs to samples, runs and the paired decision of
:mod:`perfgate.core.paired`). This module is their public face.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from perfgate.ab._collect import ResidentOutcome, collect
from perfgate.ab._plan import DEFAULT_TIME_BUDGET, MAX_TIME_BUDGET, ResidentOptions, Side
from perfgate.ab._schedule import ProtocolMissing, block_orders, block_seconds, grace_seconds, schedule
from perfgate.core.policy import Policy

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

ProgressFn = Callable[[str], None]


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
    measured = schedule(sides, options, policy, started, progress)  # the plan is made from the first pairs
    return collect(measured, sides, options, started)
