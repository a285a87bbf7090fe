"""``perfgate history``: a model's metrics over time from the store, and where their level changed.

:func:`history` reads each metric's series (one statistic per run) and, when asked, the change
points over it: at which commit, how large (direction-aware: worse or better), how sure (the
p-value of :func:`perfgate.core.changepoints.detect`).

When the runs carry the machine-speed index (reference kernels timed with each stage), the
change points are searched on the normalised series (:func:`normalised_series`): a slow hour
of the machine is not a change point of the code. The raw series is kept beside it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from perfgate.app.stores import store_url
from perfgate.config import load_config
from perfgate.core.changepoints import METHODS, ChangePoint, detect
from perfgate.core.metrics import Direction
from perfgate.core.noise import normalised
from perfgate.core.stats import QUANTILES
from perfgate.errors import InputError
from perfgate.safe.text import plain

if TYPE_CHECKING:
    from perfgate.store.base import Store

__all__ = ["HistoryRequest", "HistoryResult", "history", "normalised_series"]


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryRequest:
    """Whose history: a model's runs on one machine (None: the latest run's) and branch, the
    newest ``trend_runs`` of them, one metric or all of the latest run's; and whether to find
    change points, with which method and significance level."""

    model: str
    metric: str | None = None
    statistic: str = "median"
    machine: str | None = None
    baseline_branch: str = "main"
    all_branches: bool = False
    trend_runs: int = 1000
    changepoints: bool = False
    method: str = METHODS[0]
    changepoint_alpha: float = 0.001
    store: str | None = None
    config: Path | None = None


@dataclass(frozen=True, slots=True)
class HistoryResult:
    """What was shown (``head``: model, machine, branch, statistic, store) and one report per metric:
    its unit, direction, points, normalised series and change points, as the JSON output has them."""

    head: dict[str, Any]
    metrics: list[dict[str, Any]]


def _worse(change: float, direction: Direction) -> bool | None:
    if direction is Direction.INFO or change == 0 or math.isnan(change):
        return None
    return direction.worse(change) > 0


def _metric_report(
    store: Any, request: HistoryRequest, machine: str | None, name: str, latest: Any, runs: dict[str, Any]
) -> dict[str, Any]:
    branch = None if request.all_branches else request.baseline_branch
    points = store.series(request.model, machine, name, request.statistic, branch=branch, limit=request.trend_runs)
    metric = latest.metrics.get(name)
    direction = metric.direction if metric is not None else Direction.INFO
    report: dict[str, Any] = {
        "metric": name,
        "unit": metric.unit if metric is not None else "",
        "direction": direction.value,
        "points": [p._asdict() for p in points],
    }
    normalised_values = normalised_series(store, points, name, request.statistic, metric, runs)
    if normalised_values is not None:
        report["normalised"] = normalised_values
    if request.changepoints:
        values = normalised_values if normalised_values is not None else [p.value for p in points]
        found: list[ChangePoint] = (
            detect(values, method=request.method, alpha=request.changepoint_alpha) if values else []
        )
        report["changepoints"] = [
            {
                "index": cp.index,
                "run_id": points[cp.index].run_id,
                "commit": points[cp.index].commit,
                "created_at": points[cp.index].created_at,
                "before": cp.before,
                "after": cp.after,
                "change": cp.change if math.isfinite(cp.change) else None,
                "p_value": cp.p_value,
                "worse": _worse(cp.change, direction),
            }
            for cp in found
        ]
    return report


def normalised_series(
    store: Store, points: list[Any], name: str, statistic: str, latest: Any, runs: dict[str, Any]
) -> list[float] | None:
    """Each point's statistic in units of its reference kernel, times the newest run's reference
    median; None unless every point's run has a reference for the metric (all of one kernel)."""
    if latest is None or latest.reference is None or not points or statistic not in QUANTILES:
        return None
    scale = float(np.median(latest.reference.seconds))
    values = []
    for point in points:
        if point.run_id not in runs:  # read each run once for all of its metrics
            runs[point.run_id] = store.get_run(point.run_id)
        metric = runs[point.run_id].metrics.get(name)
        scaled = normalised(metric) if metric is not None else None
        if scaled is None or metric.reference.kernel != latest.reference.kernel:
            return None
        values.append(float(np.percentile(scaled.samples, 100 * QUANTILES[statistic])) * scale)
    return values


_SCAN = 500  # newest runs looked through to say why none matched


def _why_no_runs(store: Store, request: HistoryRequest, branch: str | None) -> str:
    """What the store has instead, and the flag that widens the filter that left it out: the
    branch (--baseline-branch, --all-branches), the machine (--machine), or the model's name."""
    from perfgate.store import RunQuery
    from perfgate.store.baseline import branch_advice

    where = f" on branch {branch!r}" if branch else ""
    on = f" on machine {request.machine}" if request.machine else ""
    head = f"no runs of model {request.model!r}{on}{where}"
    if branch is not None:
        elsewhere = store.runs(RunQuery(model=request.model, machine=request.machine, limit=_SCAN))
        if elsewhere:
            return f"{head}; of its runs, {branch_advice(elsewhere, branch)}; or show every branch with --all-branches"
    if request.machine is not None:
        machines = sorted({r.machine.fingerprint or "unknown" for r in store.latest(RunQuery(model=request.model))})
        if machines:
            return f"{head}; it has runs of this model from machine(s) {', '.join(machines)}: choose one with --machine"
    known = sorted({r.model for r in store.latest(RunQuery(branch=branch))})
    if known:
        return f"{head}; it has {', '.join(known)}"
    if branch is not None and store.latest(RunQuery()):
        return f"{head}; it has no run on that branch: show every branch with --all-branches"
    return f"{head}; it has no runs (record some with perfgate record)"


def history(request: HistoryRequest, note: Callable[[str], None]) -> HistoryResult:
    """The history ``request`` asks for; ``note`` is told which machine is shown when the store has
    others (unless ``request.machine`` chose one).

    Raises:
        InputError: no runs match, no values of the metric, a significance level outside (0, 1).
    """
    from perfgate.store import RunQuery, created_key, open_store

    if not 0.0 < request.changepoint_alpha < 1.0:
        raise InputError(
            f"--changepoint-alpha must be between 0 and 1, got {request.changepoint_alpha}",
            field="--changepoint-alpha",
        )
    branch = None if request.all_branches else request.baseline_branch
    with open_store(store_url(request.store, load_config(request.config))) as store:
        newest = store.latest(RunQuery(model=request.model, machine=request.machine, branch=branch))
        if not newest:
            raise InputError(_why_no_runs(store, request, branch), source=store.url)
        newest.sort(key=lambda r: created_key(r.created_at), reverse=True)
        latest = newest[0]
        machine = latest.machine.fingerprint
        others = sorted({r.machine.fingerprint or "unknown" for r in newest[1:]} - {machine or "unknown"})
        if others and request.machine is None:
            note(
                plain(
                    f"showing machine {machine or 'unknown'} (the latest run's); also in the store: "
                    f"{', '.join(others)} (choose with --machine)"
                )
            )
        names = [request.metric] if request.metric else sorted(latest.metrics)
        runs: dict[str, Any] = {}
        reports = [_metric_report(store, request, machine, name, latest, runs) for name in names]
        if request.metric and not reports[0]["points"]:
            raise InputError(
                f"no values of metric {request.metric!r} for model {request.model!r}; "
                f"it has {', '.join(sorted(latest.metrics))}",
                source=store.url,
                field="--metric",
            )
        head = {
            "model": latest.model_key,
            "machine": machine,
            "branch": branch,
            "statistic": request.statistic,
            "store": store.url,
        }
    return HistoryResult(head=head, metrics=reports)
