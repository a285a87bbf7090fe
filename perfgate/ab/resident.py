"""The resident-worker engine of ``perfgate ab``: both revisions interleaved in short blocks, pair by pair.

Pair after pair, until every gated metric is decided or the time budget is spent:

1. a fresh worker process is started for each revision (``python -m perfgate.workers.resident``
   in that revision's own tree, so it imports that revision's code) and runs every stage's
   set-up, with the same seed on both sides; while one pair measures, the next one starts
   and sets up on another CPU, and on every CPU once the measuring pair has ended (a set-up
   never shares a CPU with blocks); which side starts first is drawn per pair, and every
   worker gets a memory layout drawn at random before anything is imported
   (:mod:`perfgate.workers.layout`: a fresh interpreter's layout is otherwise fixed by the
   source text, and a comment can move a stage's speed by 8 %);
2. both workers are pinned to one CPU (``os.sched_setaffinity``; the CPU changes from pair to
   pair) and alternate **blocks**: ``k`` timed calls of one stage, about
   :attr:`ResidentOptions.block_time` of work, on one side and then on the other, the side
   that goes first drawn per block from a generator seeded by ``(seed, pair)``
   (:func:`block_orders`), stage after stage in rounds, so a slow phase of the machine hits
   every stage and both sides alike; a stage of one or two calls a block (a training step of
   half a second or more) runs its rounds after the others', its blocks back to back
   (:func:`~perfgate.ab._schedule.block_sequence`);
3. the pair's log ratio of every metric is estimated from its blocks, the workers end, and at
   the looks fixed by the budget the check decides (:mod:`perfgate.core.paired`).

Every worker is a fresh interpreter. Workers forked from one template process per revision
start faster, but they inherit the template's memory layout, so every pair of a check shares
one layout offset between the sides, which the test across pairs cannot see: measured on a
pure-Python stage, that design raised false alarms in A/A checks (``benchmarks/ab.py``).
Block sizes and counts are fixed from the first pair's set-up. After a look that decided some
stages and not others, the pairs that follow measure only the undecided ones, each with more
blocks in the time the decided ones took (:func:`~perfgate.ab._plan.focus_stages`; a decided
verdict is final, so no later pair could change it).

Deadlines: the budget is a budget. A check ends within ``start + budget + grace``, the grace
:func:`grace_seconds` (``max(10 s, 25 % of the budget)``: 20 s for the default 80 s, 60 s for
240 s), whatever its pairs do, a hung stage included. Past the three pairs the test needs
(:data:`~perfgate.core.paired.MIN_PAIRS`), a pair is started only while the slowest pair so far,
from its workers' start to their end (set-up, any wait for the CPU, blocks), not the mean, still
fits in what is left of the budget; a pair whose remaining blocks, at its own pace, would end
past ``start + budget + grace`` is cut before its next block: its workers are ended and its
blocks dropped (a cut pair, with fewer blocks and a side missing from its last, is not one more
draw of the same design for the test across pairs; the drop depends on time, not on what was
measured), and the check looks at the pairs it has. Every exchange with a worker (its start, its
set-up, a block) must be answered by that end too: in a pair past the three, one that is not
cuts the pair; in one of the three, it ends the check: the worker is killed with every other,
and one line names the stage, what it was doing (its set-up, its first calls, a block) and the
side; a budget too small for three pairs ends so, and says to give a larger one. The JSON
report says how long the check took against its budget and grace (``seconds``,
``time_budget``, ``grace``).

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
    now: Callable[[], float] = time.monotonic,
) -> ResidentOutcome:
    """Measure both sides pair by pair in resident workers and decide; see the module docstring.

    ``now`` is the clock every deadline and the check's ``seconds`` are read on (a test may fake it).

    Raises:
        ProtocolMissing: a side's perfgate has no resident worker (the caller falls back).
        PerfgateError: a worker crashed, hung or could not import its revision (one line, naming it).
    """
    started = now()
    measured = schedule(sides, options, policy, started, progress, now=now)  # the plan is made from the first pairs
    return collect(measured, sides, options, started, now=now)
