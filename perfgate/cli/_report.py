"""``perfgate report``: the HTML report with plots of a store's newest runs and their history."""

from __future__ import annotations

import argparse
import sys

from perfgate.app.stores import store_file, store_url
from perfgate.cli._flags import add_config_argument, add_flag, add_removed_spelling, add_store_argument, config_from
from perfgate.core.text import one_line
from perfgate.errors import InputError
from perfgate.output import check_distinct, output_file, write_output

__all__ = ["add_arguments", "run"]

_TAILS = ("p95", "p99")


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


def _series(store, state, history: int):  # type: ignore[no-untyped-def]
    """Each metric's history per statistic: the median, and the tails the check compared."""
    from perfgate.store import SeriesPoint

    run = state.run
    tails: dict[str, set[str]] = {}
    for c in state.result.comparisons if state.result else ():
        if c.statistic in _TAILS:
            tails.setdefault(c.metric, set()).add(c.statistic)
    out: dict[str, dict[str, list[SeriesPoint]]] = {}
    for name in run.metrics:
        out[name] = {
            stat: store.series(run.model_key, run.machine.fingerprint, name, stat, suite=run.suite, limit=history)
            for stat in ("median", *sorted(tails.get(name, ())))
        }
    return out


def _machine_history(store, state, series, history: int):  # type: ignore[no-untyped-def]
    """The machine-speed index of the history's runs (oldest first), and each metric's median
    series normalised by it (as ``perfgate history`` searches change points), where every run
    of the series timed the same reference kernel with the metric."""
    import numpy as np

    from perfgate.core.noise import normalised
    from perfgate.report.plots import IndexPoint
    from perfgate.store import RunQuery

    run = state.run
    query = RunQuery(model=run.model_key, machine=run.machine.fingerprint, suite=run.suite, limit=history)
    runs = {r.run_id: r for r in store.runs(query)}
    index = [
        IndexPoint(run_id=r.run_id, created_at=r.created_at, commit=r.git.commit, seconds=dict(r.machine_index))
        for r in reversed(list(runs.values()))
        if r.machine_index
    ]
    scaled: dict[str, list[float]] = {}
    for name, stats in series.items():
        latest = run.metrics.get(name)
        points = stats.get("median", [])
        if latest is None or latest.reference is None or not points:
            continue
        scale = float(np.median(latest.reference.seconds))
        values = []
        for point in points:
            if point.run_id not in runs:
                runs[point.run_id] = store.get_run(point.run_id)
            metric = runs[point.run_id].metrics.get(name)
            norm = normalised(metric) if metric is not None else None
            if norm is None or metric.reference.kernel != latest.reference.kernel:
                break
            values.append(float(np.median(norm.samples)) * scale)
        else:
            scaled[name] = values
    return index, scaled


def run(args: argparse.Namespace) -> int:
    from perfgate.core.compare import budgets_only
    from perfgate.export.latest import latest_states
    from perfgate.report.html import ReportSection, render_html
    from perfgate.store import mask_url, open_store

    config = config_from(args)
    for flag, value in (("--baseline-runs", args.baseline_runs), ("--trend-runs", args.trend_runs)):
        if value < 1:
            raise InputError(f"must be at least 1, got {value}", field=flag)
    url = store_url(args.store, config)
    check_distinct(
        {"--html": args.html, "--comment": args.comment}, {"the store": store_file(url), "--config": config.source}
    )
    with open_store(url) as store:
        states = latest_states(
            store,
            config.policy,
            model=args.model,
            machine=args.machine,
            branch=args.baseline_branch,
            baseline_runs=args.baseline_runs,
        )
        if not states:
            what = f"of model {args.model!r}" if args.model else "at all"
            where = f" on machine {args.machine!r}" if args.machine else ""
            raise InputError(
                f"the store {mask_url(url)} has no run {what}{where}; record runs with perfgate record",
                field="--model" if args.model else "--store",
            )
        sections = []
        labelled = []
        for state in states:
            if state.note:
                print(one_line(f"{state.run.model_key} on {state.machine}: {state.note}"), file=sys.stderr)
            result = state.result or budgets_only(state.run, config.policy)
            series = _series(store, state, args.trend_runs)
            index, scaled = _machine_history(store, state, series, args.trend_runs)
            sections.append(ReportSection(result=result, history=series, normalised=scaled, machine_index=index))
            labelled.append((f"{state.run.model_key} on {state.machine}", result))
    title = f"perfgate report: {args.model}" if args.model else "perfgate report"
    text = render_html(sections, title=title, source=f"store {mask_url(url)}")
    write_output(args.html, text)
    if args.comment is not None:
        from perfgate.report.comment import render_comment

        write_output(args.comment, render_comment(labelled))
    size = len(text.encode("utf-8"))
    print(f"wrote {args.html} ({size / 1e6:.1f} MB, {len(sections)} model/machine section(s))", file=sys.stderr)
    return 0
