"""Plotly figure specs for the HTML report: a metric's distributions and its history.

Plain dicts (``{"id", "data", "layout"}``) that the page hands to ``Plotly.newPlot``; the
plotly Python package is not needed to build them. Every string that came from a run goes
through :func:`plot_text`, because plotly renders a few tags (``<b>``, ``<a href>``, ``<br>``)
in trace names, hover texts and annotations and decodes ``&lt;``-style entities.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from perfgate.core.changepoints import ChangePoint, detect
from perfgate.core.compare import BudgetCheck, CheckResult, Comparison
from perfgate.core.metrics import Direction
from perfgate.report.format import fmt_change, fmt_value

__all__ = ["MAX_POINTS", "MIN_CHANGEPOINT_RUNS", "HistoryPoint", "distribution_chart", "history_chart", "plot_text"]

MAX_POINTS = 2000  # samples per box plot; more are summarised by evenly spaced quantiles
MIN_CHANGEPOINT_RUNS = 6  # detect() needs two segments of at least 3 runs


class HistoryPoint(Protocol):
    """One run's value of a metric (``perfgate.store.SeriesPoint`` is one)."""

    @property
    def run_id(self) -> str: ...

    @property
    def created_at(self) -> str | None: ...

    @property
    def commit(self) -> str | None: ...

    @property
    def value(self) -> float: ...


def plot_text(text: str) -> str:
    """``text`` made literal for a plotly label: plotly renders ``<b>``, ``<a>``… and decodes entities."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _num(value: float | None) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def _thin(samples: Sequence[float]) -> list[float]:
    """At most :data:`MAX_POINTS` values with the samples' distribution (evenly spaced quantiles)."""
    if len(samples) <= MAX_POINTS:
        return [float(s) for s in samples]
    return [float(v) for v in np.quantile(np.asarray(samples, dtype=float), np.linspace(0.0, 1.0, MAX_POINTS))]


def _budget_shapes(budgets: Sequence[BudgetCheck], unit: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    shapes, notes = [], []
    for b in budgets:
        op = "≥" if b.direction is Direction.HIGHER else "≤"
        colour = "#c62828" if not b.ok else "#6d4c41"
        shapes.append(
            {
                "type": "line",
                "xref": "paper",
                "x0": 0,
                "x1": 1,
                "yref": "y",
                "y0": b.budget.limit,
                "y1": b.budget.limit,
                "line": {"color": colour, "width": 2, "dash": "dash"},
            }
        )
        notes.append(
            {
                "xref": "paper",
                "x": 1,
                "xanchor": "right",
                "yref": "y",
                "y": b.budget.limit,
                "yanchor": "bottom",
                "showarrow": False,
                "font": {"color": colour, "size": 11},
                "text": plot_text(f"budget {b.budget.statistic} {op} {fmt_value(b.budget.limit)} {unit}"),
            }
        )
    return shapes, notes


def _layout(title: str, unit: str, shapes: list[dict[str, Any]], notes: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "title": {"text": plot_text(title), "font": {"size": 14}},
        "yaxis": {"title": {"text": plot_text(unit)}, "zeroline": False},
        "margin": {"l": 60, "r": 20, "t": 40, "b": 40},
        "height": 320,
        "showlegend": False,
        "legend": {"x": 1, "xanchor": "right", "y": 1, "bgcolor": "rgba(255,255,255,0.7)"},
        "shapes": shapes,
        "annotations": notes,
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#fafafa",
    }


def distribution_chart(chart_id: str, name: str, comps: Sequence[Comparison], result: CheckResult) -> dict[str, Any]:
    """Box plots of metric ``name``'s baseline and current samples, its compared tails and budgets."""
    base_run, cur_run = result.baseline, result.current
    metric = cur_run.metrics.get(name) or (base_run.metrics.get(name) if base_run else None)
    unit = metric.unit if metric else ""
    traces: list[dict[str, Any]] = []
    for side, run, colour in (("baseline", base_run, "#1f77b4"), ("current", cur_run, "#ff7f0e")):
        m = run.metrics.get(name) if run is not None else None
        if m is None:
            continue
        traces.append(
            {
                "type": "box",
                "name": f"{side} (n={len(m.samples)})",
                "y": _thin(m.samples),
                "boxmean": True,
                "boxpoints": "outliers",
                "marker": {"color": colour, "size": 3},
                "hoverinfo": "y",
            }
        )
    for c in comps:  # the tail statistics that were compared, as markers on the boxes
        if c.statistic in ("median", "p50") or c.baseline_value is None or c.current_value is None:
            continue
        x = [t["name"] for t in traces]
        if len(x) == 2:
            traces.append(
                {
                    "type": "scatter",
                    "mode": "markers",
                    "name": c.statistic,
                    "x": x,
                    "y": [_num(c.baseline_value), _num(c.current_value)],
                    "marker": {
                        "symbol": "diamond",
                        "size": 10,
                        "color": "#2e7d32" if c.statistic == "p95" else "#6a1b9a",
                    },
                }
            )
    budgets = [b for b in result.budgets if b.budget.metric == name]
    shapes, notes = _budget_shapes(budgets, unit)
    layout = _layout(f"{name}: baseline vs current", unit, shapes, notes)
    layout["showlegend"] = any(t["type"] == "scatter" for t in traces)  # the boxes are named on the axis
    return {"id": chart_id, "data": traces, "layout": layout}


def history_chart(
    chart_id: str, name: str, unit: str, series: Mapping[str, Sequence[HistoryPoint]], result: CheckResult
) -> tuple[dict[str, Any] | None, list[ChangePoint], str]:
    """The trend of metric ``name`` (median, and the tails given), its change points and budgets.

    Returns the chart (None without a median series), the change points found in the
    median series, and a note for the reader (why none were searched or found), or "".
    """
    median = list(series.get("median", ()))
    if not median:
        return None, [], "no history of this metric in the store"
    dated = all(p.created_at for p in median)

    def xs(points: Sequence[HistoryPoint]) -> list[Any]:
        return [p.created_at if dated else i + 1 for i, p in enumerate(points)]

    traces = []
    for stat, colour in (("median", "#1f77b4"), ("p95", "#2e7d32"), ("p99", "#6a1b9a")):
        points = list(series.get(stat, ()))
        if not points:
            continue
        traces.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": stat,
                "x": xs(points),
                "y": [_num(p.value) for p in points],
                "text": [plot_text(f"run {p.run_id} · commit {p.commit or '?'}") for p in points],
                "hovertemplate": "%{y:.4g} " + plot_text(unit) + "<br>%{text}<extra>" + stat + "</extra>",
                "line": {"color": colour, "width": 2},
                "marker": {"size": 6},
            }
        )
    points_cp: list[ChangePoint] = []
    note = ""
    if len(median) >= MIN_CHANGEPOINT_RUNS:
        points_cp = detect([p.value for p in median])
        note = "no change point found" if not points_cp else ""
    else:
        note = f"change points need at least {MIN_CHANGEPOINT_RUNS} runs; this history has {len(median)}"
    shapes, notes = _budget_shapes([b for b in result.budgets if b.budget.metric == name], unit)
    x_all = xs(median)
    for cp in points_cp:
        x = x_all[cp.index]
        shapes.append(
            {
                "type": "line",
                "xref": "x",
                "x0": x,
                "x1": x,
                "yref": "paper",
                "y0": 0,
                "y1": 1,
                "line": {"color": "#d81b60", "width": 2, "dash": "dot"},
            }
        )
        notes.append(
            {
                "xref": "x",
                "x": x,
                "yref": "paper",
                "y": 1,
                "yanchor": "bottom",
                "showarrow": False,
                "font": {"color": "#d81b60", "size": 11},
                "text": plot_text(f"change point {fmt_change(cp.change)}"),
            }
        )
    layout = _layout(f"{name}: history per run", unit, shapes, notes)
    layout["showlegend"] = len(traces) > 1
    layout["xaxis"] = {"title": {"text": "run time (UTC)" if dated else "run"}}
    return {"id": chart_id, "data": traces, "layout": layout}, points_cp, note
