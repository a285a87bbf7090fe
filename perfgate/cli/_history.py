"""``perfgate history``: a model's metrics over time from the store, and where their level changed.

Prints each metric's series (a sparkline of all of it, a table of the newest points) and,
with ``--changepoints``, the change points over the history: at which commit, how large
(direction-aware: worse or better), how sure (the p-value of
:func:`perfgate.core.changepoints.detect`). ``--format json`` prints the same as JSON.

When the runs carry the machine-speed index (reference kernels timed with each stage), the
change points are searched on the normalised series (each run's statistic of the stage's
time over its reference, scaled to the newest run's reference so it reads in the metric's
unit): a slow hour of the machine is not a change point of the code. The raw series is
shown beside it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from perfgate.app.stores import store_url
from perfgate.cli._flags import add_config_argument, add_flag, add_removed_spelling, add_store_argument, config_from
from perfgate.cli._output import console_for, stderr_console, term, term_cell
from perfgate.core.changepoints import METHODS, ChangePoint, detect
from perfgate.core.metrics import Direction
from perfgate.core.noise import normalised
from perfgate.core.stats import QUANTILES
from perfgate.core.text import plain
from perfgate.errors import InputError
from perfgate.report.formatting import fmt_change, fmt_p, fmt_time, fmt_value

if TYPE_CHECKING:
    from perfgate.store.base import Store

__all__ = ["add_arguments", "run", "sparkline"]

_BARS = "▁▂▃▄▅▆▇█"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from perfgate.store.base import SERIES_STATISTICS

    add_flag(parser, "--model", required=True)
    parser.add_argument("--metric", default=None, help="one metric (default: every metric of the latest run)")
    parser.add_argument(
        "--statistic", default="median", choices=SERIES_STATISTICS, help="the value per run (default median)"
    )
    add_flag(parser, "--machine", default=None, default_text="that of the latest run")
    branches = parser.add_mutually_exclusive_group()
    add_flag(branches, "--baseline-branch", default="main", default_text="main")
    add_removed_spelling(branches, "--branch", "--baseline-branch")
    branches.add_argument("--all-branches", action="store_true", help="runs of every branch")
    add_flag(parser, "--trend-runs", type=int, default=1000, metavar="N", default_text="1000")
    add_removed_spelling(parser, "--limit", "--trend-runs")
    parser.add_argument("--rows", type=int, default=20, help="table rows per metric on a terminal (default 20)")
    parser.add_argument("--changepoints", action="store_true", help="find where the level changed, and how sure")
    parser.add_argument(
        "--method",
        default=METHODS[0],
        choices=METHODS,
        help=f"change-point search: seeded (seeded binary segmentation), binseg (binary segmentation) or "
        f"edivisive (default {METHODS[0]})",
    )
    parser.add_argument(
        "--changepoint-alpha",
        type=float,
        default=0.001,
        help="significance level of each change point: the chance that one is found where the level did not "
        "change (default 0.001)",
    )
    add_removed_spelling(parser, "--alpha", "--changepoint-alpha")
    add_flag(parser, "--format", choices=("text", "json"), default="text", default_text="text")
    add_removed_spelling(parser, "--json", "--format json")
    add_store_argument(parser)
    add_config_argument(parser)


def sparkline(values: list[float], width: int = 60) -> str:
    """A one-line chart of ``values`` (bucket means when there are more than ``width``)."""
    if not values:
        return ""
    if len(values) > width:
        edges = [round(i * len(values) / width) for i in range(width + 1)]
        values = [sum(values[a:b]) / (b - a) for a, b in itertools.pairwise(edges) if b > a]
    low, high = min(values), max(values)
    if high == low:
        return _BARS[len(_BARS) // 2] * len(values)
    scale = (len(_BARS) - 1) / (high - low)
    return "".join(_BARS[round((v - low) * scale)] for v in values)


def _worse(change: float, direction: Direction) -> bool | None:
    if direction is Direction.INFO or change == 0 or math.isnan(change):
        return None
    return change > 0 if direction is Direction.LOWER else change < 0


def _metric_report(
    store: Any, args: argparse.Namespace, machine: str | None, name: str, latest: Any, runs: dict[str, Any]
) -> dict[str, Any]:
    branch = None if args.all_branches else args.baseline_branch
    points = store.series(args.model, machine, name, args.statistic, branch=branch, limit=args.trend_runs)
    metric = latest.metrics.get(name)
    direction = metric.direction if metric is not None else Direction.INFO
    report: dict[str, Any] = {
        "metric": name,
        "unit": metric.unit if metric is not None else "",
        "direction": direction.value,
        "points": [p._asdict() for p in points],
    }
    normalised_values = _normalised_series(store, points, name, args.statistic, metric, runs)
    if normalised_values is not None:
        report["normalised"] = normalised_values
    if args.changepoints:
        values = normalised_values if normalised_values is not None else [p.value for p in points]
        found: list[ChangePoint] = detect(values, method=args.method, alpha=args.changepoint_alpha) if values else []
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


def _normalised_series(
    store: Any, points: list[Any], name: str, statistic: str, latest: Any, runs: dict[str, Any]
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


def _print(reports: list[dict[str, Any]], head: dict[str, Any], args: argparse.Namespace) -> None:
    from rich.table import Table

    console = console_for()
    where = head["branch"] or "all branches"
    console.print(
        f"[bold]{term(head['model'])}[/] on machine {term(head['machine'] or 'unknown')}, {term(where)}, "
        f"{args.statistic} per run — store {term(head['store'])}",
        soft_wrap=True,
    )
    for rep in reports:
        points = rep["points"]
        values = [p["value"] for p in points]
        direction = rep["direction"].replace("_", " ")
        console.print()
        console.print(
            f"[bold]{term(rep['metric'])}[/] ({term(rep['unit'])}, {direction}): {len(points)} run(s)", soft_wrap=True
        )
        if not points:
            continue
        console.print(
            f"  {sparkline(values)}  {fmt_value(values[0])} → {fmt_value(values[-1])} {term(rep['unit'])}",
            soft_wrap=True,
        )
        if "normalised" in rep:
            scaled = rep["normalised"]
            console.print(
                f"  {sparkline(scaled)}  {fmt_value(scaled[0])} → {fmt_value(scaled[-1])} {term(rep['unit'])} "
                "normalised by the machine-speed index (change points are searched on this one)",
                soft_wrap=True,
            )
        table = Table(title=f"newest {min(args.rows, len(points))}", title_justify="left")
        for col in ("date (UTC)", "commit", "run", plain(rep["unit"]) or "value"):
            table.add_column(term_cell(col), justify="right" if col == (plain(rep["unit"]) or "value") else "left")
        for p in points[-args.rows :]:
            table.add_row(
                term_cell(fmt_time(p["created_at"])),
                term_cell((p["commit"] or "?")[:12]),
                term_cell(p["run_id"][:12]),
                fmt_value(p["value"]),
            )
        console.print(table)
        if "changepoints" not in rep:
            continue
        cps = rep["changepoints"]
        if not cps:
            console.print(f"  no change point (alpha {args.changepoint_alpha:g}, {args.method})")
            continue
        cp_table = Table(title=f"change points ({args.method}, alpha {args.changepoint_alpha:g})", title_justify="left")
        for col in ("at commit", "date (UTC)", "before", "after", "change", "p", ""):
            cp_table.add_column(col, justify="left" if col in ("at commit", "date (UTC)", "") else "right")
        for cp in cps:
            label = {True: "[red]worse[/]", False: "[green]better[/]", None: ""}[cp["worse"]]
            cp_table.add_row(
                term_cell((cp["commit"] or "?")[:12]),
                term_cell(fmt_time(cp["created_at"])),
                fmt_value(cp["before"]),
                fmt_value(cp["after"]),
                fmt_change(cp["change"]),
                fmt_p(cp["p_value"]),
                label,
            )
        console.print(cp_table)


_SCAN = 500  # newest runs looked through to say why none matched


def _why_no_runs(store: Store, args: argparse.Namespace, branch: str | None) -> str:
    """What the store has instead, and the flag that widens the filter that left it out: the
    branch (--baseline-branch, --all-branches), the machine (--machine), or the model's name."""
    from perfgate.store import RunQuery
    from perfgate.store.baseline import branch_advice

    where = f" on branch {branch!r}" if branch else ""
    on = f" on machine {args.machine}" if args.machine else ""
    head = f"no runs of model {args.model!r}{on}{where}"
    if branch is not None:
        elsewhere = store.runs(RunQuery(model=args.model, machine=args.machine, limit=_SCAN))
        if elsewhere:
            return f"{head}; of its runs, {branch_advice(elsewhere, branch)}; or show every branch with --all-branches"
    if args.machine is not None:
        machines = sorted({r.machine.fingerprint or "unknown" for r in store.latest(RunQuery(model=args.model))})
        if machines:
            return f"{head}; it has runs of this model from machine(s) {', '.join(machines)}: choose one with --machine"
    known = sorted({r.model for r in store.latest(RunQuery(branch=branch))})
    if known:
        return f"{head}; it has {', '.join(known)}"
    if branch is not None and store.latest(RunQuery()):
        return f"{head}; it has no run on that branch: show every branch with --all-branches"
    return f"{head}; it has no runs (record some with perfgate record)"


def run(args: argparse.Namespace) -> int:
    from perfgate.store import RunQuery, created_key, open_store

    if args.trend_runs < 1 or args.rows < 1:
        raise InputError("--trend-runs and --rows must be at least 1", field="--trend-runs")
    if not 0.0 < args.changepoint_alpha < 1.0:
        raise InputError(
            f"--changepoint-alpha must be between 0 and 1, got {args.changepoint_alpha}", field="--changepoint-alpha"
        )
    branch = None if args.all_branches else args.baseline_branch
    with open_store(store_url(args.store, config_from(args))) as store:
        newest = store.latest(RunQuery(model=args.model, machine=args.machine, branch=branch))
        if not newest:
            raise InputError(_why_no_runs(store, args, branch), source=store.url)
        newest.sort(key=lambda r: created_key(r.created_at), reverse=True)
        latest = newest[0]
        machine = latest.machine.fingerprint
        others = sorted({r.machine.fingerprint or "unknown" for r in newest[1:]} - {machine or "unknown"})
        if others and args.machine is None and args.format != "json":
            stderr_console().print(
                plain(
                    f"showing machine {machine or 'unknown'} (the latest run's); also in the store: "
                    f"{', '.join(others)} (choose with --machine)"
                ),
                markup=False,
            )
        names = [args.metric] if args.metric else sorted(latest.metrics)
        runs: dict[str, Any] = {}
        reports = [_metric_report(store, args, machine, name, latest, runs) for name in names]
        if args.metric and not reports[0]["points"]:
            raise InputError(
                f"no values of metric {args.metric!r} for model {args.model!r}; "
                f"it has {', '.join(sorted(latest.metrics))}",
                source=store.url,
                field="--metric",
            )
        head = {
            "model": latest.model_key,
            "machine": machine,
            "branch": branch,
            "statistic": args.statistic,
            "store": store.url,
        }
    if args.format == "json":
        print(json.dumps({**head, "metrics": reports}, sort_keys=True, indent=2, allow_nan=False))
    else:
        _print(reports, head, args)
    return 0
