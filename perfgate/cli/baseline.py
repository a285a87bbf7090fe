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

from perfgate.cli._common import (
    add_config_argument,
    config_from,
    console_for,
    model_key,
    stderr_console,
    store_file,
    term_cell,
)
from perfgate.core.baseline import flat_baseline, pool_runs
from perfgate.core.codec import format_timestamp
from perfgate.core.schema import Run
from perfgate.core.stats import summarize
from perfgate.core.text import plain
from perfgate.errors import InputError
from perfgate.output import check_distinct
from perfgate.report.format import fmt_time, fmt_value
from perfgate.runfile import load_run, save_run, write_text_atomic

__all__ = ["DEFAULT_DIR", "add_arguments", "baseline_path", "run"]

DEFAULT_DIR = Path("benchmark_results")


def baseline_path(directory: Path, model: str) -> Path:
    return directory / f"{model_key(model)}_baseline.json"


def _store_argument(parser: argparse.ArgumentParser, help_text: str | None = None) -> None:
    parser.add_argument(
        "--store",
        default=None,
        help=help_text or "store URL (default: PERFGATE_STORE, the configuration, or sqlite:///.perfgate/perfgate.db)",
    )
    add_config_argument(parser)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from perfgate.store.baseline import DEFAULT_BASELINE_RUNS

    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    save = sub.add_parser("save", help="make a run file the baseline of its model")
    save.add_argument("run", type=Path, metavar="RUN.json")
    save.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="baseline folder (default benchmark_results)")
    show = sub.add_parser("show", help="print the baselines (one model or all), from files or with --store")
    show.add_argument("--model", default=None)
    show.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="baseline folder (default benchmark_results)")
    _store_argument(show, "show the baselines kept in this store (with the runs they came from) instead of files")
    update = sub.add_parser("update", help="form baselines from the last K unflagged runs on main (run on merge)")
    update.add_argument("--model", default="all", help="one model, or all (default)")
    update.add_argument(
        "--runs", type=int, default=DEFAULT_BASELINE_RUNS, metavar="K", help="runs per baseline (default 10)"
    )
    update.add_argument("--branch", default="main", help="the branch whose runs form baselines (default main)")
    _store_argument(update)
    accept = sub.add_parser("accept", help="let a run the gate flagged into baselines")
    accept.add_argument("run_id", metavar="RUN_ID")
    _store_argument(accept)
    export = sub.add_parser(
        "export", help="write a stored baseline as the original specification's flat per-model file"
    )
    export.add_argument("--model", required=True)
    export.add_argument("--output", type=Path, required=True, help="file to write (e.g. dqn_baseline.json)")
    export.add_argument("--machine", default=None, help="machine fingerprint, if the model has several")
    export.add_argument("--branch", default="main")
    _store_argument(export)


def _print_table(base: Run, title: str, footer: str) -> None:
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for col in ("metric", "unit", "n", "median", "p95", "p99", "min", "max"):
        table.add_column(col, justify="left" if col in ("metric", "unit") else "right")
    for name, metric in base.metrics.items():
        s = summarize(metric.samples)
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
    from perfgate.store import open_store, resolve_store_url

    return open_store(resolve_store_url(args.store, config_from(args).store))


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

    now = format_timestamp(datetime.now(UTC))
    model = None if args.model == "all" else args.model
    console = stderr_console()
    with _open(args) as store:
        for record, runs in update_baselines(store, created_at=now, model=model, branch=args.branch, k=args.runs):
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
        {"--output": args.output}, {"the store": store_file(args.store, config.store), "--config": config.source}
    )
    with _open(args) as store:
        records = [r for r in _stored(store, args.model) if r.branch == args.branch]
        if args.machine is not None:
            records = [r for r in records if r.machine == args.machine]
        if len(records) != 1:
            machines = ", ".join(sorted({r.machine or "unknown" for r in _stored(store, args.model)}))
            problem = "none" if not records else f"{len(records)}"
            raise InputError(
                f"{problem} baseline(s) of model {args.model!r} match on branch {args.branch!r}"
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
    if args.store is not None:
        return _show_store(args)
    paths = [baseline_path(args.dir, args.model)] if args.model else sorted(args.dir.glob("*_baseline.json"))
    if not paths or not all(p.exists() for p in paths):
        what = f"model {args.model!r}" if args.model else "any model"
        raise InputError(f"no baseline for {what}; save one with perfgate baseline save RUN.json", source=str(args.dir))
    for path in paths:
        _show(path)
    return 0
