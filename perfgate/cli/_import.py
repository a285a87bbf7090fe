"""``perfgate import FORMAT FILE --output RUN.json``: another tool's results as a perfgate run,
recorded in the store too when one is chosen (:mod:`perfgate.app.importing`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from perfgate.app.importing import Imported, ImportRequest, import_results
from perfgate.cli._flags import add_config_argument, add_flag, add_removed_spelling, add_store_argument
from perfgate.cli._output import stderr_console
from perfgate.importers import FORMATS, TIME_UNITS
from perfgate.output import output_file
from perfgate.safe.text import plain

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


def run(args: argparse.Namespace) -> int:
    from rich.markup import escape

    console = stderr_console()

    def imported(done: Imported) -> None:
        for note in done.notes:  # notes quote benchmark names, which may hold [brackets]
            console.print(f"[yellow]note[/]: {escape(plain(note))}", highlight=False, soft_wrap=True)
        console.print(
            plain(
                f"imported {len(done.run.metrics)} metric(s) from {args.format} file {args.file} → {args.output} "
                f"(model {done.run.model}, suite {done.run.suite})"
            ),
            markup=False,
            soft_wrap=True,
        )

    request = ImportRequest(
        format=args.format,
        file=args.file,
        output=args.output,
        model=args.model,
        suite=args.suite,
        time_unit=args.time_unit,
        machine_from=args.machine_from,
        git_commit=args.git_commit,
        branch=args.branch,
        store=args.store,
        config=args.config,
    )
    recorded = import_results(request, imported)
    if recorded is not None:
        for note in recorded.notes:
            console.print(f"[yellow]note[/]: {escape(plain(note))}", highlight=False, soft_wrap=True)
        state = "recorded" if recorded.added else "already recorded"
        console.print(plain(f"{state} in {recorded.url}: run {recorded.run_id}"), markup=False, soft_wrap=True)
    return 0
