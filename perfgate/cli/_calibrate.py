"""``perfgate calibrate``: learn this machine's run-to-run noise from the history of unchanged runs."""

from __future__ import annotations

import argparse
from collections import Counter
from datetime import UTC, datetime

from perfgate.app.runs import model_key
from perfgate.app.stores import store_file, store_url
from perfgate.calibration import DEFAULT_NOISE_FILE, PROCESS_DF_KEY, estimate_noise, save_noise
from perfgate.cli._flags import add_config_argument, add_flag, add_removed_spelling, add_store_argument, config_from
from perfgate.cli._output import stderr_console, term
from perfgate.core.codec import format_timestamp
from perfgate.errors import InputError
from perfgate.output import check_distinct, output_file
from perfgate.store import open_store
from perfgate.store.base import RunQuery, Store

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


def _counted(values: list[str | None], *, none: str) -> str:
    """``a (7 runs), b (3 runs)``: the most frequent first, at most 5."""
    counts = Counter(v if v else none for v in values)
    shown = ", ".join(f"{v} ({n} run{'s' if n > 1 else ''})" for v, n in counts.most_common(5))
    return shown + (" …" if len(counts) > 5 else "")


def _nothing_learned(store: Store, args: argparse.Namespace, machine: str, unshared: list[tuple[str, str, int]]) -> str:
    """Why no noise was learned, and the flag that would find the runs where there are some."""
    branch = args.baseline_branch
    if unshared:
        model, fingerprint, n = unshared[0]
        return (
            f"no metric is shared by enough runs to learn the noise: of the {n} runs of {model} on {branch} from "
            f"machine {fingerprint}, no metric is in 3 or more; record runs that measure the same metrics "
            "(nothing was written)"
        )
    wanted = None if model_key(args.model) == "all" else model_key(args.model)
    what = f"model {wanted}" if wanted else "any model"
    head = f"no model has 3 runs on {branch} from machine {machine}"
    on_branch = store.runs(RunQuery(model=wanted, branch=branch, limit=_COUNTS_SCAN))
    others = [fp for r in on_branch if (fp := r.machine.fingerprint) != machine]
    if others:  # an imported run carries the machine of the file it came from, not this one
        return (
            f"{head}; runs of {what} on {branch} come from machine(s) {_counted(others, none='unknown')}: "
            "calibrate one of them with --machine FINGERPRINT"
        )
    elsewhere = store.runs(RunQuery(model=wanted, limit=_COUNTS_SCAN))
    here = [r for r in elsewhere if r.machine.fingerprint == machine]
    if here:
        return (
            f"{head}; the runs of {what} from that machine are on branch(es) "
            f"{_counted([r.git.branch for r in here], none='no branch')}: choose one with --baseline-branch, "
            f"or record runs with --branch {branch}"
        )
    if elsewhere:
        return (
            f"{head}; runs of {what} are on branch(es) {_counted([r.git.branch for r in elsewhere], none='no branch')} "
            f"from machine(s) {_counted([r.machine.fingerprint for r in elsewhere], none='unknown')}: choose them "
            "with --baseline-branch and --machine FINGERPRINT"
        )
    return f"{head}; record more runs first"


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    check_distinct(
        {"--output": args.output}, {"the store": store_file(store_url(args.store, config)), "--config": config.source}
    )
    if args.baseline_runs < 3:
        raise InputError(f"need at least 3 runs to estimate noise, got {args.baseline_runs}", field="--baseline-runs")
    machine = args.machine
    if machine is None:
        from perfgate.bench.machine import collect_machine

        machine = collect_machine()["fingerprint"]
    store = open_store(store_url(args.store, config))
    console = stderr_console()
    try:
        models = (
            sorted({r.model_key for r in store.runs(RunQuery(machine=machine))})
            if model_key(args.model) == "all"
            else [model_key(args.model)]
        )
        done = 0
        unshared: list[tuple[str, str, int]] = []  # (model, machine, runs) with runs but no metric shared by 3
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
                if not sigma:  # each metric in fewer than 3 of the runs: nothing to learn, nothing written
                    unshared.append((model, fingerprint, len(runs)))
                    console.print(
                        f"{term(model)}: no metric is in 3 or more of its {len(runs)} run(s) from machine "
                        f"{term(fingerprint)} — skipped"
                    )
                    continue
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
        if not done:
            raise InputError(_nothing_learned(store, args, machine, unshared), source=store.url)
    finally:
        store.close()
    console.print(f"written: {term(args.output)}")
    return 0
