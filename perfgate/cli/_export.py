"""``perfgate export prometheus``: the store's newest results as Prometheus metrics.

Four ways out, one of them per call: ``--serve HOST:PORT`` (an HTTP ``/metrics`` endpoint
that reads the store on every scrape), ``--push URL`` (a Pushgateway, one group per model,
machine and suite), ``--textfile PATH`` (node_exporter's textfile collector, written
atomically), and ``--openmetrics PATH``: every run of the branch, each at its own time, for
``promtool tsdb create-blocks-from openmetrics`` (the dashboard's history panels).
"""

from __future__ import annotations

import argparse
import importlib.util
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from perfgate.cli._common import (
    add_config_argument,
    add_flag,
    add_removed_spelling,
    add_store_argument,
    config_from,
    store_file,
    store_url,
)
from perfgate.config import Config
from perfgate.core.compare import CheckResult
from perfgate.core.policy import Policy
from perfgate.core.schema import Run
from perfgate.errors import ConfigError, InputError, PerfgateError
from perfgate.output import check_distinct, output_file
from perfgate.safe.redact import mask_url
from perfgate.safe.text import one_line
from perfgate.safe.urls import parse_outgoing_url

__all__ = ["add_arguments", "push_check", "push_runs", "require_extra", "run"]


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


def require_extra(module: str, what: str) -> None:
    """Fail with one line (exit 2) when ``module`` of the ``export`` extra is not installed."""
    if importlib.util.find_spec(module) is None:
        raise ConfigError(f"{what} needs the {module} package; install it with pip install 'perfgate[export]'")


def _reader(args: argparse.Namespace, config: Config) -> Any:
    """A function that opens the store, reads the newest states and closes it again."""
    from perfgate.export.latest import RunState, latest_states
    from perfgate.store import open_store

    url = store_url(args, config)

    def read() -> Sequence[RunState]:
        with open_store(url) as store:
            return latest_states(
                store,
                config.policy,
                model=args.model,
                machine=args.machine,
                branch=args.baseline_branch,
                baseline_runs=args.baseline_runs,
            )

    return read


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


def _push_quietly(url: str, states: Sequence[Any], policy: Policy) -> None:
    try:
        from perfgate.export.outlets import push_states

        groups = push_states(url, states, metric_info=policy.metric_info, flag="--push-metrics")
    except (PerfgateError, ModuleNotFoundError) as exc:
        print(f"perfgate: warning: metrics not pushed: {mask_url(one_line(exc))}", file=sys.stderr)
        return
    print(f"pushed {groups} group(s) of metrics to {_shown(url)}", file=sys.stderr)


def _shown(url: str) -> str:
    """``url`` for a message: user, password and secret query parameters masked."""
    return parse_outgoing_url(url, what="URL", default_scheme="http").shown


def push_check(url: str, result: CheckResult, policy: Policy) -> None:
    """``check --push-metrics``: the current run and its check; a failure is a warning on stderr."""
    from perfgate.export.latest import RunState

    state = RunState(run=result.current, result=result, budgets=policy.budgets_for(result.current.model_key))
    _push_quietly(url, [state], policy)


def push_runs(url: str, runs: Sequence[Run], policy: Policy) -> None:
    """``bench --push-metrics``: fresh runs, not compared with anything; a failure is a warning on stderr.

    Each push replaces its (model, machine, suite) group, so the check metrics of an older
    run do not linger next to the values of the new one.
    """
    from perfgate.export.latest import fresh_states

    _push_quietly(url, fresh_states(runs, policy), policy)


def _history(args: argparse.Namespace, config: Config) -> int:
    from perfgate.export.history import history_openmetrics, read_history
    from perfgate.export.prometheus import unix_time
    from perfgate.output import write_output
    from perfgate.store import open_store

    with open_store(store_url(args, config)) as store:
        runs, flagged = read_history(store, model=args.model, machine=args.machine, branch=args.baseline_branch)
    placed = [r for r in runs if unix_time(r.created_at) is not None]
    if len(placed) < len(runs):
        print(f"left out {len(runs) - len(placed)} run(s) without created_at: they have no time", file=sys.stderr)
    write_output(args.openmetrics, history_openmetrics(placed, flagged, config.policy.metric_info))
    print(one_line(f"wrote {len(placed)} run(s) to {args.openmetrics}"), file=sys.stderr)
    return 0


def run(args: argparse.Namespace) -> int:
    from perfgate.export.outlets import push_states
    from perfgate.export.prometheus import PerfgateCollector, exposition, make_registry
    from perfgate.output import write_output

    require_extra("prometheus_client", "perfgate export prometheus")
    config = config_from(args)
    outputs = {"--textfile": args.textfile, "--openmetrics": args.openmetrics}
    check_distinct(outputs, {"--config": config.source, "the store": store_file(store_url(args, config))})
    if args.baseline_runs < 1:
        raise InputError(f"must be at least 1, got {args.baseline_runs}", field="--baseline-runs")
    if args.textfile is not None and args.textfile.suffix != ".prom":
        raise InputError("node_exporter's textfile collector reads only *.prom files", field="--textfile")
    if args.openmetrics is not None:
        return _history(args, config)
    if args.push is not None:  # a bad URL fails before the store is read
        parse_outgoing_url(args.push, what="--push", default_scheme="http")
    read = _reader(args, config)
    states = read()  # a bad store URL fails here, before anything is served or written
    for state in states:
        if state.note:
            who = f"{state.run.model_key} on {state.machine}"
            print(one_line(f"{who}: could not check, exported as could_not_decide: {state.note}"), file=sys.stderr)
    if args.push is not None:
        groups = push_states(args.push, states, job=args.job, metric_info=config.policy.metric_info)
        print(f"pushed {groups} group(s) to {_shown(args.push)}", file=sys.stderr)
        return 0
    if args.textfile is not None:
        registry = make_registry(PerfgateCollector(lambda: states, config.policy.metric_info))
        write_output(args.textfile, exposition(registry))  # atomic: the collector never reads half a file
        print(one_line(f"wrote {len(states)} run(s) to {args.textfile}"), file=sys.stderr)
        return 0
    registry = make_registry(PerfgateCollector(read, config.policy.metric_info))
    return _serve(registry, args.serve)
