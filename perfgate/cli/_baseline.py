"""``perfgate baseline``: per-model baselines, as files or kept in the store.

Files (as the original specification): ``save RUN.json`` writes ``<dir>/<model>_baseline.json``; ``show``
prints them. From the store (what CI runs on a merge to main): ``update`` forms the
baseline of every model and machine from the last K unflagged runs on main, ``accept
RUN_ID`` lets a run the gate flagged into baselines, ``show --store`` says which runs a
baseline came from, ``export`` writes it as a flat file of the original specification's format.
The use cases are in :mod:`perfgate.app.baseline`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from perfgate.app import baseline
from perfgate.app.baseline import DEFAULT_DIR
from perfgate.cli._flags import add_config_argument, add_flag, add_removed_spelling, add_store_argument
from perfgate.cli._output import console_for, stderr_console, term_cell
from perfgate.core.reduced import metric_summary
from perfgate.core.schema import Run
from perfgate.core.stats import summarize
from perfgate.output import output_file
from perfgate.report.formatting import fmt_time, fmt_value
from perfgate.safe.text import plain

if TYPE_CHECKING:
    from perfgate.store.base import BaselineRecord

__all__ = ["add_arguments", "run"]


def _store_argument(parser: argparse.ArgumentParser) -> None:
    add_store_argument(parser)
    add_config_argument(parser)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from perfgate.store.baseline import DEFAULT_BASELINE_RUNS

    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    dir_help = "folder of the baseline files, <model>_baseline.json"
    save = _action(
        sub,
        "save",
        "make a run file the baseline of its model",
        "Copy RUN.json to <dir>/<model>_baseline.json, the file perfgate check --baseline reads.",
    )
    save.add_argument("run", type=Path, metavar="RUN.json", help="the run file that becomes the baseline")
    save.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=f"{dir_help} (default: benchmark_results)")
    show = _action(
        sub,
        "show",
        "print the baselines (one model or all), from files or with --store",
        "Print each baseline's metrics (median, p95, p99, min, max). Without --store, the files of --dir; "
        "with --store, the baselines kept in the store and the runs each was formed from.",
    )
    add_flag(show, "--model", default=None, default_text="every model")
    show.add_argument(
        "--dir",
        type=Path,
        default=None,
        help=f"{dir_help} (default: benchmark_results; read unless a store is chosen: --store, PERFGATE_STORE "
        "or the configuration)",
    )
    _store_argument(show)
    update = _action(
        sub,
        "update",
        "form baselines from the newest unflagged runs of the baseline branch (run on merge)",
        "For every model and machine (or one model), pool the samples of the newest K recorded runs of the "
        "baseline branch that the check did not flag into the baseline perfgate check --store compares with.",
    )
    add_flag(update, "--model", default="all", default_text="all")
    add_flag(update, "--baseline-runs", type=int, default=DEFAULT_BASELINE_RUNS, metavar="K", default_text="10")
    add_removed_spelling(update, "--runs", "--baseline-runs")
    add_flag(update, "--baseline-branch", default="main", default_text="main")
    add_removed_spelling(update, "--branch", "--baseline-branch")
    _store_argument(update)
    accept = _action(
        sub,
        "accept",
        "let a run the gate flagged into baselines",
        "A run whose check found a regression is kept out of baselines. Accept it when the slowdown is "
        "intended; it counts from the next perfgate baseline update on.",
    )
    accept.add_argument("run_id", metavar="RUN_ID", help="the run's id, as perfgate check and perfgate record print it")
    _store_argument(accept)
    export = _action(
        sub,
        "export",
        "write a stored baseline as the original specification's flat per-model file",
        "Write the baseline kept in the store for one model (and machine) as a file of the flat "
        "single-number format of the original specification: one median per metric.",
    )
    add_flag(export, "--model", required=True)
    export.add_argument("--output", type=output_file, required=True, help="file to write (e.g. dqn_baseline.json)")
    add_flag(export, "--machine", default=None, default_text="the model's only machine")
    add_flag(export, "--baseline-branch", default="main", default_text="main")
    add_removed_spelling(export, "--branch", "--baseline-branch")
    _store_argument(export)


def _action(sub: argparse._SubParsersAction, name: str, help_text: str, description: str) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    return sub.add_parser(name, help=help_text, description=f"{help_text[0].upper()}{help_text[1:]}. {description}")


def _print_table(base: Run, title: str, footer: str) -> None:
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for col in ("metric", "unit", "n", "median", "p95", "p99", "min", "max"):
        table.add_column(col, justify="left" if col in ("metric", "unit") else "right")
    for name, metric in base.metrics.items():
        s = metric_summary(metric) if metric.sizes is not None else summarize(metric.samples)
        values = (fmt_value(v) for v in (s.median, s.p95, s.p99, s.min, s.max))
        table.add_row(term_cell(name), term_cell(metric.unit), str(s.n), *values)
    console = console_for()
    console.print(table)
    console.print(plain(footer), soft_wrap=True, markup=False)


def _show_files(request: baseline.ShowRequest) -> None:
    for path, base in baseline.baseline_files(request):
        _print_table(
            base,
            f"{base.model} baseline — {path}",
            f"recorded {fmt_time(base.created_at)} UTC, commit {base.git.commit or 'unknown'}, "
            f"machine {base.machine.fingerprint or 'unknown'}",
        )


def _show_store(request: baseline.ShowRequest) -> None:
    for kept in baseline.stored_baselines(request):
        record = kept.record
        lines = [
            f"store {kept.store_url}; formed {fmt_time(record.created_at)} UTC by perfgate baseline update: "
            f"samples pooled from {len(kept.runs)} run(s) on {record.branch}:"
        ]
        lines += [
            f"  {r.run_id}  {fmt_time(r.created_at)}  commit {r.git.commit or 'unknown'}  status {status}"
            for r, status in zip(kept.runs, kept.statuses, strict=True)
        ]
        _print_table(kept.pooled, f"{record.model} baseline — machine {record.machine or 'unknown'}", "\n".join(lines))


def _update(args: argparse.Namespace) -> None:
    console = stderr_console()

    def formed(record: BaselineRecord, runs: list[Run]) -> None:
        newest = runs[0]
        console.print(
            plain(
                f"baseline of {record.model} on machine {record.machine or 'unknown'} ({record.branch}): "
                f"{len(runs)} run(s), newest {newest.run_id} (commit {newest.git.commit or 'unknown'})"
            ),
            markup=False,
        )

    request = baseline.UpdateRequest(
        model=args.model,
        baseline_runs=args.baseline_runs,
        baseline_branch=args.baseline_branch,
        store=args.store,
        config=args.config,
    )
    baseline.update(request, formed)


def _accept(args: argparse.Namespace) -> None:
    from perfgate.store import RunStatus

    before = baseline.accept(args.run_id, baseline.StoreRequest(store=args.store, config=args.config))
    if before is RunStatus.FLAGGED:
        print(plain(f"accepted run {args.run_id}: it enters baselines at the next perfgate baseline update"))
    else:
        print(plain(f"run {args.run_id} is not flagged (status {before}); nothing to accept"))


def _export(args: argparse.Namespace) -> None:
    request = baseline.ExportRequest(
        model=args.model,
        output=args.output,
        machine=args.machine,
        baseline_branch=args.baseline_branch,
        store=args.store,
        config=args.config,
    )
    written = baseline.export(request)
    base, record = written.base, written.record
    print(
        plain(
            f"wrote the {base.model} baseline ({len(record.run_ids)} run(s), machine {record.machine}) to {args.output}"
        )
    )


def run(args: argparse.Namespace) -> int:
    if args.action == "save":
        base, target = baseline.save(args.run, args.dir)
        print(plain(f"saved {args.run} as the {base.model} baseline: {target}"))
    elif args.action == "update":
        _update(args)
    elif args.action == "accept":
        _accept(args)
    elif args.action == "export":
        _export(args)
    else:
        request = baseline.ShowRequest(model=args.model, dir=args.dir, store=args.store, config=args.config)
        if baseline.uses_store(request):
            _show_store(request)
        else:
            _show_files(request)
    return 0
