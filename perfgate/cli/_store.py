"""``perfgate store compact``: rewrite a result store's runs in their bounded form, in place.

Runs recorded before the bounded form (:mod:`perfgate.core.reduced`) keep every sample: a
real pytest-benchmark suite's run costs 120-130 MB of a store. ``compact`` rewrites each such
run, a batch of runs to a transaction, then gives the space back (SQLite: VACUUM). Killed at any
moment, it loses nothing; run again, it finishes the work and leaves compacted runs alone.
"""

from __future__ import annotations

import argparse

from perfgate.app.numbers import checked_number
from perfgate.app.stores import store_url
from perfgate.cli._flags import add_config_argument, add_store_argument, config_from
from perfgate.cli._output import stderr_console
from perfgate.core.text import plain
from perfgate.store import open_store

__all__ = ["add_arguments", "run"]

DEFAULT_BATCH = 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    compact = sub.add_parser(
        "compact",
        help="rewrite every stored run in its bounded form and give the space back",
        description=(
            "Rewrite every stored run whose metrics keep more than 1,001 samples in a group as that group's "
            "1,001 order statistics and its sample count (the form new runs are stored in), a batch of runs to a "
            "transaction, then give the space back. Safe to interrupt and to run again."
        ),
    )
    add_store_argument(compact)
    add_config_argument(compact)
    compact.add_argument(
        "--batch-size",
        type=int,
        default=DEFAULT_BATCH,
        metavar="N",
        help=f"runs rewritten per transaction, 1 to 10,000 (default {DEFAULT_BATCH})",
    )


def run(args: argparse.Namespace) -> int:
    batch = checked_number(args.batch_size, "--batch-size", at_least=1, at_most=10_000)
    config = config_from(args)
    console = stderr_console()
    store = open_store(store_url(args.store, config))
    try:

        def progress(done: int, total: int) -> None:
            console.print(plain(f"compacted {done} of {total} runs"), markup=False)
            console.file.flush()

        result = store.compact(batch=batch or DEFAULT_BATCH, progress=progress)
    finally:
        store.close()
    size = ""
    if result.bytes_before is not None and result.bytes_after is not None:
        size = f"; the store went from {result.bytes_before / 1e6:.1f} MB to {result.bytes_after / 1e6:.1f} MB"
    console.print(
        plain(f"{result.rewritten} of {result.runs} runs rewritten in their bounded form{size}"), markup=False
    )
    return 0
