"""``perfgate summary``: Markdown reports joined into one PR comment or job summary, within a hard
limit (:mod:`perfgate.app.summary`)."""

from __future__ import annotations

import argparse

from perfgate.app.summary import DEFAULT_MARKER, GITHUB_COMMENT_LIMIT, SummaryRequest, summary
from perfgate.output import append_output, output_file, write_output

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "reports",
        nargs="+",
        metavar="[LABEL=]REPORT.md",
        help="Markdown reports of perfgate check; the label defaults to the file name without .md",
    )
    parser.add_argument(
        "--output", type=output_file, default=None, help="write the comment body here (default: stdout)"
    )
    parser.add_argument(
        "--append", type=output_file, default=None, help='also append it to this file (e.g. "$GITHUB_STEP_SUMMARY")'
    )
    parser.add_argument(
        "--max-chars",
        type=int,
        default=GITHUB_COMMENT_LIMIT,
        help=f"hard limit, in UTF-8 bytes (default {GITHUB_COMMENT_LIMIT:,}, GitHub's comment limit)",
    )
    parser.add_argument("--marker", default=DEFAULT_MARKER, help="hidden line that identifies the comment")
    parser.add_argument("--title", default="Performance check", help="heading of the comment")
    parser.add_argument("--details-url", default=None, help="link to the full reports (the workflow run)")


def run(args: argparse.Namespace) -> int:
    request = SummaryRequest(
        reports=tuple(args.reports),
        max_chars=args.max_chars,
        marker=args.marker,
        title=args.title,
        details_url=args.details_url,
        outputs=(("--output", args.output), ("--append", args.append)),
    )
    body = summary(request)
    if args.output is not None:
        write_output(args.output, body)
    if args.append is not None:
        append_output(args.append, body)
    if args.output is None and args.append is None:
        print(body, end="")
    return 0
