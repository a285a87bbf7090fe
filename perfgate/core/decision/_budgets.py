"""Budgets: absolute limits checked on the current run alone, with or without a baseline.

A budget names a statistic of a metric (``p99 = 50`` on inference latency, ``max = 150``
on memory) and holds in the metric's direction. Two rules beyond the plain statistic:

* **A metric the run did not measure does not meet its budget.** Removing a stage must not
  turn its p99 budget green; the check lists the metric among its missing gated metrics
  (:attr:`perfgate.core.result.CheckResult.missing`).
* **A derived rate is held to its overall rate.** A throughput that is the batch over the
  time of each call (:mod:`perfgate.core._derived`) has one sample per call; its ``min``
  would be the single slowest call (a PPO step that also collects a rollout), and its
  arithmetic ``mean`` overstates the rate of uneven calls. Both are taken as the run's
  overall rate instead, total items over total time: the harmonic mean of the per-call
  rates. ``median`` and the percentiles stay the per-call ones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from perfgate.core._derived import derived_metrics
from perfgate.core.decision._counts import is_counts_run
from perfgate.core.metrics import Direction, MetricCatalogue
from perfgate.core.policy import Budget
from perfgate.core.reduced import metric_summary
from perfgate.core.result import BudgetCheck
from perfgate.core.schema import Run
from perfgate.core.stats import QUANTILES, min_samples_for, quantile

__all__ = ["OVERALL_RATE_STATISTICS", "check_budgets", "counts_budget_note", "overall_rate", "statistic_value"]

# the budget statistics of a derived rate that are evaluated on its overall rate
OVERALL_RATE_STATISTICS = ("min", "mean")
# what is known of the metrics without a configuration: the declared suites
_DECLARED = MetricCatalogue()


def statistic_value(samples: Sequence[float], statistic: str) -> float:
    """``mean``, ``max``, ``min`` or a named quantile (``median``, ``p50``, ``p95``, ``p99``) of a sample."""
    if statistic == "mean":
        return math.fsum(samples) / len(samples)
    if statistic == "max":
        return max(samples)
    if statistic == "min":
        return min(samples)
    return quantile(samples, statistic)


def overall_rate(rates: Sequence[float]) -> float:
    """Total items over total time of calls with these per-call rates (each call the same items):
    the harmonic mean. 0 when a call had rate 0 (it took forever)."""
    if any(r <= 0 for r in rates):
        return 0.0
    return len(rates) / math.fsum(1.0 / r for r in rates)


def _not_counted(run: Run, budgets: tuple[Budget, ...]) -> list[Budget]:
    # a counts run measures no times, rates or memory: a budget on one of those is not its to keep
    return [b for b in budgets if is_counts_run(run) and b.metric not in run.metrics]


def counts_budget_note(run: Run, budgets: tuple[Budget, ...]) -> tuple[str, ...]:
    """One line naming the budgets a counts run leaves to runs of times (none for other runs)."""
    left = list(dict.fromkeys(f"{b.metric} ({b.statistic})" for b in _not_counted(run, budgets)))
    if not left:
        return ()
    return (
        f"budgets not checked: {', '.join(left)}; counts are not times, so these budgets are checked by "
        "runs of times (perfgate bench without --measure counts)",
    )


def check_budgets(
    run: Run, budgets: tuple[Budget, ...], catalogue: MetricCatalogue = _DECLARED
) -> tuple[BudgetCheck, ...]:
    """Evaluate absolute limits on one run; no baseline is needed.

    A budget on a metric the run did not measure takes its unit and direction from ``catalogue``
    (the check's policy's, :attr:`perfgate.core.policy.Policy.catalogue`).

    A counts run is held only to the budgets on metrics it measured (``<stem>_instructions``,
    say); a budget on a time, a rate or memory is left to runs of times and named by
    :func:`counts_budget_note`, so a counts gate neither fails on it nor passes it silently.
    """
    skip = _not_counted(run, budgets)
    budgets = tuple(b for b in budgets if b not in skip)
    derived = derived_metrics(run) if budgets else {}
    results = []
    for budget in budgets:
        metric = run.metrics.get(budget.metric)
        if metric is None:
            info = catalogue.get(budget.metric)
            results.append(
                BudgetCheck(
                    budget=budget,
                    unit=info.unit if info else "",
                    direction=info.direction if info else Direction.LOWER,
                    value=None,
                    n=0,
                    ok=False,
                    note="not measured in this run: a budgeted metric that is missing fails the check",
                )
            )
            continue
        source = derived.get(metric.name, "")
        note = ""
        if source and budget.statistic in OVERALL_RATE_STATISTICS:
            value = overall_rate(metric.samples)
            note = f"the run's overall rate (total items / total time), derived from {source}"
        elif metric.sizes is not None:  # the bounded form: the statistic of the samples it stands for
            value = getattr(metric_summary(metric), budget.statistic)
        else:
            value = statistic_value(metric.samples, budget.statistic)
        ok = value >= budget.limit if metric.direction is Direction.HIGHER else value <= budget.limit
        if budget.statistic in QUANTILES and metric.n < min_samples_for(budget.statistic):
            note = (
                f"estimated from {metric.n} samples; {min_samples_for(budget.statistic)} "
                f"give a reliable {budget.statistic}"
            )
        results.append(
            BudgetCheck(
                budget=budget,
                unit=metric.unit,
                direction=metric.direction,
                value=value,
                n=metric.n,
                ok=ok,
                note=note,
                derived_from=source,
            )
        )
    return tuple(results)
