"""One A/B check of two checked-out revisions: the engine chosen, the pairs measured, the paired decision.

The resident-worker engine (:mod:`perfgate.ab.resident`) measures and decides; when a side's
perfgate predates the resident worker (:class:`~perfgate.ab.resident.ProtocolMissing`), the
process-level engine (:mod:`perfgate.ab.fallback`) measures whole ``perfgate bench`` processes
instead and its runs are compared paired (``compare_runs(..., paired=True)``), the report
saying so. Either way the check gives the result and what the JSON report records about how
it was measured (:attr:`AbCheck.details`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from perfgate.ab.fallback import AbOptions, measure_interleaved
from perfgate.ab.resident import ProtocolMissing, ResidentOptions, ResidentOutcome, measure_resident
from perfgate.ab.revisions import Revision, sides
from perfgate.core.compare import CheckResult, compare_runs
from perfgate.core.policy import Policy

__all__ = ["AbCheck", "check_revisions"]

ProgressFn = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class AbCheck:
    """A check's result and, for the JSON report, the engine and how it measured."""

    result: CheckResult
    details: dict[str, object] = field(default_factory=dict)


def check_revisions(
    baseline: Revision,
    current: Revision,
    resident: ResidentOptions,
    fallback: AbOptions,
    policy: Policy,
    *,
    progress: ProgressFn,
) -> AbCheck:
    """Measure both revisions in resident workers, or process by process when a side's perfgate is too old.

    Raises:
        InputError: the fallback's perfgate lacks a flag that was asked for.
        PerfgateError: a worker or a measuring process failed, hung or could not import its revision.
    """
    try:
        outcome = measure_resident(sides(baseline, current), resident, policy, progress=progress)
    except ProtocolMissing as exc:
        progress(f"{exc}: measuring whole perfgate bench processes, alternating A B B A, instead")
        ab = measure_interleaved(baseline, current, fallback, progress=lambda w: progress(f"measured {w}"))
        source = f"{ab.describe()}. {exc}, so the older process-level design was used: far less sensitive"
        result = compare_runs(ab.baseline, ab.current, policy, paired=True, baseline_source=source)
        return AbCheck(result, {"engine": "process-level ABBA", "pairs": ab.pairs, "order": "".join(ab.order)})
    return AbCheck(outcome.result, _resident_details(outcome))


def _resident_details(outcome: ResidentOutcome) -> dict[str, object]:
    return {
        "engine": "resident workers",
        "pairs": outcome.pairs,
        "looks": list(outcome.looks),
        "planned_looks": list(outcome.schedule),
        "stopped": outcome.stopped,
        "pinned": outcome.pinned,
        "seconds": round(outcome.seconds, 1),  # the check's, against its time_budget plus grace
        "time_budget": outcome.time_budget,
        "grace": round(outcome.grace, 1),
        "seconds_per_pair": round(outcome.pair_seconds, 1),
        "slowest_pair_seconds": round(outcome.slowest_pair_seconds, 1),
        "pairs_cut": outcome.pairs_cut,
        "stages": list(outcome.plan),
        # null: a pair that did not measure the metric (its stage was decided at an earlier look)
        "pair_log_ratios": {
            f"{m} {st}": [round(x, 6) if math.isfinite(x) else None for x in v]
            for (m, st), v in outcome.log_ratios.items()
        },
        "blocks_per_pair": [dict(b) for b in outcome.pair_blocks],
        "focused_from_pair": outcome.focused_from,
        "derived": dict(outcome.derived),
        "layouts": list(outcome.layouts),
        # per stage and side: page faults and involuntary context switches a timed call (absent: not reported)
        "usage_per_call": {
            stage: {role: {k: round(v, 3) for k, v in d.items()} for role, d in sides.items()}
            for stage, sides in outcome.usage_per_call().items()
        },
        # per stage and pair: [baseline, current] minor faults a timed call; null where the pair did not
        # measure the stage or a side did not report them
        "minor_faults_per_pair": outcome.faults_per_pair(),
        "setup_seconds": [round(x, 2) for x in outcome.setup_seconds],
        "measure_seconds": [round(x, 2) for x in outcome.measure_seconds],
    }
