"""The regression decision: a current run against its baseline, metric by metric.

:func:`compare_runs` checks that the two runs can be compared, decides every metric
(:func:`perfgate.core.decision.prepare`: the estimate, the test with the run-to-run noise, Holm's
correction and the verdict), evaluates the budgets (:func:`perfgate.core.decision.check_budgets`) and lists
the gated metrics the current run lacks. The result types are in :mod:`perfgate.core.result`.

A derived metric (a throughput: the batch over the time of the same calls,
:mod:`perfgate.core._derived`) is decided with the test of the metric it is derived from and
counts once in the family, by the rule the paired gate of ``perfgate ab`` shares
(:func:`perfgate.core.decision.holm_family`). The per-metric statistics of a whole check are computed at once
over numpy matrices (:class:`~perfgate.core.decision.BatchStats`); ``vectorised=False``
computes them one metric at a time, the reference the fast path is tested against.
"""

from __future__ import annotations

import dataclasses

from perfgate.core._derived import derived_metrics
from perfgate.core.benchmark_names import align
from perfgate.core.decision import (
    BatchStats,
    ReferenceStats,
    SampleStats,
    Sides,
    check_budgets,
    counts_budget_note,
    is_counts_run,
    pooled_residues,
    prepare,
    sides_of,
    unmatched,
)
from perfgate.core.metrics import Direction
from perfgate.core.noise import independent_runs
from perfgate.core.policy import Policy
from perfgate.core.result import BudgetCheck, CheckResult, Comparison, Verdict
from perfgate.core.schema import Metric, Run
from perfgate.errors import MismatchError

__all__ = [
    "BudgetCheck",
    "CheckResult",
    "Comparison",
    "Verdict",
    "budgets_only",
    "check_budgets",
    "compare_runs",
    "missing_gated",
]


def _check_comparable(baseline: Run, current: Run, allow_machine_mismatch: bool) -> bool:
    """Raise when the runs cannot be compared; return whether their machines differ (allowed)."""
    if baseline.model_key != current.model_key:
        raise MismatchError(
            f"baseline is of model {baseline.model!r}, current run of {current.model!r}; "
            "compare runs of the same model (each model has its own baseline)"
        )
    fp_base, fp_cur = baseline.machine.fingerprint, current.machine.fingerprint
    mismatch = bool(fp_base and fp_cur and fp_base != fp_cur)
    if mismatch and not allow_machine_mismatch:
        raise MismatchError(
            f"baseline was measured on machine {fp_base}, current run on {fp_cur}; timings do not "
            "carry across machines. Record a baseline on this machine, or pass --allow-machine-mismatch"
        )
    if not allow_machine_mismatch:
        _check_speed(baseline, current)
    if is_counts_run(baseline) != is_counts_run(current):
        counted, timed = ("baseline", "current run") if is_counts_run(baseline) else ("current run", "baseline")
        raise MismatchError(
            f"the {counted} holds counts (perfgate bench --measure counts) and the {timed} times; counts are not "
            "times: compare counts with counts (a baseline recorded with --measure counts) and times with times"
        )
    for name, cur in current.metrics.items():
        base = baseline.metrics.get(name)
        if base is not None and (base.unit != cur.unit or base.direction is not cur.direction):
            raise MismatchError(
                f"metric {name!r} is {base.unit}/{base.direction.value} in the baseline and "
                f"{cur.unit}/{cur.direction.value} now; re-record the baseline"
            )
    return mismatch


# the most the reference kernels may have moved between two runs for a check to correct it: past
# this, stages follow their kernels too loosely (docs/noise.md §4) for any interval to mean much
MAX_INDEX_RATIO = 2.0


def _check_speed(baseline: Run, current: Run) -> None:
    """Raise when the machine-speed index moved more than a check can correct (one line, said once)."""
    worst: tuple[float, str, float, float] | None = None
    for kind, before in baseline.machine_index.items():
        after = current.machine_index.get(kind)
        if after is None or before <= 0 or after <= 0:
            continue
        ratio = max(before / after, after / before)
        if worst is None or ratio > worst[0]:
            worst = (ratio, kind, before, after)
    if worst is None or worst[0] <= MAX_INDEX_RATIO:
        return
    ratio, kind, before, after = worst
    side = "baseline" if before > after else "current run"
    raise MismatchError(
        f"not comparable: the reference kernels ran {ratio:.1f}× slower in the {side} ({kind} kernel "
        f"{before * 1e3:.3g} ms in the baseline, {after * 1e3:.3g} ms now), more than the {MAX_INDEX_RATIO:g}× a check "
        "can correct; measure the baseline again on this machine, or pass --allow-machine-mismatch"
    )


def clocks_of(run: Run) -> dict[str, str]:
    """The metrics a run timed on another clock than the CPU's: a stage synchronised with a CUDA
    device records ``"clock": "cuda"`` beside its metrics (``config["stages"]``)."""
    stages = run.config.get("stages")
    out: dict[str, str] = {}
    if not isinstance(stages, dict):
        return out
    for entry in stages.values():
        if isinstance(entry, dict) and isinstance(entry.get("clock"), str) and entry["clock"] != "cpu":
            for key in ("metric", "throughput_metric"):
                if isinstance(entry.get(key), str):
                    out[entry[key]] = entry["clock"]
    return out


def missing_gated(baseline: Run | None, current: Run, budgets: tuple[BudgetCheck, ...]) -> tuple[str, ...]:
    """The gated metrics ``current`` lacks, in order: the baseline's (informational ones do not
    gate), then those under a budget."""
    names: list[str] = []
    if baseline is not None:
        names += [
            name
            for name, m in baseline.metrics.items()
            if name not in current.metrics and m.direction is not Direction.INFO
        ]
    names += [b.budget.metric for b in budgets if not b.measured]
    return tuple(dict.fromkeys(names))


def compare_runs(
    baseline: Run,
    current: Run,
    policy: Policy,
    *,
    allow_machine_mismatch: bool = False,
    baseline_source: str = "",
    paired: bool = False,
    vectorised: bool = True,
) -> CheckResult:
    """Compare ``current`` against ``baseline`` under ``policy``.

    ``paired`` says that group i of both runs was measured side by side (``perfgate ab``
    alternates the two versions), so timing metrics are tested on paired log ratios.
    ``vectorised=False`` computes the statistics one metric at a time (the reference path;
    same verdicts, slower on many metrics).

    When both runs record the benchmark each metric measures (imported runs), the current
    run's metrics are first named as in the baseline (:func:`perfgate.core.benchmark_names.align`):
    the comparison follows the benchmark, not the name, and ``result.current`` is the renamed run.

    Raises:
        MismatchError: the runs are of different models, of different machines (unless
            ``allow_machine_mismatch``), or a metric changed its unit or direction.
    """
    aligned = align(baseline, current)
    current = aligned.run
    mismatch = _check_comparable(baseline, current, allow_machine_mismatch)
    both: list[tuple[Metric, Metric]] = [
        (baseline.metrics[name], cur)
        for name, cur in current.metrics.items()
        if name in baseline.metrics and cur.direction is not Direction.INFO
    ]
    # a stage timed on a GPU is compared on its own clock: never in units of a CPU kernel
    clocks = {**clocks_of(baseline), **clocks_of(current)}
    sides = {
        cur.name: Sides(kernel="", base=base, cur=cur) if cur.name in clocks else sides_of(base, cur, paired=paired)
        for base, cur in both
    }
    stats: SampleStats
    if vectorised:
        tested = [m for base, cur in both for m in (base, cur)]
        tested += [m for s in sides.values() if s.kernel for m in (s.base, s.cur)]
        stats = BatchStats(tested, policy.confidence)
    else:
        stats = ReferenceStats(policy.confidence)
    decided, fixed, shift, phase = prepare(
        baseline,
        current,
        policy,
        paired=paired,
        runs=(independent_runs(baseline), independent_runs(current)),
        derived=derived_metrics(current, baseline),
        stats=stats,
        sides=sides,
        counts=pooled_residues(baseline, current),
        clocks=clocks,
    )
    comparisons = [
        dataclasses.replace(c, reason=aligned.reasons[c.metric])
        if c.metric in aligned.reasons and c.verdict in (Verdict.NEW, Verdict.MISSING)
        else c
        for c in decided + fixed
    ]
    budgets = check_budgets(current, policy.budgets_for(current.model_key), policy.catalogue)
    return CheckResult(
        current=current,
        baseline=baseline,
        comparisons=tuple(comparisons),
        budgets=budgets,
        policy=policy,
        machine_mismatch=mismatch,
        baseline_source=baseline_source,
        missing=missing_gated(baseline, current, budgets),
        common_shift=shift,
        shared_phase=phase,
        notes=(*aligned.notes, *counts_budget_note(current, policy.budgets_for(current.model_key))),
    )


def budgets_only(current: Run, policy: Policy) -> CheckResult:
    """A check with no baseline yet: every metric is ``new``, the budgets still hold."""
    budgets = check_budgets(current, policy.budgets_for(current.model_key), policy.catalogue)
    return CheckResult(
        current=current,
        baseline=None,
        comparisons=tuple(unmatched(m, "current", policy) for m in current.metrics.values()),
        budgets=budgets,
        policy=policy,
        baseline_source="none yet: only the budgets were checked",
        missing=missing_gated(None, current, budgets),
        notes=counts_budget_note(current, policy.budgets_for(current.model_key)),
    )
