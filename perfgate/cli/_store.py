"""``perfgate store compact``: rewrite a result store's runs in their bounded form, in place
(:mod:`perfgate.app.store`)."""

from __future__ import annotations

import argparse

from perfgate.app.store import DEFAULT_BATCH, CompactRequest, compact
from perfgate.cli._flags import add_config_argument, add_store_argument
from perfgate.cli._output import stderr_console
from perfgate.safe.text import plain

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    compacting = sub.add_parser(
        "compact",
        help="rewrite every stored run in its bounded form and give the space back",
        description=(
            "Rewrite every stored run whose metrics keep more than 1,001 samples in a group as that group's "
            "1,001 order statistics and its sample count (the form new runs are stored in), a batch of runs to a "
            "transaction, then give the space back. Safe to interrupt and to run again."
        ),
    )
    add_store_argument(compacting)
    add_config_argument(compacting)
    compacting.add_argument(
        "--batch-size",
        type=int,
        default=DEFAULT_BATCH,
        metavar="N",
        help=f"runs rewritten per transaction, 1 to 10,000 (default {DEFAULT_BATCH})",
    )


def run(args: argparse.Namespace) -> int:
    console = stderr_console()

    def progress(done: int, total: int) -> None:
        console.print(plain(f"compacted {done} of {total} runs"), markup=False)
        console.file.flush()

    result = compact(CompactRequest(batch_size=args.batch_size, store=args.store, config=args.config), progress)
    size = ""
    if result.bytes_before is not None and result.bytes_after is not None:
        size = f"; the store went from {result.bytes_before / 1e6:.1f} MB to {result.bytes_after / 1e6:.1f} MB"
    console.print(
        plain(f"{result.rewritten} of {result.runs} runs rewritten in their bounded form{size}"), markup=False
    )
    return 0
