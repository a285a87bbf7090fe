"""Independent repetitions: the same benchmark in several worker processes, one after another.

Samples taken inside one process share its memory layout, its caches and the machine's
current phase, so they understate the run-to-run spread (``docs/noise.md``).
Running the benchmark in N fresh processes — sequentially, so they never compete for the
two cores — and keeping each process's samples as a group lets the decision measure that
spread instead of guessing it (as pyperf does with its worker processes).

With a time budget the number of processes adapts: at least two, then more until every
timing metric's location is pinned down to a third of the threshold (95 % interval of the
mean of log group medians), the budget is spent, or the maximum is reached — quiet metrics
cost little and noisy ones get the repetitions they need.

A worker that hangs (a stage's set-up that never returns) is killed at
:data:`~perfgate.workers.spawn.PROCESS_DEADLINE`, the deadline of every process perfgate
starts to measure (``docs/limits.md``), and the command exits 2 naming the worker and the last
step it began (the import of the stages modules, a stage's set-up and warm-up, a round), which
the worker writes to a progress file as it goes.

Every worker is started by one owner (:class:`~perfgate.workers.spawn.Workers`): however the command
is left, at an error, Ctrl-C or SIGTERM, the worker that runs is killed.

Internal: shared with ``app``; not part of the Python API (README, "Python API").
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from perfgate.core.codec import run_from_dict
from perfgate.core.distributions import t_ppf
from perfgate.core.metrics import Direction
from perfgate.core.noise import combine_repetitions, group_locations
from perfgate.core.schema import Run
from perfgate.errors import PerfgateError
from perfgate.workers import spawn
from perfgate.workers.measure import BenchJob, MeasureOptions
from perfgate.workers.spawn import Workers, run_job

__all__ = ["WORKER_MODULE", "location_precision", "measure_in_processes"]

# the module a bench worker runs; it reads its job as JSON on stdin (perfgate.workers.protocol)
WORKER_MODULE = "perfgate.workers.bench"


def location_precision(run: Run) -> float:
    """Largest relative half-width (95 %) of a timing metric's location across the groups so far."""
    worst = 0.0
    for metric in run.metrics.values():
        if metric.direction is Direction.INFO or metric.groups is None or len(metric.groups) < 2:
            continue
        logs = group_locations(metric, 0.5)
        if len(logs) < 2:
            continue
        sd = float(logs.std(ddof=1))
        half = t_ppf(0.975, len(logs) - 1) * sd / math.sqrt(len(logs))
        worst = max(worst, math.expm1(half))
    return worst


def measure_in_processes(
    options: MeasureOptions,
    model: str,
    *,
    processes: int,
    time_budget: float | None = None,
    target_precision: float = 0.0333,
    run_id: str,
    progress: Callable[[str], None] | None = None,
) -> Run:
    """Measure ``model`` in worker processes, one after another, and combine their runs.

    Each worker gets ``options`` (what ``perfgate bench`` parsed and a worker needs) with its
    model and its own run file (a :class:`~perfgate.workers.measure.BenchJob`), as one JSON object
    on its standard input, never the parent's command line: so a worker never records in a store
    or pushes metrics, however the parent's flags were spelt.
    """
    runs: list[Run] = []
    started = time.perf_counter()
    minimum = 2 if time_budget is not None else processes
    with Workers() as owner, tempfile.TemporaryDirectory(prefix="perfgate-workers-") as tmp:
        for i in range(processes):
            out, steps = Path(tmp) / f"worker{i}.json", Path(tmp) / f"worker{i}.progress"
            t0 = time.perf_counter()
            job = BenchJob(options=options, model=model, output=out, progress=steps)
            try:
                proc = run_job(owner, [sys.executable, "-m", WORKER_MODULE], job.to_json(), os.environ, None)
            except subprocess.TimeoutExpired:
                began = steps.read_text(encoding="utf-8", errors="replace").splitlines() if steps.exists() else []
                raise PerfgateError(
                    f"worker process {i + 1} of {model} did not finish within {spawn.PROCESS_DEADLINE:g} s and was "
                    "killed; "
                    f"its last step: {began[-1] if began else 'its start'} (docs/limits.md): a stage hangs, or, if it "
                    "is only slow, measure fewer --rounds or --repeat in each of more --processes"
                ) from None
            if proc.returncode != 0 or not out.exists():
                last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
                raise PerfgateError(f"worker process {i + 1} of {model} failed (exit {proc.returncode}): {last}")
            runs.append(run_from_dict(json.loads(out.read_text()), source=str(out)))
            took = time.perf_counter() - t0
            if progress:
                progress(f"{model}: process {i + 1} done in {took:.1f} s")
            if len(runs) < minimum or time_budget is None:
                continue
            combined = combine_repetitions(runs, run_id=run_id)
            spent = time.perf_counter() - started
            if location_precision(combined) <= target_precision or spent + took > time_budget:
                break
    return combine_repetitions(runs, run_id=run_id)
