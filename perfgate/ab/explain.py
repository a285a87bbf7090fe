"""Where a stage's change went: both revisions profiled on the same work, after the decision.

For each stage to explain, fresh resident workers of both revisions (:mod:`perfgate.ab.worker`,
each with its own drawn memory layout, as the measured pairs have) set the stages up as the
check did and answer a ``profile`` request: that stage's calls under a profiler
(:mod:`perfgate.profile`). Each side is profiled in :attr:`ExplainOptions.repeats` separate
processes, so that the spread between two profiles of one revision (sampling, layout,
neighbour) is measured, and :func:`perfgate.core.profiles.explain` names only what stands
above it.

The pass runs after the check has decided, never during its measured blocks, and within its
own time budget (:attr:`ExplainOptions.budget`): when that is spent, the stages not yet
profiled say so. A revision whose worker predates the ``profile`` op, or a profiler that is not
installed, gives one line instead of a table; the verdict never depends on this pass.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from perfgate.ab._plan import ResidentOptions, Side, setup_request
from perfgate.ab._schedule import _Clock, _finish_setup, _greet
from perfgate.ab.layout import draw, start_order, worker_args
from perfgate.ab.workers import Channel, WorkerFailed, Workers, worker_module
from perfgate.core.profiles import Profile, StageExplanation, explain, profile_from_record, unavailable
from perfgate.errors import PerfgateError

__all__ = ["DEFAULT_EXPLAIN_BUDGET", "ExplainOptions", "explain_metrics"]

DEFAULT_EXPLAIN_BUDGET = 60.0  # seconds the profiling pass may add to a check
PAIR_OFFSET = 10_000  # layouts of the profiling processes: drawn apart from the measured pairs'

ProgressFn = Callable[[str], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class ExplainOptions:
    """How the profiling pass runs.

    Attributes:
        instrument: ``auto`` (torch's operators for a torch stage, else a sampling profiler),
            ``sampling``, ``torch`` or ``bytecodes`` (exact counts, for ``--measure counts``).
        seconds: seconds of calls per profile (at least ``min_calls`` calls).
        min_calls: the fewest calls a profile takes.
        repeats: processes per side, each profiling every stage once (the A/A floor needs two).
        budget: seconds the whole pass may take; stages left when it is spent are not profiled.
    """

    instrument: str = "auto"
    seconds: float = 1.5
    min_calls: int = 3
    repeats: int = 2
    budget: float = DEFAULT_EXPLAIN_BUDGET

    def __post_init__(self) -> None:
        if self.instrument not in ("auto", "sampling", "torch", "bytecodes"):
            raise ValueError(f"instrument must be auto, sampling, torch or bytecodes, got {self.instrument!r}")
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
    one = _Pass(sides, dataclasses.replace(options, time_budget=how.budget), how, progress)
    with Workers() as workers:
        for repeat in range(how.repeats):
            pair = PAIR_OFFSET + repeat
            for name in start_order(options.seed, pair):
                one.profile_side(workers, name, pair, metrics)
    return tuple(one.explained(m) for m in one.wanted(metrics))


class _Pass:
    """One profiling pass: what each side's processes recorded, and why a stage was not profiled."""

    def __init__(
        self, sides: tuple[Side, Side], opts: ResidentOptions, how: ExplainOptions, progress: ProgressFn | None
    ) -> None:
        self.sides = dict(zip("AB", sides, strict=True))
        self.modules = {name: worker_module(side.path) for name, side in self.sides.items()}
        self.opts, self.how, self.progress = opts, how, progress
        self.started = time.monotonic()
        self.clock = _Clock(self.started, opts)
        self.stages: dict[str, str] = {}  # metric -> stage, of the stages profiled
        self.known: dict[str, str] = {}  # metric -> stage, every stage a worker set up
        self.profiles: dict[str, dict[str, list[Profile]]] = {}
        self.notes: dict[str, list[str]] = {}
        self.reasons: dict[str, str] = {}  # "*": every stage's

    def left(self) -> float:
        return self.how.budget - (time.monotonic() - self.started)

    def profile_side(self, workers: Workers, name: str, pair: int, metrics: Sequence[str]) -> None:
        side, module = self.sides[name], self.modules[name]
        if "*" in self.reasons:
            return
        if module is None:
            self.reasons["*"] = f"the {side.label} has no resident worker to profile with"
            return
        if self.left() <= 0:
            for metric in metrics:
                self.reasons.setdefault(metric, f"not profiled: the profiling pass's {self.how.budget:g} s were spent")
            return
        try:
            ch, known = self._start(workers, side, module, pair, name)
        except PerfgateError as exc:
            self.reasons["*"] = f"not profiled: {exc}"
            return
        self.known.update(known)
        try:
            for metric in self.wanted(metrics):
                stage = known.get(metric)
                if stage is not None and metric not in self.reasons:  # a derived rate or memory has no stage
                    self.stages.setdefault(metric, stage)
                    self._profile(ch, side, name, metric, stage)
        finally:
            ch.close()

    def wanted(self, targets: Sequence[str]) -> list[str]:
        """The metrics of ``targets`` (metric or stage names; ``*`` every stage), once each, in order."""
        by_stage = {stage: metric for metric, stage in self.known.items()}
        out: list[str] = []
        for target in targets:
            for metric in self.known if target == "*" else [by_stage.get(target, target)]:
                if metric not in out:
                    out.append(metric)
        return out

    def _start(self, workers: Workers, side: Side, module: str, pair: int, name: str) -> tuple[Channel, dict[str, str]]:
        opts = self.opts
        layout = draw(opts.seed, pair, name) if opts.randomise_layout else None
        env = layout.env(side.env) if layout is not None else dict(side.env)
        ch = workers.spawn(
            f"{side.label} profiling worker", side.path, env, worker_args(module, randomise=opts.randomise_layout)
        )
        deadline = self.clock.deadline(opts.setup_floor)
        _greet(ch, side, module, self.clock, deadline)
        ch.send(setup_request(opts))
        reply = _finish_setup(ch, self.clock, deadline)
        if reply.get("ok") is not True:
            ch.kill()
            raise PerfgateError(f"the {side.label} cannot be set up: {reply.get('error')}")
        return ch, {str(s["metric"]): str(s["name"]) for s in reply.get("stages", [])}

    def _profile(self, ch: Channel, side: Side, name: str, metric: str, stage: str) -> None:
        left = self.left()
        if left <= 0:
            self.reasons[metric] = f"not profiled: the profiling pass's {self.how.budget:g} s were spent"
            return
        if self.progress is not None:
            self.progress(f"profiling {stage} on the {side.label}")
        request = {
            "op": "profile",
            "stage": stage,
            "instrument": self.how.instrument,
            "seconds": min(self.how.seconds, max(left / 4, 0.05)),
            "min_calls": self.how.min_calls,
        }
        try:
            reply = ch.request(request, max(left, 5.0) + 60.0)  # a profile's least calls may overrun the pass
        except WorkerFailed as exc:
            self.reasons[metric] = f"not profiled: {exc}"
            return
        if reply.get("ok") is not True:
            error = str(reply.get("error", "no answer"))
            if error.startswith("unknown op"):
                error = f"the {side.label}'s perfgate cannot profile (its worker has no profile op)"
            self.reasons[metric] = error if reply.get("missing") else f"not profiled: {error}"
            return
        try:
            profile = profile_from_record(_record(reply))
        except ValueError as exc:
            self.reasons[metric] = f"not profiled: the {side.label}'s worker sent a bad profile ({exc})"
            return
        self.profiles.setdefault(metric, {"A": [], "B": []})[name].append(profile)
        for line in reply.get("notes", []):
            if str(line) not in self.notes.setdefault(metric, []):
                self.notes[metric].append(str(line))

    def explained(self, metric: str) -> StageExplanation:
        stage = self.stages.get(metric, "")
        reason = self.reasons.get(metric) or self.reasons.get("*")
        if reason:
            return unavailable(stage, metric, reason)
        got = self.profiles.get(metric, {"A": [], "B": []})
        if not stage:
            return unavailable(stage, metric, "no stage of this metric is set up on both sides")
        if not got["A"] or not got["B"]:
            return unavailable(stage, metric, "not profiled on both sides")
        kinds = sorted({(p.instrument, p.unit) for p in (*got["A"], *got["B"])})
        if len(kinds) > 1:  # "auto" chose torch on one side and the sampling profiler on the other
            return unavailable(stage, metric, f"the two sides were profiled with different instruments: {kinds}")
        notes = list(self.notes.get(metric, []))
        if len(got["A"]) < 2 and len(got["B"]) < 2:
            notes.append("one profile a side: the floor is the least relative spread, not a measured one")
        return explain(stage, metric, got["A"], got["B"], notes=notes)


def _record(reply: Mapping[str, Any]) -> Mapping[str, object]:
    record = reply.get("profile")
    if not isinstance(record, Mapping):
        raise ValueError("no profile object")
    return record
