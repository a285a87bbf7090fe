"""``perfgate report``: the HTML report with plots of a store's newest runs and their history.

:func:`report` checks the newest run of each model and machine against its baseline (or its
budgets), reads each metric's history and the machine-speed index, and renders the report and,
when asked, the pull-request comment; the caller writes them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from perfgate.app.stores import store_file, store_url
from perfgate.config import load_config
from perfgate.errors import InputError
from perfgate.output import check_distinct
from perfgate.safe.text import one_line

__all__ = ["RenderedReport", "ReportRequest", "report"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportRequest:
    """Which runs (model and machine: None for every one; the branch of their baselines), how many
    runs the baselines and the trends take, the store, and the files the caller will write, by flag."""

    model: str | None = None
    machine: str | None = None
    baseline_branch: str = "main"
    baseline_runs: int = 5
    trend_runs: int = 100
    store: str | None = None
    config: Path | None = None
    outputs: tuple[tuple[str, Path | None], ...] = ()
    comment: bool = False  # render the pull-request comment too


@dataclass(frozen=True, slots=True)
class RenderedReport:
    """The HTML report, the comment (None unless asked for), and how many model/machine sections."""

    html: str
    comment: str | None
    sections: int


_TAILS = ("p95", "p99")


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


def report(request: ReportRequest, note: Callable[[str], None]) -> RenderedReport:
    """The report of ``request``; ``note`` is told of each run that could not be checked.

    Raises:
        InputError: a count below 1, a store without the runs asked for, an output that names an input.
    """
    from perfgate.core.compare import budgets_only
    from perfgate.export.latest import latest_states
    from perfgate.report.html import ReportSection, render_html
    from perfgate.store import mask_url, open_store

    config = load_config(request.config)
    for flag, value in (("--baseline-runs", request.baseline_runs), ("--trend-runs", request.trend_runs)):
        if value < 1:
            raise InputError(f"must be at least 1, got {value}", field=flag)
    url = store_url(request.store, config)
    check_distinct(dict(request.outputs), {"the store": store_file(url), "--config": config.source})
    with open_store(url) as store:
        states = latest_states(
            store,
            config.policy,
            model=request.model,
            machine=request.machine,
            branch=request.baseline_branch,
            baseline_runs=request.baseline_runs,
        )
        if not states:
            what = f"of model {request.model!r}" if request.model else "at all"
            where = f" on machine {request.machine!r}" if request.machine else ""
            raise InputError(
                f"the store {mask_url(url)} has no run {what}{where}; record runs with perfgate record",
                field="--model" if request.model else "--store",
            )
        sections = []
        labelled = []
        for state in states:
            if state.note:
                note(one_line(f"{state.run.model_key} on {state.machine}: {state.note}"))
            result = state.result or budgets_only(state.run, config.policy)
            series = _series(store, state, request.trend_runs)
            index, scaled = _machine_history(store, state, series, request.trend_runs)
            sections.append(ReportSection(result=result, history=series, normalised=scaled, machine_index=index))
            labelled.append((f"{state.run.model_key} on {state.machine}", result))
    title = f"perfgate report: {request.model}" if request.model else "perfgate report"
    html = render_html(sections, title=title, source=f"store {mask_url(url)}")
    comment = None
    if request.comment:
        from perfgate.report.comment import render_comment

        comment = render_comment(labelled)
    return RenderedReport(html=html, comment=comment, sections=len(sections))
