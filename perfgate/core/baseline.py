"""Forming a baseline from several runs of the history.

The baseline is the *pooled samples* of the last K accepted runs of the same model on the
same machine (K = 10 for ``perfgate baseline update``). Two ways were considered:

* **Pooling** (kept): every sample of every run, one distribution. The run-to-run spread
  (a new process, another memory layout, another phase of a shared machine) lands in the
  baseline's distribution, which one run's samples understate by a wide margin on shared
  runners (``docs/noise.md``: within-run CoV 18-20 %, run medians for identical
  work 5.3-9.7 ms). The pooled median is robust: a run that was lucky (or unlucky)
  contributes 1/K of the samples and moves the median by little, so the baseline is never
  the best-ever run and never one run when more exist. It also works with runs of
  different sample counts and with flat-format runs (one sample each).
* **Median of each sample position** (rejected): sample i of the baseline = median over
  the runs of their sample i. It keeps the within-run order (warm-up at the front), but
  the median over K runs shrinks the spread of each position by about sqrt(K), so the
  baseline looks far tighter than any single future run will be and the significance
  test raises false alarms on unchanged code: a failure mode this design avoids. It also
  needs equal sample counts. Warm-up is better removed where it is measured
  (:mod:`perfgate.core.stability`).

Each pooled run stays one group (its worker processes together): the runs were measured at
different times, so the spread between them is the run-to-run noise itself, and the check
tests against it (:func:`perfgate.core.compare.compare_runs`, :mod:`perfgate.core.noise`).
References of the machine-speed index are pooled with their samples. A run whose metric is in
its bounded form (:mod:`perfgate.core.reduced`) is pooled as its order statistics and its true
sample count, so it weighs in the pool by the samples it measured.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from perfgate.core.benchmark_names import BENCHMARK_NAMES, pooled_benchmark_names
from perfgate.core.noise import concat_references, median_index
from perfgate.core.reduced import metric_quantile, pooled_group
from perfgate.core.schema import Metric, Run

__all__ = ["flat_baseline", "pool_runs"]


def pool_runs(runs: Sequence[Run]) -> Run:
    """One run whose metrics hold the samples of all ``runs`` (newest first).

    Provenance (commit, created_at, machine, software) is the newest run's; a metric missing from
    some runs is pooled from the runs that have it. When every run records the benchmark of
    each metric (imported runs), the pooled run records it too, so a check still follows
    the benchmark (:mod:`perfgate.core.benchmark_names`).
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
        # every pooled run is one group (its worker processes together): the runs were measured
        # at different times, so the spread between them is the run-to-run noise itself
        if any(m.sizes is not None for m in parts):
            pooled = [pooled_group(m) for m in parts]
            metrics[name] = Metric(
                name=name,
                unit=first.unit,
                direction=first.direction,
                samples=tuple(s for values, _ in pooled for s in values),
                groups=tuple(len(values) for values, _ in pooled),
                sizes=tuple(n for _, n in pooled),
            )
            continue
        samples = tuple(s for m in parts for s in m.samples)
        groups = tuple(len(m.samples) for m in parts)
        metrics[name] = Metric(
            name=name,
            unit=first.unit,
            direction=first.direction,
            samples=samples,
            groups=groups,
            reference=concat_references(parts),
        )
    config: dict[str, object] = {"pooled_run_ids": [r.run_id for r in runs]}
    record = pooled_benchmark_names(runs)
    if record is not None:
        config[BENCHMARK_NAMES] = record
    return Run(
        model=newest.model,
        suite=newest.suite,
        run_id=newest.run_id,
        created_at=newest.created_at,
        git=newest.git,
        machine=newest.machine,
        config=config,
        metrics=metrics,
        machine_index=median_index(runs),
        software=newest.software,
    )


def flat_baseline(baseline: Run, *, timestamp: str | None) -> dict[str, object]:
    """The original specification's flat per-model document.

    Each metric's median, ``timestamp``, ``git_commit``, ``model_type``.

    ``timestamp`` is when the baseline was formed (None: the newest run's time). Reading
    the document back (:func:`perfgate.core.codec.run_from_dict`) gives one sample per
    metric, the median.
    """
    doc: dict[str, object] = {
        name: metric_quantile(metric, 0.5)
        if metric.sizes is not None
        else float(np.median(np.asarray(metric.samples, dtype=float)))
        for name, metric in baseline.metrics.items()
    }
    doc["model_type"] = baseline.model
    doc["git_commit"] = baseline.git.commit
    doc["timestamp"] = timestamp if timestamp is not None else baseline.created_at
    return doc
