"""``perfgate export prometheus``: the store's newest results as Prometheus metrics.

Four ways out, one of them per call: ``--serve HOST:PORT`` (an HTTP ``/metrics`` endpoint
that reads the store on every scrape), ``--push URL`` (a Pushgateway, one group per model,
machine and suite), ``--textfile PATH`` (node_exporter's textfile collector, written
atomically), and ``--openmetrics PATH``: every run of the branch, each at its own time, for
``promtool tsdb create-blocks-from openmetrics`` (the dashboard's history panels). The use case
is :func:`perfgate.app.export.export`.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

from perfgate.app.export import ExportRequest, export
from perfgate.cli._flags import add_config_argument, add_flag, add_removed_spelling, add_store_argument
from perfgate.output import output_file

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="target", metavar="TARGET", required=True)
    prom = sub.add_parser(
        "prometheus",
        help="the newest run of each model and machine, its check and budgets, as Prometheus metrics",
        description="Export the newest run of each model and machine, its check and budgets, as Prometheus metrics.",
    )
    out = prom.add_mutually_exclusive_group(required=True)
    out.add_argument("--serve", metavar="HOST:PORT", help="serve /metrics here (host defaults to 127.0.0.1)")
    out.add_argument("--push", metavar="URL", help="push to this Pushgateway (e.g. http://127.0.0.1:9091)")
    out.add_argument(
        "--textfile", metavar="PATH", type=output_file, help="write a .prom file for node_exporter, atomically"
    )
    out.add_argument(
        "--openmetrics",
        metavar="PATH",
        type=output_file,
        help="write every run of --baseline-branch, each at its own time, as OpenMetrics for promtool's backfill "
        "(promtool tsdb create-blocks-from openmetrics PATH DATA_DIR)",
    )
    add_store_argument(prom)
    add_flag(prom, "--model", default=None, default_text="every model in the store")
    add_flag(prom, "--machine", default=None, default_text="every machine in the store")
    add_flag(prom, "--baseline-branch", default="main", default_text="main")
    add_removed_spelling(prom, "--branch", "--baseline-branch")
    add_flag(prom, "--baseline-runs", type=int, default=5, default_text="5, when no baseline was kept")
    prom.add_argument("--job", default="perfgate", help="with --push: the job label (default perfgate)")
    add_config_argument(prom)


def _serve(registry: Any, address: str) -> int:
    from perfgate.export.outlets import parse_listen_address, serve

    host, port = parse_listen_address(address)
    server = serve(registry, host, port)
    shown = f"[{host}]" if ":" in host else host
    print(f"serving http://{shown}:{server.server_port}/metrics (Ctrl-C stops)", file=sys.stderr, flush=True)
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.shutdown()
        server.server_close()
    return 0


def run(args: argparse.Namespace) -> int:
    request = ExportRequest(
        store=args.store,
        config=args.config,
        model=args.model,
        machine=args.machine,
        baseline_branch=args.baseline_branch,
        baseline_runs=args.baseline_runs,
        serve=args.serve,
        push=args.push,
        textfile=args.textfile,
        openmetrics=args.openmetrics,
        job=args.job,
    )
    registry = export(request, lambda text: print(text, file=sys.stderr))
    return _serve(registry, args.serve) if registry is not None else 0
