"""``perfgate record``: add finished run files to the result store."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from perfgate.app.runs import content_run_id
from perfgate.app.stores import store_url
from perfgate.cli._flags import add_config_argument, add_flag, add_store_argument, config_from
from perfgate.cli._output import stderr_console
from perfgate.core.text import plain
from perfgate.errors import InputError
from perfgate.runfile import load_run
from perfgate.store import RunStatus, open_store

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN.json", help="run files to record")
    add_flag(parser, "--branch", default=None, default_text="the run file's")
    add_store_argument(parser)
    add_config_argument(parser)


def run(args: argparse.Namespace) -> int:
    from perfgate.store.baseline import align_with_history

    config = config_from(args)
    # read every file first: one bad file records nothing
    runs = [load_run(path, config.policy.metric_info) for path in args.runs]
    runs = [r if r.run_id else dataclasses.replace(r, run_id=content_run_id(r)) for r in runs]
    if args.branch is not None:  # as perfgate import --branch: the branch the runs are recorded on
        if not args.branch.strip():
            raise InputError("is empty; give the branch name (e.g. main)", field="--branch")
        runs = [dataclasses.replace(r, git=dataclasses.replace(r.git, branch=args.branch)) for r in runs]
    console = stderr_console()
    store = open_store(store_url(args.store, config))
    try:
        for path, r in zip(args.runs, runs, strict=True):
            # an imported run names each benchmark as the store's runs do (perfgate.core.benchmark_names)
            aligned = align_with_history(store, r) if not store.has_run(r.run_id or "") else None
            added = store.add_run(aligned.run if aligned is not None else r)
            for note in aligned.notes if aligned is not None else ():
                console.print(plain(f"note: {note}"), markup=False, soft_wrap=True)
            state = "recorded" if added else "already recorded"
            verdict = store.status(r.run_id or "")  # a run checked before it was recorded keeps its verdict
            kept = f", status {verdict}" if verdict not in (None, RunStatus.RECORDED) else ""
            console.print(
                plain(f"{state}: {path} → run {r.run_id} (model {r.model}, commit {r.git.commit or 'unknown'}{kept})"),
                markup=False,
            )
    finally:
        store.close()
    return 0
