"""``perfgate calibrate``: learn this machine's run-to-run noise from the history of unchanged runs."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path

from perfgate.calibration import DEFAULT_NOISE_FILE, estimate_noise, save_noise
from perfgate.cli._common import add_config_argument, config_from, model_key, stderr_console, store_file, term
from perfgate.core.codec import format_timestamp
from perfgate.errors import InputError
from perfgate.output import check_distinct
from perfgate.store import open_store, resolve_store_url
from perfgate.store.base import RunQuery

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="model to calibrate (or all)")
    parser.add_argument("--store", default=None, help="store URL (default: PERFGATE_STORE / configuration / SQLite)")
    parser.add_argument("--machine", default=None, help="machine fingerprint (default: this machine)")
    parser.add_argument("--branch", default="main", help="branch whose runs count as unchanged (default main)")
    parser.add_argument("--runs", type=int, default=20, help="most recent runs to use (default 20, at least 3)")
    parser.add_argument("--output", type=Path, default=DEFAULT_NOISE_FILE, help="calibration file to update")
    add_config_argument(parser)


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    check_distinct(
        {"--output": args.output}, {"the store": store_file(args.store, config.store), "--config": config.source}
    )
    if args.runs < 3:
        raise InputError(f"need at least 3 runs to estimate noise, got {args.runs}", field="--runs")
    machine = args.machine
    if machine is None:
        from perfgate.bench.machine import collect_machine

        machine = collect_machine()["fingerprint"]
    store = open_store(resolve_store_url(args.store, config.store))
    console = stderr_console()
    try:
        models = (
            sorted({r.model_key for r in store.runs(RunQuery(machine=machine))})
            if model_key(args.model) == "all"
            else [model_key(args.model)]
        )
        done = 0
        for model in models:
            runs = store.runs(RunQuery(model=model, machine=machine, branch=args.branch, limit=args.runs))
            if len(runs) < 3:
                console.print(
                    f"{term(model)}: {len(runs)} run(s) on {term(args.branch)} from machine {term(machine)}; "
                    "need 3 — skipped"
                )
                continue
            runs.reverse()  # oldest first: successive differences follow time
            sigma = estimate_noise(runs)
            save_noise(
                args.output,
                machine=machine,
                model=model,
                sigma=sigma,
                runs=len(runs),
                branch=args.branch,
                created_at=format_timestamp(datetime.now(UTC)),
            )
            done += 1
            shown = ", ".join(f"{k} {v:.1%}" for k, v in sorted(sigma.items()))
            console.print(f"{term(model)}: run-to-run σ from {len(runs)} runs: {term(shown)}")
    finally:
        store.close()
    if not done:
        raise InputError(
            f"no model has 3 runs on {args.branch} from machine {machine}; record more runs first", source=store.url
        )
    console.print(f"written: {term(args.output)}")
    return 0
