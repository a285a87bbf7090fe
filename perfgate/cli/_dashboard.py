"""``perfgate dashboard``: write the Grafana dashboard of perfgate's Prometheus metrics."""

from __future__ import annotations

import argparse
import sys

from perfgate.output import output_file, write_output

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--output",
        type=output_file,
        default=None,
        help="write the dashboard JSON here (default: standard output); import it in Grafana",
    )


def run(args: argparse.Namespace) -> int:
    from perfgate.app.dashboard import dashboard

    text = dashboard()
    if args.output is None:
        sys.stdout.write(text)
    else:
        write_output(args.output, text)
        print(f"wrote the Grafana dashboard to {args.output}", file=sys.stderr)
    return 0
