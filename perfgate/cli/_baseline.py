"""``perfgate baseline``: per-model baselines, as files or kept in the store.

Files (as the original specification): ``save RUN.json`` writes ``<dir>/<model>_baseline.json``; ``show``
prints them. From the store (what CI runs on a merge to main): ``update`` forms the
baseline of every model and machine from the last K unflagged runs on main, ``accept
RUN_ID`` lets a run the gate flagged into baselines, ``show --store`` says which runs a
baseline came from, ``export`` writes it as a flat file of the original specification's format.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path

from perfgate.app.numbers import checked_number
from perfgate.app.runs import model_key
from perfgate.app.stores import chosen_store, store_file, store_url
from perfgate.cli._flags import add_config_argument, add_flag, add_removed_spelling, add_store_argument, config_from
from perfgate.cli._output import console_for, stderr_console, term_cell
from perfgate.core.baseline import flat_baseline, pool_runs
from perfgate.core.codec import format_timestamp
from perfgate.core.reduced import metric_summary
from perfgate.core.schema import Run
from perfgate.core.stats import summarize
from perfgate.core.text import plain
from perfgate.errors import InputError
from perfgate.output import check_distinct, output_file
from perfgate.report.formatting import fmt_time, fmt_value
from perfgate.runfile import load_run, save_run, write_text_atomic

__all__ = ["DEFAULT_DIR", "add_arguments", "baseline_path", "run"]

DEFAULT_DIR = Path("benchmark_results")


def baseline_path(directory: Path, model: str) -> Path:
    return directory / f"{model_key(model)}_baseline.json"


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


def _show(path: Path) -> None:
    base = load_run(path)
    _print_table(
        base,
        f"{base.model} baseline — {path}",
        f"recorded {fmt_time(base.created_at)} UTC, commit {base.git.commit or 'unknown'}, "
        f"machine {base.machine.fingerprint or 'unknown'}",
    )


def _open(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from perfgate.store import open_store

    return open_store(store_url(args.store, config_from(args)))


def _stored(store, model: str | None):  # type: ignore[no-untyped-def]
    records = store.baselines(None if model in (None, "all") else model)
    if not records:
        what = f"model {model!r}" if model not in (None, "all") else "any model"
        raise InputError(
            f"no baseline kept for {what}; form one with perfgate baseline update (after recording runs of main)",
            source=store.url,
        )
    return records


def _show_store(args: argparse.Namespace) -> int:
    with _open(args) as store:
        for record in _stored(store, args.model):
            runs = [store.get_run(run_id) for run_id in record.run_ids]
            lines = [
                f"store {store.url}; formed {fmt_time(record.created_at)} UTC by perfgate baseline update: "
                f"samples pooled from {len(runs)} run(s) on {record.branch}:"
            ]
            lines += [
                f"  {r.run_id}  {fmt_time(r.created_at)}  commit {r.git.commit or 'unknown'}  "
                f"status {store.status(r.run_id or '')}"
                for r in runs
            ]
            _print_table(
                pool_runs(runs),
                f"{record.model} baseline — machine {record.machine or 'unknown'}",
                "\n".join(lines),
            )
    return 0


def _update(args: argparse.Namespace) -> int:
    from perfgate.store.baseline import update_baselines

    checked_number(args.baseline_runs, "--baseline-runs", at_least=1, at_most=10_000)
    now = format_timestamp(datetime.now(UTC))
    model = None if args.model == "all" else args.model
    console = stderr_console()
    with _open(args) as store:
        for record, runs in update_baselines(
            store, created_at=now, model=model, branch=args.baseline_branch, k=args.baseline_runs
        ):
            newest = runs[0]
            console.print(
                plain(
                    f"baseline of {record.model} on machine {record.machine or 'unknown'} ({record.branch}): "
                    f"{len(runs)} run(s), newest {newest.run_id} (commit {newest.git.commit or 'unknown'})"
                ),
                markup=False,
            )
    return 0


def _accept(args: argparse.Namespace) -> int:
    from perfgate.store import RunStatus
    from perfgate.store.baseline import accept_run

    with _open(args) as store:
        before = accept_run(store, args.run_id)
    if before is RunStatus.FLAGGED:
        print(plain(f"accepted run {args.run_id}: it enters baselines at the next perfgate baseline update"))
    else:
        print(plain(f"run {args.run_id} is not flagged (status {before}); nothing to accept"))
    return 0


def _export(args: argparse.Namespace) -> int:
    config = config_from(args)
    check_distinct(
        {"--output": args.output}, {"the store": store_file(store_url(args.store, config)), "--config": config.source}
    )
    with _open(args) as store:
        records = [r for r in _stored(store, args.model) if r.branch == args.baseline_branch]
        if args.machine is not None:
            records = [r for r in records if r.machine == args.machine]
        if len(records) != 1:
            machines = ", ".join(sorted({r.machine or "unknown" for r in _stored(store, args.model)}))
            problem = "none" if not records else f"{len(records)}"
            raise InputError(
                f"{problem} baseline(s) of model {args.model!r} match on branch {args.baseline_branch!r}"
                f"{f' and machine {args.machine}' if args.machine else ''}; it has baselines for machine(s) "
                f"{machines}: choose one with --machine",
                source=store.url,
            )
        record = records[0]
        base = pool_runs([store.get_run(run_id) for run_id in record.run_ids])
    doc = flat_baseline(base, timestamp=record.created_at)
    write_text_atomic(args.output, json.dumps(doc, sort_keys=True, indent=2) + "\n")
    print(
        plain(
            f"wrote the {base.model} baseline ({len(record.run_ids)} run(s), machine {record.machine}) to {args.output}"
        )
    )
    return 0


def run(args: argparse.Namespace) -> int:
    if args.action == "save":
        base = load_run(args.run)
        target = baseline_path(args.dir, base.model)
        save_run(target, base)
        print(plain(f"saved {args.run} as the {base.model} baseline: {target}"))
        return 0
    if args.action == "update":
        return _update(args)
    if args.action == "accept":
        return _accept(args)
    if args.action == "export":
        return _export(args)
    if args.dir is None and chosen_store(args.store, config_from(args)) is not None:
        return _show_store(args)
    args.dir = args.dir if args.dir is not None else DEFAULT_DIR
    paths = [baseline_path(args.dir, args.model)] if args.model else sorted(args.dir.glob("*_baseline.json"))
    if not paths or not all(p.exists() for p in paths):
        what = f"model {args.model!r}" if args.model else "any model"
        raise InputError(f"no baseline for {what}; save one with perfgate baseline save RUN.json", source=str(args.dir))
    for path in paths:
        _show(path)
    return 0
