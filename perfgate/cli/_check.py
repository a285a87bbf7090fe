"""``perfgate check``: compare a run against its baseline; exit 1 on regression or broken budget."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from perfgate.app.check import CheckRequest, check, publish
from perfgate.cli._flags import add_config_argument, add_flag, add_removed_spelling, add_store_argument
from perfgate.cli._output import exit_code_of, write_reports
from perfgate.output import output_file
from perfgate.safe.text import plain

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--baseline", type=Path, help="baseline run file (versioned, or the original specification's flat format)"
    )
    parser.add_argument("--current", type=Path, required=True, help="current run file")
    parser.add_argument("--output", type=output_file, help="write the Markdown report here (default: standard output)")
    add_flag(parser, "--json", type=output_file)
    add_flag(parser, "--html", type=output_file)
    add_flag(parser, "--comment", type=output_file)
    add_flag(parser, "--push-metrics", metavar="URL")
    add_flag(parser, "--threshold", type=float, default=None, default_text="10")
    add_flag(parser, "--alpha", type=float, default=None, default_text="0.01")
    parser.add_argument(
        "--allow-machine-mismatch",
        action="store_true",
        help="compare runs from different machines (the report says so at the top)",
    )
    add_store_argument(parser)
    add_flag(parser, "--baseline-runs", type=int, default=5, default_text="5, when no baseline was kept")
    add_flag(parser, "--baseline-branch", default="main", default_text="main")
    add_removed_spelling(parser, "--branch", "--baseline-branch")
    add_flag(parser, "--quiet", action="store_true")
    add_flag(parser, "--fail-on-inconclusive", action="store_true")
    parser.add_argument(
        "--noise",
        type=Path,
        default=None,
        help="calibration file from perfgate calibrate (default: .perfgate/noise.json when present)",
    )
    parser.add_argument(
        "--notify",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="notify the targets of [tool.perfgate.notify] after the report is written (default: its 'enabled')",
    )
    add_config_argument(parser)


def run(args: argparse.Namespace) -> int:
    outputs = {"--output": args.output, "--json": args.json, "--html": args.html, "--comment": args.comment}
    request = CheckRequest(
        current=args.current,
        baseline=args.baseline,
        store=args.store,
        config=args.config,
        noise=args.noise,
        threshold=args.threshold,
        alpha=args.alpha,
        baseline_runs=args.baseline_runs,
        baseline_branch=args.baseline_branch,
        allow_machine_mismatch=args.allow_machine_mismatch,
        outputs=tuple(outputs.items()),
        warn=not args.quiet,
    )
    outcome = check(request)
    if not args.quiet:
        for warning in outcome.warnings:
            print(f"perfgate check: warning: {plain(warning)}", file=sys.stderr)
        for note in outcome.result.notes:  # imported metrics named after the baseline's (core.benchmark_names)
            print(f"perfgate check: note: {plain(note)}", file=sys.stderr)
    write_reports(args, outcome.result)
    publish(outcome, push_metrics=args.push_metrics, notify=args.notify)  # failures on stderr, never the exit code
    return exit_code_of(outcome.result, args, "check")
