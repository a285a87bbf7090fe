"""``perfgate export prometheus``: the store's newest results as Prometheus metrics, and the pushes
of ``check --push-metrics`` and ``bench --push-metrics``.

:func:`export` writes the OpenMetrics history (``--openmetrics``), pushes to a Pushgateway
(``--push``) or writes node_exporter's textfile (``--textfile``); for ``--serve`` it returns the
registry the caller serves, which reads the store on every scrape.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfgate.app.stores import store_file, store_url
from perfgate.config import Config, load_config
from perfgate.core.compare import CheckResult
from perfgate.core.policy import Policy
from perfgate.core.schema import Run
from perfgate.errors import ConfigError, InputError, PerfgateError
from perfgate.output import check_distinct
from perfgate.safe.redact import mask_url
from perfgate.safe.text import one_line
from perfgate.safe.urls import parse_outgoing_url

__all__ = ["ExportRequest", "export", "push_check", "push_runs", "require_extra"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportRequest:
    """Which runs to export (model, machine, branch: None for every one) and where: one of ``serve``
    (``HOST:PORT``), ``push`` (a Pushgateway URL), ``textfile`` and ``openmetrics`` (files)."""

    store: str | None = None
    config: Path | None = None
    model: str | None = None
    machine: str | None = None
    baseline_branch: str = "main"
    baseline_runs: int = 5
    serve: str | None = None
    push: str | None = None
    textfile: Path | None = None
    openmetrics: Path | None = None
    job: str = "perfgate"


def require_extra(module: str, what: str) -> None:
    """Fail with one line (exit 2) when ``module`` of the ``export`` extra is not installed."""
    if importlib.util.find_spec(module) is None:
        raise ConfigError(f"{what} needs the {module} package; install it with pip install 'perfgate[export]'")


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


def _reader(request: ExportRequest, config: Config) -> Any:
    """A function that opens the store, reads the newest states and closes it again."""
    from perfgate.export.latest import RunState, latest_states
    from perfgate.store import open_store

    url = store_url(request.store, config)

    def read() -> Sequence[RunState]:
        with open_store(url) as store:
            return latest_states(
                store,
                config.policy,
                model=request.model,
                machine=request.machine,
                branch=request.baseline_branch,
                baseline_runs=request.baseline_runs,
            )

    return read


def _history(request: ExportRequest, config: Config, say: Callable[[str], None]) -> None:
    from perfgate.export.history import history_openmetrics, read_history
    from perfgate.export.prometheus import unix_time
    from perfgate.output import write_output
    from perfgate.store import open_store

    assert request.openmetrics is not None
    with open_store(store_url(request.store, config)) as store:
        runs, flagged = read_history(
            store, model=request.model, machine=request.machine, branch=request.baseline_branch
        )
    placed = [r for r in runs if unix_time(r.created_at) is not None]
    if len(placed) < len(runs):
        say(f"left out {len(runs) - len(placed)} run(s) without created_at: they have no time")
    write_output(request.openmetrics, history_openmetrics(placed, flagged, config.policy.metric_info))
    say(one_line(f"wrote {len(placed)} run(s) to {request.openmetrics}"))


def export(request: ExportRequest, say: Callable[[str], None]) -> Any:
    """Export as ``request`` says, telling ``say`` what was done; the registry to serve for
    ``request.serve``, else None.

    Raises:
        ConfigError: the ``export`` extra is not installed, the configuration cannot be used.
        InputError: a bad ``--baseline-runs``, ``--textfile`` or ``--push``; an output that names an input.
    """
    from perfgate.export.outlets import push_states
    from perfgate.export.prometheus import PerfgateCollector, exposition, make_registry
    from perfgate.output import write_output

    require_extra("prometheus_client", "perfgate export prometheus")
    config = load_config(request.config)
    outputs = {"--textfile": request.textfile, "--openmetrics": request.openmetrics}
    check_distinct(outputs, {"--config": config.source, "the store": store_file(store_url(request.store, config))})
    if request.baseline_runs < 1:
        raise InputError(f"must be at least 1, got {request.baseline_runs}", field="--baseline-runs")
    if request.textfile is not None and request.textfile.suffix != ".prom":
        raise InputError("node_exporter's textfile collector reads only *.prom files", field="--textfile")
    if request.openmetrics is not None:
        _history(request, config, say)
        return None
    if request.push is not None:  # a bad URL fails before the store is read
        parse_outgoing_url(request.push, what="--push", default_scheme="http")
    read = _reader(request, config)
    states = read()  # a bad store URL fails here, before anything is served or written
    for state in states:
        if state.note:
            who = f"{state.run.model_key} on {state.machine}"
            say(one_line(f"{who}: could not check, exported as could_not_decide: {state.note}"))
    if request.push is not None:
        groups = push_states(request.push, states, job=request.job, metric_info=config.policy.metric_info)
        say(f"pushed {groups} group(s) to {_shown(request.push)}")
        return None
    if request.textfile is not None:
        registry = make_registry(PerfgateCollector(lambda: states, config.policy.metric_info))
        write_output(request.textfile, exposition(registry))  # atomic: the collector never reads half a file
        say(one_line(f"wrote {len(states)} run(s) to {request.textfile}"))
        return None
    return make_registry(PerfgateCollector(read, config.policy.metric_info))
