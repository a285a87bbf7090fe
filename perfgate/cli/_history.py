"""``perfgate history``: a model's metrics over time from the store, and where their level changed.

Prints each metric's series (a sparkline of all of it, a table of the newest points) and,
with ``--changepoints``, the change points over the history: at which commit, how large
(direction-aware: worse or better), how sure (the p-value of
:func:`perfgate.core.changepoints.detect`). ``--format json`` prints the same as JSON.

When the runs carry the machine-speed index, the change points are searched on the
normalised series, shown beside the raw one (:mod:`perfgate.app.history`, the use case).
"""

from __future__ import annotations

import argparse
import itertools
import json
from typing import TYPE_CHECKING, Any

from perfgate.app.history import HistoryRequest, history
from perfgate.cli._flags import add_config_argument, add_flag, add_removed_spelling, add_store_argument
from perfgate.cli._output import console_for, stderr_console, term, term_cell
from perfgate.core.changepoints import METHODS
from perfgate.errors import InputError
from perfgate.report.formatting import fmt_change, fmt_p, fmt_time, fmt_value
from perfgate.safe.text import plain

if TYPE_CHECKING:
    pass

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
        if "changepoints" in rep:
            _print_changepoints(console, rep["changepoints"], args)


def _print_changepoints(console: Any, cps: list[dict[str, Any]], args: argparse.Namespace) -> None:
    """The change points of one metric: a table, or a line saying there is none."""
    from rich.table import Table

    if not cps:
        console.print(f"  no change point (alpha {args.changepoint_alpha:g}, {args.method})")
        return
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


def run(args: argparse.Namespace) -> int:
    if args.trend_runs < 1 or args.rows < 1:
        raise InputError("--trend-runs and --rows must be at least 1", field="--trend-runs")
    request = HistoryRequest(
        model=args.model,
        metric=args.metric,
        statistic=args.statistic,
        machine=args.machine,
        baseline_branch=args.baseline_branch,
        all_branches=args.all_branches,
        trend_runs=args.trend_runs,
        changepoints=args.changepoints,
        method=args.method,
        changepoint_alpha=args.changepoint_alpha,
        store=args.store,
        config=args.config,
    )

    def note(text: str) -> None:
        if args.format != "json":
            stderr_console().print(text, markup=False)

    found = history(request, note)
    if args.format == "json":
        print(json.dumps({**found.head, "metrics": found.metrics}, sort_keys=True, indent=2, allow_nan=False))
    else:
        _print(found.metrics, found.head, args)
    return 0
