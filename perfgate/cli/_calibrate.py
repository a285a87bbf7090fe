"""``perfgate calibrate``: learn this machine's run-to-run noise from the history of unchanged runs
(:mod:`perfgate.app.calibrate`)."""

from __future__ import annotations

import argparse

from perfgate.app.calibrate import Calibrated, CalibrateRequest, calibrate
from perfgate.calibration import DEFAULT_NOISE_FILE, PROCESS_DF_KEY
from perfgate.cli._flags import add_config_argument, add_flag, add_removed_spelling, add_store_argument
from perfgate.cli._output import stderr_console, term
from perfgate.output import output_file

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


def run(args: argparse.Namespace) -> int:
    console = stderr_console()

    def told(step: Calibrated) -> None:
        if step.sigma:
            shown = ", ".join(
                f"{k} {v:.1%}" if not k.endswith(PROCESS_DF_KEY) else f"{k} {v:g}"
                for k, v in sorted(step.sigma.items())
            )
            what = "between-process residue" if step.machine.startswith("counts-") else "run-to-run σ"
            console.print(f"{term(step.model)}: {what} from {step.runs} runs: {term(shown)}")
        elif step.runs < 3:
            console.print(
                f"{term(step.model)}: {step.runs} run(s) on {term(args.baseline_branch)} from machine "
                f"{term(step.machine)}; need 3 — skipped"
            )
        else:
            console.print(
                f"{term(step.model)}: no metric is in 3 or more of its {step.runs} run(s) from machine "
                f"{term(step.machine)} — skipped"
            )

    request = CalibrateRequest(
        model=args.model,
        machine=args.machine,
        baseline_branch=args.baseline_branch,
        baseline_runs=args.baseline_runs,
        output=args.output,
        store=args.store,
        config=args.config,
    )
    calibrate(request, told)
    console.print(f"written: {term(args.output)}")
    return 0
