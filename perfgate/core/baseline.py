"""Forming a baseline from several runs of the history.

The baseline is the *pooled samples* of the last K runs of the same model on the same
machine: pooling puts the run-to-run spread (a new process, a new memory layout, another
phase of a shared machine) into the baseline's distribution, which one run's samples
understate (research note ``noise.md``). It is never the best run and never a single one
when more exist.
"""

from __future__ import annotations

from collections.abc import Sequence

from perfgate.core.schema import Metric, Run

__all__ = ["pool_runs"]


def pool_runs(runs: Sequence[Run]) -> Run:
    """One run whose metrics hold the samples of all ``runs`` (newest first).

    Provenance (commit, created_at, machine) is the newest run's; a metric missing from
    some runs is pooled from the runs that have it.
    """
    if not runs:
        raise ValueError("cannot pool an empty list of runs")
    newest = runs[0]
    names: dict[str, None] = {}
    for r in runs:
        names.update(dict.fromkeys(r.metrics))
    metrics = {}
    for name in names:
        parts = [r.metrics[name] for r in runs if name in r.metrics]
        first = parts[0]
        samples = tuple(s for m in parts for s in m.samples)
        metrics[name] = Metric(name=name, unit=first.unit, direction=first.direction, samples=samples)
    return Run(
        model=newest.model,
        suite=newest.suite,
        run_id=newest.run_id,
        created_at=newest.created_at,
        git=newest.git,
        machine=newest.machine,
        config={"pooled_run_ids": [r.run_id for r in runs]},
        metrics=metrics,
    )
