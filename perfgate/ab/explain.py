"""Where a stage's change went: both revisions profiled on the same work, after the decision.

Fresh resident workers of both revisions (:mod:`perfgate.workers.resident`), :attr:`ExplainOptions.repeats`
a side, each with its own drawn memory layout as the measured pairs have, set the stages up as
the check did and answer ``profile`` requests: a stage's calls under a profiler
(:mod:`perfgate.profile`). All of them live at once, and each stage is profiled in short
chunks that go round the workers in an order drawn per round, so that a phase of the machine
(a neighbour, a slower minute) falls on both revisions alike instead of on one side's profile:
the interleaving of the measured blocks (``docs/noise.md`` §2), applied to the profiles. A
worker's chunks are pooled into its profile. The spread between two processes of one revision
is the floor: :func:`perfgate.core.profiles.explain` names only what stands above it. After each
chunk the worker also times the stage's calls without a profiler (:data:`TIMED_SHARE` of the
chunk): whether the stage moved, and which way, is told by those, since a profiler's own cost
differs between processes and on a torch step is most of what it records.

``auto`` is resolved once, by the first chunk (torch's operators for a torch stage, else the
sampling profiler), and every later chunk on both sides asks for that instrument, so that the
two sides are never profiled differently.

The pass runs after the check has decided, never during its measured blocks, and within its
own time budget (:attr:`ExplainOptions.budget`): when that is spent, the stages not yet
profiled say so. A revision whose worker predates the ``profile`` op, or a profiler that is not
installed, gives one line instead of a table; the verdict never depends on this pass.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from perfgate.ab._plan import ResidentOptions, Side, setup_request
from perfgate.ab._schedule import _Clock, _finish_setup, _greet
from perfgate.bench.callgrind import THREADS_ENV, valgrind_argv
from perfgate.core.profiles import Profile, StageExplanation, explain, pooled, profile_from_record, unavailable
from perfgate.errors import PerfgateError
from perfgate.workers.layout import draw, start_order, worker_args
from perfgate.workers.spawn import Channel, WorkerFailed, Workers, worker_module

__all__ = ["DEFAULT_EXPLAIN_BUDGET", "ExplainOptions", "explain_metrics"]

DEFAULT_EXPLAIN_BUDGET = 60.0  # seconds the profiling pass may add to a check
PAIR_OFFSET = 10_000  # layouts of the profiling processes: drawn apart from the measured pairs'
# a chunk's calls: short, so that the rounds interleave the sides finely, and long beside a profiler's
# own start and stop (torch.profiler's takes tenths of a second)
CHUNK_SECONDS = 0.5
MIN_REPEATS = 2  # processes a side the floor needs
MORE_REPEATS_SHARE = 0.3  # counts: a third process a side only while the set-ups so far took less of the budget
# times: a worker's chunk costs about this many times its seconds of calls, the calls timed bare after it
# and the profile's folding and reply included (torch on DQN's training step: 0.5 s of calls, about 2 s)
CHUNK_COST = 4.0
# what a profile's instrument string says of the instrument to ask for (auto resolved once)
CHOSEN = (("torch", "torch"), ("pyinstrument", "sampling"), ("bytecodes", "bytecodes"))
EXACT = ("bytecodes", "callgrind")  # counts: one chunk of exactly min_calls calls, no interleaving needed
INSTRUMENTS = ("auto", "sampling", "torch", "bytecodes", "callgrind")
# after each chunk, the stage's calls timed without a profiler for this share of the chunk's seconds: whether
# and which way the stage moved, which a profiler's own cost (most of a torch step's profiled time) blurs
TIMED_SHARE = 0.5
MAX_TIMED_CALLS = 10_000
CALLGRIND_SCALE = 20.0  # a worker under valgrind sets up about this many times slower (its deadlines)

ProgressFn = Callable[[str], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class ExplainOptions:
    """How the profiling pass runs.

    Attributes:
        instrument: ``auto`` (torch's operators for a torch stage, else a sampling profiler),
            ``sampling``, ``torch``, or for ``--measure counts`` ``bytecodes`` (each Python function's
            bytecodes, exact) or ``callgrind`` (each C function's instructions: the workers run under
            valgrind, which sets them up about :data:`CALLGRIND_SCALE` times slower).
        seconds: seconds of calls per process and stage, in chunks of about :data:`CHUNK_SECONDS`.
        min_calls: the fewest calls a process profiles of a stage (one per chunk at least; for
            ``bytecodes``, exactly this many, in one chunk: counts need no interleaving).
        repeats: processes per side, each profiling every stage; the A/A floor needs two, and a
            third starts only where its set-up and every round still fit the budget (``_another_fits``;
            a torch model's workers on a busy machine: two).
        budget: seconds the whole pass may take; stages left when it is spent are not profiled.
    """

    instrument: str = "auto"
    seconds: float = 1.5
    min_calls: int = 3
    repeats: int = 3  # a function bimodal between processes lands alike on all of a side's 1 time in 32
    budget: float = DEFAULT_EXPLAIN_BUDGET

    def __post_init__(self) -> None:
        if self.instrument not in INSTRUMENTS:
            raise ValueError(f"instrument must be one of {', '.join(INSTRUMENTS)}, got {self.instrument!r}")
        if not 0 < self.seconds <= 3600 or not 0 < self.budget <= 86_400:
            raise ValueError(f"seconds and budget must be positive, got {self.seconds}, {self.budget}")
        if self.repeats < 2 or self.min_calls < 1:
            raise ValueError(f"repeats must be >= 2 and min_calls >= 1, got {self.repeats}, {self.min_calls}")


def explain_metrics(
    sides: tuple[Side, Side],
    options: ResidentOptions,
    metrics: Sequence[str],
    how: ExplainOptions,
    *,
    progress: ProgressFn | None = None,
) -> tuple[StageExplanation, ...]:
    """Profile the stages of ``metrics`` on both sides and explain each one's change.

    ``metrics`` are metric names or stage names; ``("*",)`` is every stage the workers set up.
    Never raises for what a profiling pass may meet (a worker that cannot profile, a profiler
    that is missing, the pass's budget spent, a worker that fails): each becomes the stage's
    one-line reason.
    """
    if not metrics:
        return ()
    scale = CALLGRIND_SCALE if how.instrument == "callgrind" else 1.0
    one = _Pass(sides, dataclasses.replace(options, time_budget=how.budget, deadline_scale=scale), how, progress)
    try:
        with Workers() as workers:
            one.start(workers, 1 if "*" in metrics else len(metrics))
            for metric in one.wanted(metrics):
                one.profile(metric)
            for worker in one.workers:
                worker.channel.close()
    finally:
        if one.out is not None:
            shutil.rmtree(one.out.parent, ignore_errors=True)
    return tuple(one.explained(m) for m in one.wanted(metrics))


@dataclass(slots=True)
class _Worker:
    name: str  # "A" (baseline) or "B" (current)
    side: Side
    channel: Channel
    chunks: dict[str, list[Profile]] = dataclasses.field(default_factory=dict)  # metric -> its chunks
    timed: dict[str, list[float]] = dataclasses.field(default_factory=dict)  # metric -> its calls timed bare


class _Pass:
    """One profiling pass: its workers, what each recorded, and why a stage was not profiled."""

    def __init__(
        self, sides: tuple[Side, Side], opts: ResidentOptions, how: ExplainOptions, progress: ProgressFn | None
    ) -> None:
        self.sides = dict(zip("AB", sides, strict=True))
        self.opts, self.how, self.progress = opts, how, progress
        self.started = time.monotonic()
        self.clock = _Clock(self.started, opts)
        self.workers: list[_Worker] = []
        self.known: dict[str, str] = {}  # metric -> stage, every stage both sides set up
        self.longest = 0.0  # seconds of the slowest round so far
        self.typical: dict[str, float] = {}  # metric -> the slowest side's typical seconds per call
        self.notes: dict[str, list[str]] = {}
        self.reasons: dict[str, str] = {}  # "*": every stage's
        self.rng = np.random.default_rng([opts.seed, PAIR_OFFSET])
        self.out: Path | None = None  # callgrind's output prefix, for workers under valgrind

    def left(self) -> float:
        return self.how.budget - (time.monotonic() - self.started)

    def say(self, what: str) -> None:
        if self.progress is not None:
            self.progress(what)

    def start(self, workers: Workers, stages_wanted: int = 1) -> None:
        """Start every worker (each side's in a drawn order) and set them all up; a failure is every stage's reason."""
        modules = {name: worker_module(side.path) for name, side in self.sides.items()}
        for name, module in modules.items():
            if module is None:
                self.reasons["*"] = f"the {self.sides[name].label} has no resident worker to profile with"
                return
        opts, started = self.opts, []
        under: list[str] = []
        if self.how.instrument == "callgrind":
            valgrind = shutil.which("valgrind")
            if valgrind is None:
                self.reasons["*"] = "not profiled under callgrind: valgrind is not installed (apt install valgrind)"
                return
            self.out = Path(tempfile.mkdtemp(prefix="perfgate-explain-")) / "callgrind.out"
            under = valgrind_argv(valgrind, self.out, self.out.parent / "valgrind.log")  # dumps: OUT.PID.N
        stages: list[dict[str, str]] = []
        try:
            for repeat in range(self.how.repeats):
                spent = time.monotonic() - self.started
                if repeat >= MIN_REPEATS and not self._another_fits(repeat, spent, stages_wanted):
                    budget = self.how.budget
                    self.notes["*"] = [f"{repeat} processes a side: their set-up took {spent:.0f} s of {budget:g} s"]
                    break
                pair = PAIR_OFFSET + repeat
                deadline = self.clock.deadline(opts.setup_floor)
                fresh = []
                for name in start_order(opts.seed, pair):
                    side, module = self.sides[name], modules[name]
                    assert module is not None
                    base = {**side.env, **(THREADS_ENV if under else {})}
                    env = draw(opts.seed, pair, name).env(base) if opts.randomise_layout else base
                    args = worker_args(module, randomise=opts.randomise_layout)
                    label = f"{side.label} profiling worker {repeat + 1}"
                    ch = workers.spawn(label, side.path, env, args, under=under)
                    _greet(ch, side, module, self.clock, deadline)
                    ch.send(setup_request(opts))
                    fresh.append(_Worker(name, side, ch))
                self.say(f"setting up profiling workers {repeat + 1} of both revisions")
                for w in fresh:  # a pair of workers sets up side by side
                    reply = _finish_setup(w.channel, self.clock, deadline)
                    if reply.get("ok") is not True:
                        raise PerfgateError(f"the {w.side.label} cannot be set up: {reply.get('error')}")
                    stages.append({str(s["metric"]): str(s["name"]) for s in reply.get("stages", [])})
                    for s in reply.get("stages", []):
                        typical = float(s.get("typical_s") or 0.0)
                        self.typical[str(s["metric"])] = max(self.typical.get(str(s["metric"]), 0.0), typical)
                started += fresh
        except PerfgateError as exc:
            self.reasons["*"] = f"not profiled: {exc}"
            return
        self.workers = started
        self.known = {m: st for m, st in stages[0].items() if all(other.get(m) == st for other in stages)}

    def _rounds(self) -> tuple[int, float]:
        """Rounds per stage and each worker's seconds of calls per round."""
        if self.how.instrument in EXACT:
            return 1, self.how.seconds
        rounds = max(self.how.min_calls, math.ceil(self.how.seconds / CHUNK_SECONDS))
        return rounds, self.how.seconds / rounds

    def _another_fits(self, repeat: int, spent: float, stages: int) -> bool:
        """Whether one more process a side still leaves every round of every stage its time: the set-ups so
        far plus one more at their mean, and the rounds at :data:`CHUNK_COST` per worker's chunk, within the
        budget (counts: while the set-ups so far took under :data:`MORE_REPEATS_SHARE` of it). More
        processes a side steady the floor; more rounds, every process's profile."""
        if self.how.instrument in EXACT:
            return spent <= MORE_REPEATS_SHARE * self.how.budget
        rounds, chunk = self._rounds()
        profiling = stages * rounds * 2 * (repeat + 1) * chunk * CHUNK_COST
        return spent + spent / repeat + profiling <= self.how.budget

    def wanted(self, targets: Sequence[str]) -> list[str]:
        """The metrics of ``targets`` (metric or stage names; ``*`` every stage), once each, in order."""
        by_stage = {stage: metric for metric, stage in self.known.items()}
        out: list[str] = []
        for target in targets:
            for metric in self.known if target == "*" else [by_stage.get(target, target)]:
                if metric not in out:
                    out.append(metric)
        return out

    def profile(self, metric: str) -> None:
        """The stage of ``metric`` profiled in rounds of chunks that go round every worker in a drawn order."""
        stage = self.known.get(metric)
        if "*" in self.reasons or stage is None:
            return  # explained() says why: every stage's reason, or no such stage on both sides
        how = self.how
        instrument = how.instrument
        exact = instrument in EXACT
        rounds, chunk = self._rounds()
        self.say(f"profiling {stage}: {rounds} round(s) over {len(self.workers)} workers")
        for r in range(rounds):
            # a round starts only where one as slow as the slowest so far (of any stage) still fits
            if self.left() <= 0 or self.left() < self.longest:
                self._spent(metric, r, rounds)
                return
            began = time.monotonic()
            this_round: list[tuple[_Worker, Profile, list[float]]] = []
            slowest = 0.0  # the slowest chunk of this round so far, its bare calls included
            for i in self.rng.permutation(len(self.workers)):
                w = self.workers[int(i)]
                if this_round and not exact and self.left() < slowest:
                    # the next chunk would end past the budget (a stage whose chunks cost more than the rounds
                    # before): the round is dropped whole, so that every worker's profile holds the same rounds
                    self._spent(metric, r, rounds)
                    return
                request = {
                    "op": "profile",
                    "stage": stage,
                    "instrument": instrument,
                    "seconds": chunk,
                    "min_calls": how.min_calls if exact else 1,
                    "warmup": 1 if r == 0 else 0,
                    "out": str(self.out) if self.out is not None else "",
                }
                asked = time.monotonic()
                got = self._ask(w, metric, request)
                if got is None:
                    return
                # counts are exact: their profiles' totals are the stage's counts, no bare calls needed
                this_round.append((w, got, [] if exact else self._time(w, metric, stage, chunk)))
                slowest = max(slowest, time.monotonic() - asked)
                if instrument == "auto":  # resolved once: every later chunk, on both sides, asks for it
                    instrument = next((ask for key, ask in CHOSEN if got.instrument.startswith(key)), "sampling")
            for w, got, timed in this_round:  # a whole round: every worker's chunk of it
                w.chunks.setdefault(metric, []).append(got)
                w.timed.setdefault(metric, []).extend(timed)
            self.longest = max(self.longest, time.monotonic() - began)

    def _spent(self, metric: str, done: int, rounds: int) -> None:
        """The budget ended the stage's profiling after ``done`` whole rounds: its reason, or a note."""
        spent = f"the profiling pass's {self.how.budget:g} s were spent"
        if done == 0:
            self.reasons[metric] = f"not profiled: {spent}"
        else:
            self.notes.setdefault(metric, []).append(f"{spent} after {done} of {rounds} rounds")

    def _time(self, w: _Worker, metric: str, stage: str, chunk: float) -> list[float]:
        """The stage's calls timed without a profiler, :data:`TIMED_SHARE` of a chunk's seconds (one call at
        least), right after the worker's chunk: what says whether the stage moved (:func:`explain`'s
        ``timed``). Empty when they could not be had; the profiles' totals then say it."""
        typical = self.typical.get(metric, 0.0)
        calls = max(1, min(MAX_TIMED_CALLS, round(TIMED_SHARE * chunk / typical))) if typical > 0 else 1
        try:
            reply = w.channel.request({"op": "time", "stage": stage, "calls": calls}, max(self.left(), 5.0) + 60.0)
        except WorkerFailed:
            return []
        seconds = reply.get("seconds") if reply.get("ok") is True else None
        return [float(x) for x in seconds] if isinstance(seconds, list) else []

    def _ask(self, w: _Worker, metric: str, request: Mapping[str, Any]) -> Profile | None:
        """One chunk from one worker; None (and the stage's reason) when it could not be had."""
        try:
            reply = w.channel.request(dict(request), max(self.left(), 5.0) + 60.0)  # a chunk's least calls may overrun
        except WorkerFailed as exc:
            self.reasons[metric] = f"not profiled: {exc}"
            return None
        if reply.get("ok") is not True:
            error = str(reply.get("error", "no answer"))
            if error.startswith("unknown op"):
                error = f"the {w.side.label}'s perfgate cannot profile (its worker has no profile op)"
            self.reasons[metric] = error if reply.get("missing") else f"not profiled: {error}"
            return None
        for line in reply.get("notes", []):
            if str(line) not in self.notes.setdefault(metric, []):
                self.notes[metric].append(str(line))
        try:
            return profile_from_record(_record(reply))
        except ValueError as exc:
            self.reasons[metric] = f"not profiled: the {w.side.label}'s worker sent a bad profile ({exc})"
            return None

    def explained(self, metric: str) -> StageExplanation:
        stage = self.known.get(metric, "")
        reason = self.reasons.get("*") or self.reasons.get(metric)
        if reason:
            return unavailable(stage, metric, reason)
        if not stage:
            return unavailable(stage, metric, "no stage of this metric is set up on both sides")
        sides: dict[str, list[Profile]] = {"A": [], "B": []}
        try:
            for w in self.workers:
                if w.chunks.get(metric):
                    sides[w.name].append(pooled(w.chunks[metric]))
        except ValueError as exc:
            return unavailable(stage, metric, f"not profiled alike: {exc}")
        if not sides["A"] or not sides["B"]:
            return unavailable(stage, metric, "not profiled on both sides")
        kinds = sorted({(p.instrument, p.unit) for p in (*sides["A"], *sides["B"])})
        if len(kinds) > 1:
            return unavailable(stage, metric, f"the two sides were profiled with different instruments: {kinds}")
        notes = [*self.notes.get("*", []), *self.notes.get(metric, [])]
        timed: dict[str, list[float]] = {"A": [], "B": []}
        for w in self.workers:
            if w.chunks.get(metric) and w.timed.get(metric):
                timed[w.name].append(float(np.median(w.timed[metric])))  # a process's time per call
        both = len(timed["A"]) == len(sides["A"]) and len(timed["B"]) == len(sides["B"])
        return explain(
            stage, metric, sides["A"], sides["B"], notes=notes, timed=(timed["A"], timed["B"]) if both else None
        )


def _record(reply: Mapping[str, Any]) -> Mapping[str, object]:
    record = reply.get("profile")
    if not isinstance(record, Mapping):
        raise ValueError("no profile object")
    return record
