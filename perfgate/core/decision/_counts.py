"""The decision for counts: instructions and estimated cycles from callgrind, not times.

A count has no machine phase: the same code counted last week and today gives the same
number, so a counts comparison carries **no run-to-run phase term** and a stored baseline
is as good as one counted in the same job. What does move it is the residue of each
process's own draw: allocator, garbage collector, hash seed and memory layout, 0.0001–0.3 %
between processes measured here (``docs/design.md`` §12). Calls inside one process repeat each
other almost to the instruction, so their spread says nothing about that residue and is not
used.

The residue is measured **between processes** (each process's samples are one group of the
metric: the log of each group's median) and **pooled across the check's count metrics on
both sides**, one pool per unit (instructions apart from estimated cycles, whose simulated cache
misses move with each process's layout), so a test does not rest on one metric's 1–2 degrees of freedom:

    σ_pooled² = Σ_metrics Σ_groups (log m_g − mean_side)² / Σ (groups − 1)

A metric is then tested with ``σ = max(floor, σ_pooled, σ_own)``: the floor
(:data:`RESIDUE_FLOOR`, 0.1 %) keeps two processes that happened to agree to the instruction
from making any difference significant, and the metric's own spread keeps one noisy stage
(an eager torch call, 0.3 %) from borrowing the quiet ones' precision. The standard error
of the log ratio of the two sides is ``σ·√(1/G_base + 1/G_current)`` on the pooled degrees
of freedom (a normal test when the floor decides). That ratio, and the values a report shows,
are of each side's geometric mean over its processes of each process's own median, the
estimate that standard error belongs to, not the median of all calls pooled: a stage whose
calls come in two states (a DBN load's simulated cache misses) moved the pooled median by
2 % between two runs whose processes agreed to 0.1 %, and read as a false improvement.

Tested in ``tests/core/test_counts.py``: hand values, seeded A/A simulations of 1,000 checks
under the measured residue (at most 1 % alarm) and the power for +2 % at a 1 % threshold.

Internal: shared with ``calibration``, ``report``; not part of the Python API (README, "Python API").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from perfgate.core.decision._estimate import OneSidedTest
from perfgate.core.distributions import t_sf
from perfgate.core.noise import group_locations
from perfgate.core.schema import Metric, Run
from perfgate.core.stats import QUANTILES

__all__ = [
    "COUNT_UNITS",
    "NOT_TIMES",
    "PROCESS_DF_KEY",
    "PROCESS_KEY",
    "RESIDUE_FLOOR",
    "Residue",
    "counts_test",
    "history_of",
    "informational_line",
    "is_count",
    "is_counts_run",
    "learned_residue",
    "left_out_line",
    "pooled_residue",
    "pooled_residues",
]

# the units of a counted metric (perfgate bench --measure counts)
COUNT_UNITS = frozenset({"instructions", "cycles"})
# what every report of count metrics says, plainly
NOT_TIMES = (
    "**Counts, not times**: instructions and estimated cycles per call, counted under valgrind's callgrind "
    "(a simulated CPU), not wall time. They repeat to a fraction of a per cent from one process or day to the "
    "next, but do not see memory bandwidth, contention, threads, system calls, I/O, GPU kernels or tail latency "
    "(p99 is wall time only: `perfgate ab` with times measures it)."
)
# the smallest between-process SD of a log count a test assumes (0.1 %)
RESIDUE_FLOOR = 0.001


def is_count(metric: Metric) -> bool:
    return metric.unit in COUNT_UNITS


def is_counts_run(run: Run) -> bool:
    """A run whose gated metrics are counts (``perfgate bench --measure counts``)."""
    return (
        run.measure == "counts"
        or run.config.get("measure") == "counts"
        or (bool(run.metrics) and all(is_count(m) for m in run.metrics.values()))
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Residue:
    """The between-process SD of log counts, pooled over a check's count metrics on both sides."""

    sigma: float
    df: int
    metrics: int
    floor: float = RESIDUE_FLOOR


def _spread(metric: Metric) -> tuple[float, int]:
    logs = group_locations(metric, 0.5)
    if len(logs) < 2:
        return 0.0, 0
    return float(np.sum((logs - logs.mean()) ** 2)), len(logs) - 1


def pooled_residue(
    baseline: Run, current: Run, floor: float = RESIDUE_FLOOR, *, unit: str | None = None
) -> Residue | None:
    """The residue of the count metrics of both runs (of ``unit`` only, when given); None when neither has any."""
    ss, df, metrics = 0.0, 0, 0
    for run in (baseline, current):
        for metric in run.metrics.values():
            if not is_count(metric) or (unit is not None and metric.unit != unit):
                continue
            metrics += 1
            s, d = _spread(metric)
            ss, df = ss + s, df + d
    if metrics == 0:
        return None
    return Residue(sigma=math.sqrt(ss / df) if df else 0.0, df=df, metrics=metrics, floor=floor)


def pooled_residues(baseline: Run, current: Run, floor: float = RESIDUE_FLOOR) -> dict[str, Residue]:
    """The residue pooled per unit: instructions apart from estimated cycles.

    Simulated cache misses depend on addresses, and so on each process's layout, far more than
    the instructions do: DQN's DBN load counted in four processes moved 0.02 % in instructions
    and 2.7 % in estimated cycles (``docs/design.md`` §12). Pooled together, the quiet
    instructions would lend the cycles a precision they do not have.
    """
    out = {}
    for unit in sorted(COUNT_UNITS):
        residue = pooled_residue(baseline, current, floor, unit=unit)
        if residue is not None:
            out[unit] = residue
    return out


# the calibration keys of a count metric's residue learned from stored runs (perfgate calibrate)
PROCESS_KEY, PROCESS_DF_KEY = "@process", "@process_df"


def learned_residue(runs: Sequence[Run]) -> dict[str, float]:
    """Each count metric's between-process residue over stored runs, as calibration entries.

    Inside every run, the spread of its processes' log medians around that run's mean; pooled
    over the runs (``metric@process``, with its degrees of freedom as ``metric@process_df``).
    Read inside runs, it needs no change-point split: a change of the code between two runs
    moves both their means, not the spread of either.
    """
    ss: dict[str, float] = {}
    df: dict[str, int] = {}
    for run in runs:
        for name, metric in run.metrics.items():
            if not is_count(metric):
                continue
            s, d = _spread(metric)
            if d:
                ss[name] = ss.get(name, 0.0) + s
                df[name] = df.get(name, 0) + d
    out: dict[str, float] = {}
    for name, d in df.items():
        out[f"{name}{PROCESS_KEY}"] = math.sqrt(ss[name] / d)
        out[f"{name}{PROCESS_DF_KEY}"] = float(d)
    return out


def history_of(noise: Mapping[str, float], metric: str) -> tuple[float, int] | None:
    """The residue ``perfgate calibrate`` learned for ``metric`` and its degrees of freedom, if any."""
    sigma, df = noise.get(f"{metric}{PROCESS_KEY}"), noise.get(f"{metric}{PROCESS_DF_KEY}")
    if sigma is None or df is None or df < 1:
        return None
    return float(sigma), int(df)


def counts_test(
    log_worse: float,
    base: Metric,
    cur: Metric,
    statistic: str,
    residue: Residue,
    history: tuple[float, int] | None = None,
    history_runs: int = 0,
) -> OneSidedTest:
    """The one-sided test of a count metric's log ratio (module docstring).

    ``history``: the metric's residue learned from this machine's stored runs and its degrees
    of freedom. With it, the metric's own spread is pooled with that history and stands on
    its own (floored): a stage known to be quiet is not held to the check's noisiest, and one
    known to move (a DBN load's estimated cycles) is not trusted on two processes that agreed.
    """
    q = QUANTILES[statistic]
    g_base, g_cur = len(base.groups or (0,)), len(cur.groups or (0,))
    ss = df_own = 0.0
    means = []
    for side in (base, cur):
        logs = group_locations(side, q)
        means.append(float(logs.mean()))
        if len(logs) > 1:
            ss += float(np.sum((logs - logs.mean()) ** 2))
            df_own += len(logs) - 1
    if g_base > 1 or g_cur > 1:
        # the estimate the standard error below belongs to: the mean over processes of each
        # process's own statistic, not the statistic of all calls pooled (a stage whose calls
        # come in two states, a DBN load's simulated cache misses, moves the pooled median by
        # 2 % between two runs whose processes agree to 0.1 %)
        own_log = means[1] - means[0]
        log_worse = cur.direction.worse(own_log)
    own = math.sqrt(ss / df_own) if df_own else 0.0
    if history is not None:
        h_sigma, h_df = history
        learned = math.sqrt((h_df * h_sigma**2 + ss) / (h_df + df_own))
        sigma = max(residue.floor, learned)
        df = int(h_df + df_own) if sigma > residue.floor else None
        runs = f"{history_runs} runs" if history_runs else "runs"
        which = (
            f"the floor of {residue.floor:.2%}, above the {learned:.3%} learned from {runs} of this machine"
            if sigma == residue.floor
            else f"this metric's own, learned from {runs} of this machine"
        )
    else:
        sigma = max(residue.floor, residue.sigma, own)
        df = residue.df if sigma > residue.floor and residue.df > 0 else None
        which = (
            f"the floor of {residue.floor:.2%}"
            if sigma == residue.floor
            else "this metric's own spread"
            if sigma == own and own > residue.sigma
            else f"pooled over {residue.metrics} count metrics"
        )
    se = sigma * math.sqrt(1.0 / g_base + 1.0 / g_cur)
    noise = (
        f"counts: between-process residue σ {sigma:.3%} ({which}; {g_base}/{g_cur} processes), no run-to-run phase term"
    )
    p_value = t_sf(log_worse / se, df) if se > 0 else (0.0 if log_worse > 0 else 1.0)
    return OneSidedTest(
        log_worse=log_worse,
        se=se,
        p_value=p_value,
        df=df,
        groups=(g_base, g_cur),
        noise=noise,
        process_sigma=sigma,
        values=(math.exp(means[0]), math.exp(means[1])) if g_base > 1 or g_cur > 1 else None,
    )


def _stage_reasons(run: Run, key: str) -> list[str]:
    """``name (why)`` of every stage a counts run lists under ``config.counts[key]``."""
    counts = run.config.get("counts")
    listed = counts.get(key) if isinstance(counts, dict) else None
    if not isinstance(listed, list):
        return []
    return [
        f"{st.get('name')} ({st.get('why')})"
        for st in listed
        if isinstance(st, dict) and isinstance(st.get("name"), str)
    ]


def left_out_line(run: Run) -> str | None:
    """One sentence naming the stages a counts run left out and why, or ``None`` when none was."""
    parts = _stage_reasons(run, "left_out")
    if not parts:
        return None
    return (
        "Not counted: " + "; ".join(parts) + ". Measure it with times (`perfgate ab`), or count it anyway with "
        "--count-all-stages."
    )


def informational_line(run: Run) -> str | None:
    """One sentence naming the stages whose counts a counts run reports but never gates on, and
    why (``Stage.counts_informational``), or ``None`` when there are none."""
    parts = _stage_reasons(run, "informational")
    if not parts:
        return None
    return (
        "Counted but not gated, since their counts do not track their time: " + "; ".join(parts) + ". Gate them "
        "with times (`perfgate ab`)."
    )
