"""``perfgate calibrate``: learn this machine's run-to-run noise from the history of unchanged runs."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from perfgate.calibration import DEFAULT_NOISE_FILE, PROCESS_DF_KEY, estimate_noise, save_noise
from perfgate.cli._common import (
    add_config_argument,
    add_flag,
    add_removed_spelling,
    add_store_argument,
    config_from,
    model_key,
    stderr_console,
    store_file,
    store_url,
    term,
)
from perfgate.core.codec import format_timestamp
from perfgate.errors import InputError
from perfgate.output import check_distinct, output_file
from perfgate.store import open_store
from perfgate.store.base import RunQuery

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_flag(parser, "--model", required=True)
    add_store_argument(parser)
    add_flag(parser, "--machine", default=None, default_text="this machine")
    add_flag(parser, "--baseline-branch", default="main", default_text="main")
    add_removed_spelling(parser, "--branch", "--baseline-branch")
    add_flag(parser, "--baseline-runs", type=int, default=20, metavar="K", default_text="20; at least 3")
    add_removed_spelling(parser, "--runs", "--baseline-runs")
    parser.add_argument("--output", type=output_file, default=DEFAULT_NOISE_FILE, help="calibration file to update")
    add_config_argument(parser)


_COUNTS_SCAN = 500  # newest runs of a model looked through for counts machines


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    check_distinct(
        {"--output": args.output}, {"the store": store_file(store_url(args, config)), "--config": config.source}
    )
    if args.baseline_runs < 3:
        raise InputError(f"need at least 3 runs to estimate noise, got {args.baseline_runs}", field="--baseline-runs")
    machine = args.machine
    if machine is None:
        from perfgate.bench.machine import collect_machine

        machine = collect_machine()["fingerprint"]
    store = open_store(store_url(args, config))
    console = stderr_console()
    try:
        models = (
            sorted({r.model_key for r in store.runs(RunQuery(machine=machine))})
            if model_key(args.model) == "all"
            else [model_key(args.model)]
        )
        done = 0
        for model in models:
            machines = [machine]
            if args.machine is None:
                # counts carry across the hosts of one kind: a counts run's machine is the instruction
                # set valgrind presents (docs/design.md §12), calibrated wherever it was recorded
                recent = store.runs(RunQuery(model=model, branch=args.baseline_branch, limit=_COUNTS_SCAN))
                machines += sorted({fp for r in recent if (fp := r.machine.fingerprint) and fp.startswith("counts-")})
            for fingerprint in machines:
                runs = store.runs(
                    RunQuery(model=model, machine=fingerprint, branch=args.baseline_branch, limit=args.baseline_runs)
                )
                if len(runs) < 3:
                    if fingerprint == machine:
                        console.print(
                            f"{term(model)}: {len(runs)} run(s) on {term(args.baseline_branch)} from machine "
                            f"{term(machine)}; need 3 — skipped"
                        )
                    continue
                runs.reverse()  # oldest first: successive differences follow time
                sigma = estimate_noise(runs)
                save_noise(
                    args.output,
                    machine=fingerprint,
                    model=model,
                    sigma=sigma,
                    runs=len(runs),
                    run_ids=[r.run_id or "" for r in runs],
                    branch=args.baseline_branch,
                    created_at=format_timestamp(datetime.now(UTC)),
                )
                done += 1
                shown = ", ".join(
                    f"{k} {v:.1%}" if not k.endswith(PROCESS_DF_KEY) else f"{k} {v:g}" for k, v in sorted(sigma.items())
                )
                what = "between-process residue" if fingerprint.startswith("counts-") else "run-to-run σ"
                console.print(f"{term(model)}: {what} from {len(runs)} runs: {term(shown)}")
    finally:
        store.close()
    if not done:
        raise InputError(
            f"no model has 3 runs on {args.baseline_branch} from machine {machine}; record more runs first",
            source=store.url,
        )
    console.print(f"written: {term(args.output)}")
    return 0
