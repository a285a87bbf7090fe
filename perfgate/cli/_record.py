"""``perfgate record``: add finished run files to the result store (:mod:`perfgate.app.record`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from perfgate.app.record import RecordRequest, record
from perfgate.cli._flags import add_config_argument, add_flag, add_store_argument
from perfgate.cli._output import stderr_console
from perfgate.safe.text import plain

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN.json", help="run files to record")
    add_flag(parser, "--branch", default=None, default_text="the run file's")
    add_store_argument(parser)
    add_config_argument(parser)


def run(args: argparse.Namespace) -> int:
    console = stderr_console()
    request = RecordRequest(runs=tuple(args.runs), branch=args.branch, store=args.store, config=args.config)
    record(
        request,
        note=lambda text: console.print(plain(text), markup=False, soft_wrap=True),
        say=lambda text: console.print(plain(text), markup=False),
    )
    return 0
