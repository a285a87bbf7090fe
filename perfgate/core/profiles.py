"""Where a stage's change went: profiles of both revisions and their difference.

A :class:`Profile` is what one profiler recorded of one stage in one process, as *folded
stacks*: each call path from the stage's root to a frame (``"run;features;rsi"``) with the
frame's *own* cost along that path, summed over the profiled calls. Every instrument gives
that form (a sampling profiler's tree, torch's operator tree, callgrind's functions with a
path of one, the interpreter's bytecodes per function), so one difference serves them all.

:func:`explain` compares the profiles of the baseline revision with those of the current one
(each side profiled at least twice, on the same work). Per function:

* *own* change: the change of its own cost per call (what it spent outside its callees);
* *inclusive* change: the change of everything spent while it was on the stack;
* *share*: its own change over the stage's whole change per call.

**The floor.** The same revision profiled twice never gives the same profile: a sampling
profiler draws its samples, a process draws its layout, a neighbour slows a minute. A process
or a minute slower as a whole moves every function alike, so each function is tested on its
*part* of the stage: its own cost over its process's *scale*, which such a shift leaves as it
was. The scale is the median, over the functions in every profile (for a sampling profiler,
in :data:`MIN_SAMPLES` samples of each), of the function's cost in that process over its
geometric mean across all the profiles (the median of ratios): a
process slower as a whole moves every ratio alike and so its scale, while a few functions
that took several times their cost in one process move only their own ratios. That is what
``torch.profiler`` does to a step's smallest operators (``aten::clamp_min``, ``aten::copy_``)
in some processes and not others, whatever the code: over the profile's total, their excess
would shrink every other operator's part with it, and a wider layer's ``aten::addmm`` would
stay under the spread it made. With fewer than :data:`MIN_COMMON` functions in every profile
the median is no reference, and the profile's total is the scale. With three profiles a side
or more, the costs as profiled (no scale) are the other reference a part can be taken over, and
the stage takes whichever gives the lesser pooled spread ``ρ`` between repeats: a profiler's own
cost per operator differs between processes (its smallest operators all 10-15 % dearer in some,
whose median then moves while ``aten::addmm`` does not), so a step's parts can agree better as
profiled. The choice is made once per stage, from the repeats within each side, never from the
difference between the sides. A function's part is taken
to vary between profiles of one revision with a variance ``ρ² · part² + resolution · part``: a
relative spread ``ρ`` pooled over the functions from the repeated profiles (their variances
over their squared means), less the functions that spread over :data:`OUTLYING` times the
typical one (an inflated operator, or a function seen in a handful of samples, does not widen
every floor), and, for a sampling profiler, the Poisson part of counting its samples.
Where a function's own part spreads more than that between repeats of one revision, its own
spread is taken. A function is *named* only when

* its part moved in the stage's direction by :data:`FLOOR_Z` standard errors of that difference;
* its own change explains at least :data:`MIN_SHARE` of the stage's change (the timed change,
  in the profile's units, where there is one);
* the stage's change itself stands above :data:`STAGE_Z` standard errors of its spread between
  repeats (a share of a change that is only noise names noise): its calls timed without a
  profiler in the same processes where the pass timed them (a profiler's own cost differs
  between processes, and on a torch step is most of the profiled time), else its profiled
  totals; or, for a tracer (no sampling), the function is in every profile of one side and in
  none of the other's: an operator the change added, which torch's profiler sees or not
  whatever the noise of the stage's total. Where the stage's timed calls moved the way such an
  operator does, it needs no z at all: a small operator that the profiler inflates in some
  processes (``aten::native_layer_norm`` on DQN's step: 54, 78 and 121 µs in three processes of
  one revision) spreads too much for one, yet is there only by the code.

On identical code (an A/A check) nothing should pass; ``benchmarks/explain.py`` measures that.
When every function moved alike, nothing is named and the explanation says so. When the named
functions together explain less than :data:`THIN_SHARE` of the change, it is *spread thin* and
the explanation says so instead of naming what is left. A function bimodal between processes
(a dict whose speed follows the hash seed) can be named when each side's processes happen to
draw alike and the two sides differently: the more processes a side, the rarer.

Pure: no clock, no files. The profilers that fill :class:`Profile` are :mod:`perfgate.profile`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "FLOOR_Z",
    "MIN_COMMON",
    "MIN_SAMPLES",
    "MIN_SHARE",
    "OUTLYING",
    "THIN_SHARE",
    "Contributor",
    "Profile",
    "StageExplanation",
    "explain",
    "merged_stacks",
    "pooled",
    "profile_from_record",
    "profile_record",
    "unavailable",
]

SEPARATOR = ";"  # between the frames of a folded stack
FLOOR_Z = 4.0  # standard errors of the A/A spread a function's change must pass to be named
MIN_SHARE = 0.10  # of the stage's change, the least a named function explains
STAGE_Z = 1.0  # standard errors the stage's own profiled change must pass before any function is named
THIN_SHARE = 0.25  # the named functions together explain less: the change is spread thin
TOP = 5  # rows of the table kept
MIN_RHO = 0.01  # the least relative spread between two profiles of one revision (1 %)
# a function whose relative spread between repeats is over this many times the typical function's is left out
# of the pooled spread rho, and held to its own
OUTLYING = 3.0
MIN_COMMON = 5  # functions in every profile the median of ratios needs to be a process's scale
MIN_SAMPLES = 100  # a sampling profiler's samples of a function in every profile, for its ratio to count
_TINY = 1e-300  # a total of nothing (an empty profile): its parts are 0, not a division by zero
STACKS_KEPT = 400  # folded stacks kept per side for the flame graph (the costliest)


@dataclass(frozen=True, slots=True, kw_only=True)
class Profile:
    """One profiler's record of one stage in one process.

    ``stacks`` maps a folded stack (frames from the root, joined by ``;``) to the own cost of
    its last frame along that path, summed over ``calls`` calls of the stage, in ``unit``.
    ``where`` gives a frame's file and line (``"stages.py:12"``) where the profiler knows it.
    ``resolution`` is a sampling profiler's interval in ``unit`` (0 for an exact count).
    """

    instrument: str
    unit: str
    calls: int
    stacks: Mapping[str, float]
    where: Mapping[str, str] = field(default_factory=dict)
    resolution: float = 0.0

    def __post_init__(self) -> None:
        if self.calls < 1:
            raise ValueError(f"Profile.calls must be at least 1, got {self.calls}")
        if self.resolution < 0 or not math.isfinite(self.resolution):
            raise ValueError(f"Profile.resolution must be finite and not negative, got {self.resolution}")
        for stack, cost in self.stacks.items():
            if not stack or not math.isfinite(cost) or cost < 0:
                raise ValueError(f"Profile.stacks: a cost must be finite and not negative, got {stack!r}: {cost}")

    def own(self) -> dict[str, float]:
        """Each frame's own cost per call, summed over the paths it ends."""
        out: dict[str, float] = {}
        for stack, cost in self.stacks.items():
            leaf = stack.rsplit(SEPARATOR, 1)[-1]
            out[leaf] = out.get(leaf, 0.0) + cost / self.calls
        return out

    def inclusive(self) -> dict[str, float]:
        """Each frame's inclusive cost per call: every path it is on, counted once per path (recursion)."""
        out: dict[str, float] = {}
        for stack, cost in self.stacks.items():
            for frame in set(stack.split(SEPARATOR)):
                out[frame] = out.get(frame, 0.0) + cost / self.calls
        return out

    def total(self) -> float:
        return sum(self.stacks.values()) / self.calls


@dataclass(frozen=True, slots=True, kw_only=True)
class Contributor:
    """One function's part in a stage's change, per call of the stage, in the profiles' unit."""

    name: str
    where: str
    own_baseline: float
    own_current: float
    inclusive_baseline: float
    inclusive_current: float
    share: float  # own change over the stage's change (signed: negative works against it)
    z: float  # own change over its standard error from the A/A spread
    named: bool  # beyond the floor and at least MIN_SHARE of the change

    @property
    def own_change(self) -> float:
        return self.own_current - self.own_baseline

    @property
    def inclusive_change(self) -> float:
        return self.inclusive_current - self.inclusive_baseline


@dataclass(frozen=True, slots=True, kw_only=True)
class StageExplanation:
    """Where one stage's change went, or why that could not be told (``reason``)."""

    stage: str
    metric: str
    instrument: str = ""
    unit: str = ""
    profiles: tuple[int, int] = (0, 0)  # profiles per side
    calls: tuple[int, int] = (0, 0)  # stage calls per profile, per side
    baseline_total: float = 0.0  # the stage's profiled cost per call
    current_total: float = 0.0
    rho: float = 0.0  # relative spread of a function's part of the stage between two profiles of one revision
    moved: bool = False  # the stage's change stands above the spread of its own repeats
    # the stage's calls timed without a profiler beside the profiles, per process: current over baseline - 1
    timed_change: float | None = None
    contributors: tuple[Contributor, ...] = ()  # the TOP largest own changes, named or not
    spread_thin: bool = False
    reason: str = ""  # set when nothing could be profiled; the rest is then empty
    notes: tuple[str, ...] = ()  # what the instrument could not see (one line each)
    stacks_baseline: Mapping[str, float] = field(default_factory=dict)  # per call, for the flame graph
    stacks_current: Mapping[str, float] = field(default_factory=dict)

    @property
    def available(self) -> bool:
        return not self.reason

    @property
    def change(self) -> float:
        return self.current_total - self.baseline_total

    @property
    def named(self) -> tuple[Contributor, ...]:
        return tuple(c for c in self.contributors if c.named)

    @property
    def explained(self) -> float:
        """The share of the stage's change the named functions explain together."""
        return sum(c.share for c in self.named)

    def summary(self) -> str:
        """One line: what the profiles name, or why they name nothing."""
        if self.reason:
            return self.reason
        if not self.named and self.moved and self.baseline_total > 0:
            together = self.timed_change if self.timed_change is not None else self.change / self.baseline_total
            return (
                f"the stage's functions moved alike ({together:+.0%} together): no function's "
                "part of it changed beyond the spread of the same revision profiled twice"
            )
        if not self.named:
            return (
                "no function's change stands above the spread of the same revision profiled twice "
                f"({self.rho:.0%} of a function's part between two profiles)"
            )
        top = self.named[0]
        line = f"{top.name} explains {top.share:.0%} of the change"
        if self.spread_thin:
            line += f"; the change is spread thin: the named functions explain {self.explained:.0%} of it"
        return line


def unavailable(stage: str, metric: str, reason: str) -> StageExplanation:
    """A stage that could not be profiled, with the one-line reason."""
    return StageExplanation(stage=stage, metric=metric, reason=reason)


def _mean(maps: Sequence[Mapping[str, float]], key: str) -> float:
    return statistics.fmean(m.get(key, 0.0) for m in maps)


def _rho(sides: Sequence[Sequence[Mapping[str, float]]], resolutions: Sequence[float]) -> float:
    """The relative spread of a function's part of the stage between profiles of one revision, pooled.

    The functions' variances between repeats, less what sampling alone explains, over the sum of
    their squared means: the functions that hold the stage's time set the typical spread. Left out
    of the pool are the functions whose relative spread is over :data:`OUTLYING` times the typical
    one (the median over functions, each weighted by its part): an operator whose profiled cost
    jumps several-fold in some processes, or a function seen in a handful of samples (present in
    one profile, absent in the next), does not widen every floor; its own spread still guards it
    (:func:`explain`). Never below :data:`MIN_RHO`.
    """
    spreads: list[tuple[float, float, float]] = []  # (relative variance, excess variance, mean)
    for profiles, resolution in zip(sides, resolutions, strict=True):
        if len(profiles) < 2:
            continue
        for key in set().union(*profiles):
            values = [p.get(key, 0.0) for p in profiles]
            mean = statistics.fmean(values)
            if mean <= 0:
                continue
            excess = max(statistics.variance(values) - resolution * mean, 0.0)
            spreads.append((excess / mean**2, excess, mean))
    if not spreads:
        return MIN_RHO
    spreads.sort()
    half, seen, typical = sum(m for *_, m in spreads) / 2, 0.0, spreads[-1][0]
    for relative, _excess, mean in spreads:
        seen += mean
        if seen >= half:
            typical = relative
            break
    kept = [(excess, mean) for relative, excess, mean in spreads if relative <= OUTLYING**2 * typical]
    return max(math.sqrt(sum(e for e, _ in kept) / sum(m**2 for _, m in kept)), MIN_RHO)


def _scales(owns: Sequence[Mapping[str, float]], totals: Sequence[float], floors: Sequence[float]) -> list[float]:
    """Each profile's scale: the median of ratios over the functions in every profile, else its total.

    A function's ratio in a profile is its own cost there over its geometric mean across all the
    profiles (both sides); a profile's scale is the median of its ratios (module docstring). Only
    functions above each profile's floor count (a sampling profiler's :data:`MIN_SAMPLES` samples:
    a function seen in a few samples has a ratio of chance). With fewer than :data:`MIN_COMMON`
    such functions the median is no reference: the totals are the scales, and a part is the
    function's share of its profile.
    """
    common = [
        k for k in set(owns[0]).intersection(*owns[1:]) if all(m[k] > f for m, f in zip(owns, floors, strict=True))
    ]
    if len(common) < MIN_COMMON:
        return [max(t, _TINY) for t in totals]
    logs = {k: [math.log(m[k]) for m in owns] for k in common}
    centre = {k: statistics.fmean(v) for k, v in logs.items()}
    return [math.exp(statistics.median(logs[k][i] - centre[k] for k in common)) for i in range(len(owns))]


def _appeared(key: str, a: Sequence[Mapping[str, float]], b: Sequence[Mapping[str, float]]) -> bool:
    """In every profile of one side and in none of the other's, two profiles a side at least: an operator
    the change added (or removed), which counts even where the stage's total is too noisy to tell."""
    if len(a) < 2 or len(b) < 2:
        return False
    in_a = [m.get(key, 0.0) > 0 for m in a]
    in_b = [m.get(key, 0.0) > 0 for m in b]
    return (all(in_b) and not any(in_a)) or (all(in_a) and not any(in_b))


def _parts(own: Mapping[str, float], scale: float) -> dict[str, float]:
    return {k: v / scale for k, v in own.items()}


def _spread(a: Sequence[float], b: Sequence[float]) -> float:
    """The variance of one profile's value between repeats of one revision, pooled over both sides
    (each side about its own mean); 0 with one profile a side."""
    df = max(len(a) - 1, 0) + max(len(b) - 1, 0)
    if df == 0:
        return 0.0
    ss = sum((x - statistics.fmean(side)) ** 2 for side in (a, b) if len(side) > 1 for x in side)
    return ss / df


def _moved(a: Sequence[float], b: Sequence[float]) -> tuple[bool, float]:
    """Whether a stage's cost per process moved between sides beyond :data:`STAGE_Z` standard errors of
    its spread between processes of one revision, and its change of log; on a log scale, where a
    process slower by a factor is one spread whatever the stage's size."""
    logs = [[math.log(max(t, _TINY)) for t in side] for side in (a, b)]
    var_log = max(MIN_RHO**2, _spread(*logs)) * (1 / len(a) + 1 / len(b))
    log_change = statistics.fmean(logs[1]) - statistics.fmean(logs[0])
    return abs(log_change) >= STAGE_Z * math.sqrt(var_log), log_change


def explain(
    stage: str,
    metric: str,
    baseline: Sequence[Profile],
    current: Sequence[Profile],
    *,
    notes: Sequence[str] = (),
    timed: tuple[Sequence[float], Sequence[float]] | None = None,
) -> StageExplanation:
    """The difference of two revisions' profiles of one stage (module docstring).

    ``timed``: the stage's seconds per call timed without a profiler in each profiled process
    (baseline's, current's), beside its profiles. Where given, they, not the profiled totals, say
    whether and which way the stage moved, and a share is of the change they measured (in the
    profile's units): a profiler's own cost, which differs between processes, then blurs neither.

    Raises:
        ValueError: no profile on a side, or profiles of different instruments or units, or a
            timed side empty or not positive.
    """
    if not baseline or not current:
        raise ValueError("explain needs at least one profile of each revision")
    kinds = {(p.instrument, p.unit) for p in (*baseline, *current)}
    if len(kinds) != 1:
        raise ValueError(f"explain needs profiles of one instrument and unit, got {sorted(kinds)}")
    ((instrument, unit),) = kinds
    own_a = [p.own() for p in baseline]
    own_b = [p.own() for p in current]
    inc_a = [p.inclusive() for p in baseline]
    inc_b = [p.inclusive() for p in current]
    totals = ([p.total() for p in baseline], [p.total() for p in current])
    total_a, total_b = statistics.fmean(totals[0]), statistics.fmean(totals[1])
    change = total_b - total_a
    # each function's part: its own cost over its process's scale, so that a process (or a minute) faster or
    # slower as a whole moves no function's part; the scales put in the profiles' units (the baseline's mean
    # total over its scales), so that a part is a share of the stage and a sampler's resolution applies to it
    floors = [MIN_SAMPLES * p.resolution / p.calls for p in (*baseline, *current)]
    scales = _scales([*own_a, *own_b], [*totals[0], *totals[1]], floors)
    unit_scale = statistics.fmean(t / x for t, x in zip(totals[0], scales[: len(own_a)], strict=True))
    scales = [x * max(unit_scale, _TINY) for x in scales]
    res_a = statistics.fmean(p.resolution / p.calls / max(p.total(), _TINY) for p in baseline)
    res_b = statistics.fmean(p.resolution / p.calls / max(p.total(), _TINY) for p in current)
    # two references a part can be taken over: the processes' scales, or none (the cost as profiled, over the
    # baseline's mean total); the one whose repeats agree best (the lesser pooled spread) is taken, a choice
    # made once for the stage from the repeats within each side, never from the difference between the sides;
    # with two profiles a side, a pooled spread of two degrees of freedom per function is too rough to choose by
    n = len(own_a)
    choices = []
    references = [scales] if min(len(own_a), len(own_b)) < 3 else [scales, [max(total_a, _TINY)] * len(scales)]
    for ref in references:
        ca_ = [_parts(m, x) for m, x in zip(own_a, ref[:n], strict=True)]
        cb_ = [_parts(m, x) for m, x in zip(own_b, ref[n:], strict=True)]
        choices.append((_rho((ca_, cb_), (res_a, res_b)), ca_, cb_))
    rho, comp_a, comp_b = min(choices, key=lambda c: c[0])
    where: dict[str, str] = {}
    for p in (*baseline, *current):
        where.update(p.where)
    # the stage's own change must stand above its spread before any share of it is told: timed without a
    # profiler where the pass timed it, else profiled
    timed_change = None
    if timed is not None:
        if not timed[0] or not timed[1] or min(*timed[0], *timed[1]) <= 0:
            raise ValueError("explain's timed calls need a positive time per call on each side")
        stage_moved, log_change = _moved(timed[0], timed[1])
        timed_change = math.expm1(log_change)
        change = total_a * timed_change  # the measured change, in the profile's units
    else:
        stage_moved, _ = _moved(totals[0], totals[1])
    sign = 1.0 if change >= 0 else -1.0
    traced = all(p.resolution == 0 for p in (*baseline, *current))
    rows: list[Contributor] = []
    for key in set().union(*own_a, *own_b):
        a, b = _mean(own_a, key), _mean(own_b, key)
        ca, cb = _mean(comp_a, key), _mean(comp_b, key)
        # the variance of each side's mean part: the relative spread, pooled or this function's own between
        # repeats when that is larger, and the sampling count of each profile
        seen = _spread([m.get(key, 0.0) for m in comp_a], [m.get(key, 0.0) for m in comp_b])
        var = (max(rho**2 * ca**2, seen) + res_a * ca) / len(comp_a) + (max(rho**2 * cb**2, seen) + res_b * cb) / len(
            comp_b
        )
        diff = cb - ca  # its part grew (or shrank) beyond what the whole stage did
        z = diff / math.sqrt(var) if var > 0 else (math.copysign(math.inf, diff) if diff else 0.0)
        share = (b - a) / change if change else 0.0
        # a function a tracer (no sampling: resolution 0) sees on one side only is there or not by the code
        appeared = traced and _appeared(key, own_a, own_b)
        # an operator the change added (or removed) where the stage moved that way is named on its share alone:
        # its presence is the code's, and its own spread (a small operator the profiler inflates in some
        # processes, as it does layer_norm's) says nothing of whether it is there
        added = appeared and stage_moved and sign * diff > 0
        named = share >= MIN_SHARE and (added or ((stage_moved or appeared) and sign * z >= FLOOR_Z))
        rows.append(
            Contributor(
                name=key,
                where=where.get(key, ""),
                own_baseline=a,
                own_current=b,
                inclusive_baseline=_mean(inc_a, key),
                inclusive_current=_mean(inc_b, key),
                share=share,
                z=z,
                named=named,
            )
        )
    # the largest own changes in the stage's direction first; a tie (exact counts) by name
    rows.sort(key=lambda c: (-sign * c.own_change, c.name))
    top = tuple(rows[:TOP])
    named_share = sum(c.share for c in rows if c.named)
    return StageExplanation(
        stage=stage,
        metric=metric,
        instrument=instrument,
        unit=unit,
        profiles=(len(baseline), len(current)),
        calls=(baseline[0].calls, current[0].calls),
        baseline_total=total_a,
        current_total=total_b,
        rho=rho,
        moved=stage_moved,
        timed_change=timed_change,
        contributors=top,
        spread_thin=any(c.named for c in rows) and named_share < THIN_SHARE,
        notes=tuple(notes),
        stacks_baseline=merged_stacks(baseline),
        stacks_current=merged_stacks(current),
    )


def merged_stacks(profiles: Sequence[Profile], keep: int = STACKS_KEPT) -> dict[str, float]:
    """The side's folded stacks, per call and averaged over its profiles, the ``keep`` costliest
    kept (what a flame graph draws; the rest is too thin to see)."""
    out: dict[str, float] = {}
    for p in profiles:
        for stack, cost in p.stacks.items():
            out[stack] = out.get(stack, 0.0) + cost / p.calls / len(profiles)
    kept = sorted(out.items(), key=lambda kv: (-kv[1], kv[0]))[:keep]
    return dict(sorted(kept))


def pooled(chunks: Sequence[Profile]) -> Profile:
    """One process's profiles of one stage taken in chunks (interleaved with the other side's), as one.

    Raises:
        ValueError: no chunk, or chunks of different instruments or units.
    """
    if not chunks:
        raise ValueError("pooled needs at least one profile")
    kinds = {(p.instrument, p.unit, p.resolution) for p in chunks}
    if len(kinds) != 1:
        raise ValueError(f"pooled needs profiles of one instrument, unit and resolution, got {sorted(kinds)}")
    stacks: dict[str, float] = {}
    where: dict[str, str] = {}
    for p in chunks:
        for stack, cost in p.stacks.items():
            stacks[stack] = stacks.get(stack, 0.0) + cost
        where.update(p.where)
    first = chunks[0]
    return Profile(
        instrument=first.instrument,
        unit=first.unit,
        calls=sum(p.calls for p in chunks),
        stacks=stacks,
        where=where,
        resolution=first.resolution,
    )


def profile_record(profile: Profile) -> dict[str, object]:
    """A profile as JSON-ready values (the resident worker's ``profile`` reply)."""
    return {
        "instrument": profile.instrument,
        "unit": profile.unit,
        "calls": profile.calls,
        "stacks": dict(profile.stacks),
        "where": dict(profile.where),
        "resolution": profile.resolution,
    }


def profile_from_record(record: Mapping[str, object]) -> Profile:
    """The inverse of :func:`profile_record`.

    Raises:
        ValueError: a field is missing or of the wrong type (the message names it).
    """
    try:
        stacks = record["stacks"]
        where = record.get("where", {})
        if not isinstance(stacks, Mapping) or not isinstance(where, Mapping):
            raise ValueError("stacks and where must be objects")
        calls = record["calls"]
        resolution = record.get("resolution", 0.0)
        if not isinstance(calls, int) or not isinstance(resolution, int | float):
            raise ValueError("calls must be an integer and resolution a number")
        return Profile(
            instrument=str(record["instrument"]),
            unit=str(record["unit"]),
            calls=calls,
            stacks={str(k): float(v) for k, v in stacks.items()},
            where={str(k): str(v) for k, v in where.items()},
            resolution=float(resolution),
        )
    except KeyError as exc:
        raise ValueError(f"a profile record lacks the field {exc.args[0]!r}") from None
