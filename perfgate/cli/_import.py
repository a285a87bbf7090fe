"""``perfgate import FORMAT FILE --output RUN.json``: another tool's results as a perfgate run.

With a store (``--store``, ``PERFGATE_STORE`` or the configuration) the run is recorded there
too, its metrics named as in the store's newest run of the model wherever a benchmark's
name changed (:func:`perfgate.store.baseline.align_with_history`).
"""

from __future__ import annotations

import argparse
import dataclasses
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from perfgate.app.runs import content_run_id
from perfgate.app.stores import chosen_store, store_file
from perfgate.cli._flags import add_config_argument, add_flag, add_removed_spelling, add_store_argument, config_from
from perfgate.cli._output import stderr_console
from perfgate.core.codec import format_timestamp
from perfgate.core.schema import GitInfo, Machine, Run
from perfgate.core.text import plain
from perfgate.importers import FORMATS, TIME_UNITS, ImportOptions, import_file
from perfgate.output import check_distinct, output_file
from perfgate.runfile import save_run

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("format", choices=list(FORMATS), help="the tool that wrote FILE")
    parser.add_argument("file", type=Path, metavar="FILE", help="the tool's JSON result file (.json or .json.gz)")
    parser.add_argument("--output", type=output_file, required=True, help="run file to write")
    add_flag(parser, "--model", default=None, default_text="the format's name")
    add_flag(parser, "--suite", default=None, default_text="the format's name")
    parser.add_argument(
        "--time-unit",
        choices=list(TIME_UNITS),
        default=None,
        help="unit of timing metrics (default: us; ms for hyperfine; the file's for google-benchmark)",
    )
    parser.add_argument(
        "--machine-from",
        choices=["file", "here"],
        default="file",
        help="where the run's machine fingerprint comes from: file, what the tool recorded (this machine when "
        "it recorded nothing, as hyperfine does), or here, this machine (default: file)",
    )
    add_removed_spelling(parser, "--machine", "--machine-from")
    add_flag(parser, "--git-commit", default=None, default_text="the file's, else git")
    add_flag(parser, "--branch", default=None, default_text="the file's, else from git or the CI's variables")
    add_store_argument(parser)
    add_config_argument(parser)


def _provenance(run: Run, args: argparse.Namespace) -> Run:
    changes: dict[str, Any] = {}
    git = run.git
    if git.commit is None or git.branch is None or args.git_commit or args.branch:
        from perfgate.bench.gitinfo import collect_git

        found = collect_git(args.git_commit or git.commit, args.branch or git.branch)
        # the working tree's state says something only about a commit taken from it
        from_tree = args.git_commit is None and git.commit is None
        changes["git"] = GitInfo(
            commit=found.commit, branch=found.branch, dirty=found.dirty if from_tree else git.dirty
        )
    if args.machine_from == "here" or run.machine.fingerprint is None:
        from perfgate.bench.machine import collect_machine

        details = collect_machine()
        changes["machine"] = Machine(fingerprint=details.pop("fingerprint"), details=details)
    if run.created_at is None:
        changes["created_at"] = format_timestamp(datetime.now(UTC))
    run = dataclasses.replace(run, **changes)
    return dataclasses.replace(run, run_id=content_run_id(run))


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    url = chosen_store(args.store, config)  # record the run there too: --store, PERFGATE_STORE or the configuration
    store_path = store_file(url) if url is not None else None
    check_distinct({"--output": args.output}, {"FILE": args.file, "--config": config.source, "the store": store_path})
    options = ImportOptions(model=args.model, suite=args.suite, time_unit=args.time_unit)
    result = import_file(args.format, args.file, options)
    imported = _provenance(result.run, args)
    save_run(args.output, imported)
    console = stderr_console()  # type: ignore[no-untyped-call]
    from rich.markup import escape

    for note in result.notes:  # notes quote benchmark names, which may hold [brackets]
        console.print(f"[yellow]note[/]: {escape(plain(note))}", highlight=False, soft_wrap=True)
    console.print(
        plain(
            f"imported {len(imported.metrics)} metric(s) from {args.format} file {args.file} → {args.output} "
            f"(model {imported.model}, suite {imported.suite})"
        ),
        markup=False,
        soft_wrap=True,
    )
    if url is not None:
        from perfgate.store import open_store
        from perfgate.store.baseline import align_with_history

        store = open_store(url)
        try:  # the stored copy names each benchmark as the store's runs do; the run file keeps the file's names
            aligned = align_with_history(store, imported) if not store.has_run(imported.run_id or "") else None
            added = store.add_run(aligned.run if aligned is not None else imported)
        finally:
            store.close()
        for note in aligned.notes if aligned is not None else ():
            console.print(f"[yellow]note[/]: {escape(plain(note))}", highlight=False, soft_wrap=True)
        state = "recorded" if added else "already recorded"
        console.print(plain(f"{state} in {store.url}: run {imported.run_id}"), markup=False, soft_wrap=True)
    return 0
