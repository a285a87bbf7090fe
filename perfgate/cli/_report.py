"""``perfgate report``: the HTML report with plots of a store's newest runs and their history
(:mod:`perfgate.app.report`)."""

from __future__ import annotations

import argparse
import sys

from perfgate.app.report import ReportRequest, report
from perfgate.cli._flags import add_config_argument, add_flag, add_removed_spelling, add_store_argument
from perfgate.output import output_file, write_output

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_flag(parser, "--html", type=output_file, required=True)
    add_flag(parser, "--comment", type=output_file)
    add_store_argument(parser)
    add_flag(parser, "--model", default=None, default_text="every model in the store")
    add_flag(parser, "--machine", default=None, default_text="every machine in the store")
    add_flag(parser, "--baseline-branch", default="main", default_text="main")
    add_removed_spelling(parser, "--branch", "--baseline-branch")
    add_flag(parser, "--baseline-runs", type=int, default=5, default_text="5, when no baseline was kept")
    add_flag(parser, "--trend-runs", type=int, default=100, metavar="N", default_text="100")
    add_removed_spelling(parser, "--history", "--trend-runs")
    add_config_argument(parser)


def run(args: argparse.Namespace) -> int:
    request = ReportRequest(
        model=args.model,
        machine=args.machine,
        baseline_branch=args.baseline_branch,
        baseline_runs=args.baseline_runs,
        trend_runs=args.trend_runs,
        store=args.store,
        config=args.config,
        outputs=(("--html", args.html), ("--comment", args.comment)),
        comment=args.comment is not None,
    )
    rendered = report(request, lambda text: print(text, file=sys.stderr))
    write_output(args.html, rendered.html)
    if rendered.comment is not None:
        write_output(args.comment, rendered.comment)
    size = len(rendered.html.encode("utf-8"))
    print(f"wrote {args.html} ({size / 1e6:.1f} MB, {rendered.sections} model/machine section(s))", file=sys.stderr)
    return 0
