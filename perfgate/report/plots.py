"""The HTML report's charts, drawn as SVG when the report is written.

Why SVG from Python rather than a charting library in the page: the report has to open
offline, stay small and be safe with any name. An inlined plotly.js made the file 5.2 MB
(4.8 MB of it the library); a partial plotly bundle is still about 1 MB, Vega-Lite with
Vega about 800 KB, and each of them needs JavaScript that can fail in a reader's browser.
These charts need only boxes, points and lines, which SVG draws natively: no script at
all (nothing to fetch, no console errors possible), a few KB per chart, the same bytes for
the same input (golden files), and every label escaped like the rest of the page. What is
given up is interactivity beyond the browser's own tooltips (``<title>`` on the marks).

* :func:`distribution_chart`: baseline and current samples of a metric, one row each, as
  points (thinned to :data:`STRIP_POINTS` evenly spaced quantiles, min and max kept) with a
  p25–p75 box and p50, p95 and p99 marked. Times are on a log10 axis, so 3 µs and 8,000 µs
  are both readable; every other unit (memory, throughput) on a linear axis from zero, so
  +1.4 % looks like +1.4 %. Budgets are dashed lines.
* :func:`history_chart`: the metric's trend per run (median and the compared tails), with
  the change points (:func:`perfgate.core.changepoints.detect`) of the median series, or of
  the series normalised by the machine-speed index when it is given (as ``perfgate
  history`` does), and the budgets.
* :func:`machine_index_chart`: each reference kernel's time per run (``Run.machine_index``).

Internal: shared with ``cli``; not part of the Python API (README, "Python API").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from perfgate.core.changepoints import ChangePoint, detect
from perfgate.core.compare import BudgetCheck, CheckResult
from perfgate.core.metrics import Direction
from perfgate.report._svg import Scale, is_time_unit, num, text, tick_label, unit_label
from perfgate.report.formatting import fmt_change, fmt_time, fmt_value

__all__ = [
    "MIN_CHANGEPOINT_RUNS",
    "STRIP_POINTS",
    "HistoryPoint",
    "IndexPoint",
    "distribution_chart",
    "history_chart",
    "machine_index_chart",
]

STRIP_POINTS = 200  # points drawn per side; more samples are summarised by evenly spaced quantiles
MIN_CHANGEPOINT_RUNS = 6  # detect() needs two segments of at least 3 runs

WIDTH = 640
BASELINE, CURRENT = "#1f77b4", "#e65100"
_STAT_COLOURS = {"median": "#1f77b4", "p95": "#2e7d32", "p99": "#6a1b9a"}
_KERNEL_COLOURS = ("#00838f", "#6d4c41", "#ad1457", "#283593")
_CHANGE = "#d81b60"


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


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexPoint:
    """One run's machine-speed index: each reference kernel's median time in seconds."""

    run_id: str
    created_at: str | None
    commit: str | None
    seconds: Mapping[str, float]


def thin(samples: Sequence[float] | np.ndarray, count: int = STRIP_POINTS) -> list[float]:
    """At most ``count`` values with the samples' distribution (evenly spaced quantiles), sorted."""
    values = np.sort(np.asarray(samples, dtype=float))
    if len(values) > count:
        values = np.quantile(values, np.linspace(0.0, 1.0, count))
    return [float(v) for v in values]


def _frame(kind: str, title: str, width: float, height: float, body: Sequence[str]) -> str:
    return (
        f'<svg class="chart {kind}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {num(width)} {num(height)}" '
        f'width="{num(width)}" height="{num(height)}" role="img" aria-label="{text(title)}">'
        f"<title>{text(title)}</title>"
        f'<rect class="bg" width="{num(width)}" height="{num(height)}" fill="#fff"/>'
        f'<text class="ttl" x="8" y="18">{text(title)}</text>' + "".join(body) + "</svg>"
    )


def _x_axis(scale: Scale, top: float, bottom: float, title: str, labels: Mapping[float, str] | None = None) -> str:
    """Vertical grid lines at the ticks, their labels under ``bottom`` and the axis title."""
    parts = ['<g class="axis">']
    marks = labels if labels is not None else {t: tick_label(t) for t in scale.ticks()}
    for value, label in marks.items():
        x = num(scale(value))
        parts.append(f'<line class="grid" x1="{x}" x2="{x}" y1="{num(top)}" y2="{num(bottom)}"/>')
        parts.append(f'<text class="tick" x="{x}" y="{num(bottom + 14)}" text-anchor="middle">{text(label)}</text>')
    mid = (scale.start + scale.end) / 2
    parts.append(f'<text class="atl" x="{num(mid)}" y="{num(bottom + 30)}" text-anchor="middle">{text(title)}</text>')
    parts.append("</g>")
    return "".join(parts)


def _y_axis(scale: Scale, left: float, right: float, title: str, top: float) -> str:
    parts = ['<g class="axis">']
    for value in scale.ticks():
        y = num(scale(value))
        parts.append(f'<line class="grid" x1="{num(left)}" x2="{num(right)}" y1="{y}" y2="{y}"/>')
        label = text(tick_label(value))
        parts.append(
            f'<text class="tick" x="{num(left - 4)}" y="{num(scale(value) + 4)}" text-anchor="end">{label}</text>'
        )
    parts.append(f'<text class="atl" x="{num(left)}" y="{num(top - 6)}" text-anchor="start">{text(title)}</text>')
    parts.append("</g>")
    return "".join(parts)


def _budget_label(b: BudgetCheck, unit: str) -> str:
    op = "≥" if b.direction is Direction.HIGHER else "≤"
    return f"budget {b.budget.statistic} {op} {fmt_value(b.budget.limit)} {unit_label(unit)}"


def _colour(b: BudgetCheck) -> str:
    return "#c62828" if not b.ok else "#6d4c41"


def _percentile(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q))


# ---- distributions ------------------------------------------------------------------------


def distribution_chart(name: str, result: CheckResult) -> str:
    """Baseline and current samples of metric ``name``, with p25–p75, p50, p95, p99 and budgets.

    The marks are the samples' own percentiles, the same way for both sides (the compared
    statistics with their intervals are in the report's tables).
    """
    rows = []
    for side, run, colour in (("baseline", result.baseline, BASELINE), ("current", result.current, CURRENT)):
        m = run.metrics.get(name) if run is not None else None
        if m is not None and m.samples:
            rows.append((side, np.asarray(m.samples, dtype=float), colour))
    metric = result.current.metrics.get(name) or (result.baseline.metrics.get(name) if result.baseline else None)
    unit = metric.unit if metric is not None else ""
    budgets = [b for b in result.budgets if b.budget.metric == name]
    left, right, top, row_h = 118.0, WIDTH - 16.0, 60.0, 56.0
    bottom = top + row_h * max(len(rows), 1)
    height = bottom + 40
    values = [v for _, s, _ in rows for v in (float(s.min()), float(s.max()))] + [b.budget.limit for b in budgets]
    log = is_time_unit(unit) and bool(values) and min(values) > 0
    scale = Scale.for_values(values, left, right, log=log, zero=not log)
    shown = unit_label(unit) or "value"
    body = [
        '<text class="lgd" x="8" y="36">box p25–p75 · bar p50 · ◆ p95 · ▲ p99</text>',
        _x_axis(
            scale,
            top - 6,
            bottom,
            f"{shown} (log scale)" if scale.log else f"{shown} (axis from 0)" if scale.lo == 0 else shown,
        ),
    ]
    body.append('<g class="axis">')
    for i, (side, samples, _) in enumerate(rows):
        cy = top + row_h * (i + 0.5)
        body.append(f'<text class="row" x="8" y="{num(cy + 4)}">{text(f"{side} (n={len(samples)})")}</text>')
    body.append("</g>")
    body.append('<g class="data">')
    for i, (_side, samples, colour) in enumerate(rows):
        cy = top + row_h * (i + 0.5)
        points = thin(samples)
        jitter = [((k * 0.6180339887) % 1.0 - 0.5) * row_h * 0.62 for k in range(len(points))]
        path = "".join(f"M{num(scale(v))} {num(cy + j)}h0" for v, j in zip(points, jitter, strict=True))
        body.append(f'<path class="pts" d="{path}" stroke="{colour}"/>')
        p25, p50, p75, p95, p99 = (_percentile(samples, q) for q in (25, 50, 75, 95, 99))
        x25, x75 = scale(p25), scale(p75)
        body.append(
            f'<rect class="box" x="{num(x25)}" y="{num(cy - row_h * 0.2)}" width="{num(max(x75 - x25, 1.0))}" '
            f'height="{num(row_h * 0.4)}" stroke="{colour}" fill="{colour}">'
            f"<title>{text(f'p25 {fmt_value(p25)} – p75 {fmt_value(p75)} {unit_label(unit)}')}</title></rect>"
        )
        x = num(scale(p50))
        body.append(
            f'<line class="med" x1="{x}" x2="{x}" y1="{num(cy - row_h * 0.26)}" y2="{num(cy + row_h * 0.26)}">'
            f"<title>{text(f'p50 {fmt_value(p50)} {unit_label(unit)}')}</title></line>"
        )
        x95, y = scale(p95), cy
        body.append(
            f'<path class="mark" d="M{num(x95)} {num(y - 6)}l6 6l-6 6l-6 -6z" fill="{_STAT_COLOURS["p95"]}">'
            f"<title>{text(f'p95 {fmt_value(p95)} {unit_label(unit)}')}</title></path>"
        )
        x99 = scale(p99)
        body.append(
            f'<path class="mark" d="M{num(x99)} {num(y - 6)}l6 11h-12z" fill="{_STAT_COLOURS["p99"]}">'
            f"<title>{text(f'p99 {fmt_value(p99)} {unit_label(unit)}')}</title></path>"
        )
    body.append("</g>")
    for b in budgets:
        x = num(scale(b.budget.limit))
        body.append(
            f'<g class="budget"><line x1="{x}" x2="{x}" y1="{num(top - 6)}" y2="{num(bottom)}" '
            f'stroke="{_colour(b)}"/><text x="{x}" y="{num(top - 10)}" text-anchor="end" '
            f'fill="{_colour(b)}">{text(_budget_label(b, unit))}</text></g>'
        )
    return _frame("dist", f"{name}: baseline vs current", WIDTH, height, body)


# ---- lines over the runs ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Line:
    name: str
    colour: str
    values: Sequence[float]
    dashed: bool = False
    tips: Sequence[str] = ()  # one tooltip per point; points are drawn only where given (a few KB per 100)


def _lines_chart(
    kind: str,
    title: str,
    unit: str,
    lines: Sequence[_Line],
    dates: Sequence[str | None],
    *,
    changes: Sequence[ChangePoint] = (),
    budgets: Sequence[BudgetCheck] = (),
) -> str:
    left, right, top, bottom = 64.0, WIDTH - 16.0, 60.0, 240.0
    n = max(len(line.values) for line in lines)
    values = [v for line in lines for v in line.values if math.isfinite(v)] + [b.budget.limit for b in budgets]
    spread = max(values) / min(values) if values and min(values) > 0 else 0.0
    y = Scale.for_values(values, bottom, top, log=is_time_unit(unit) and spread > 30, zero=True)
    x = Scale(0.0, max(n - 1, 1), left + 8, right - 8)
    shown = unit_label(unit) or "value"
    step = max(1, math.ceil(n / 8))
    run_ticks = {float(i): str(i + 1) for i in range(0, n, step)}
    run_ticks[float(n - 1)] = str(n)
    first, last = fmt_time(dates[0]) if dates else "", fmt_time(dates[-1]) if dates else ""
    span = f"run, oldest to newest ({first} … {last} UTC)" if dates and dates[0] and dates[-1] else "run"
    body = [
        _x_axis(x, top, bottom, span, run_ticks),
        _y_axis(y, left, right, f"{shown} (log scale)" if y.log else shown, top),
    ]
    legend_x = 8.0
    legend = ['<g class="lgd">']
    for line in lines:
        dash = ' stroke-dasharray="5 3"' if line.dashed else ""
        legend.append(
            f'<line x1="{num(legend_x)}" x2="{num(legend_x + 18)}" y1="32" y2="32" stroke="{line.colour}"{dash}/>'
            f'<text x="{num(legend_x + 22)}" y="36">{text(line.name)}</text>'
        )
        legend_x += 7.0 * len(line.name) + 34
    legend.append("</g>")
    body += legend
    body.append('<g class="data">')
    for line in lines:
        pts = [(x(i), y(v)) for i, v in enumerate(line.values) if math.isfinite(v)]
        if not pts:
            continue
        dash = ' stroke-dasharray="5 3"' if line.dashed else ""
        d = "M" + "L".join(f"{num(px)} {num(py)}" for px, py in pts)
        body.append(f'<path class="line" d="{d}" stroke="{line.colour}"{dash}><title>{text(line.name)}</title></path>')
        dots = [
            f'<circle cx="{num(x(i))}" cy="{num(y(v))}" r="3"><title>{text(tip)}</title></circle>'
            for i, (v, tip) in enumerate(zip(line.values, line.tips, strict=False))
            if math.isfinite(v)
        ]
        if dots:
            body.append(f'<g fill="{line.colour}">{"".join(dots)}</g>')
    body.append("</g>")
    for cp in changes:
        cx = num(x(cp.index - 0.5))
        body.append(
            f'<g class="change"><line x1="{cx}" x2="{cx}" y1="{num(top)}" y2="{num(bottom)}" stroke="{_CHANGE}"/>'
            f'<text x="{cx}" y="{num(top + 12)}" dx="4" fill="{_CHANGE}">'
            f"{text(f'change point {fmt_change(cp.change)}')}</text></g>"
        )
    for b in budgets:
        by = num(y(b.budget.limit))
        body.append(
            f'<g class="budget"><line x1="{num(left)}" x2="{num(right)}" y1="{by}" y2="{by}" stroke="{_colour(b)}"/>'
            f'<text x="{num(right)}" y="{by}" dy="-4" text-anchor="end" fill="{_colour(b)}">'
            f"{text(_budget_label(b, unit))}</text></g>"
        )
    return _frame(kind, title, WIDTH, bottom + 40, body)


def history_chart(
    name: str,
    unit: str,
    series: Mapping[str, Sequence[HistoryPoint]],
    result: CheckResult,
    normalised: Sequence[float] | None = None,
) -> tuple[str | None, list[ChangePoint], str]:
    """The trend of metric ``name`` (median, and the tails given), its change points and budgets.

    ``normalised`` is the median series normalised by the machine-speed index (one value per
    median point, in the metric's unit); when given, it is drawn too and the change points
    are searched in it, so a slow hour of the machine is not a change of the code.

    Returns the chart (None under two runs), the change points, and a note for the
    reader (what was searched, or why nothing was), or "".
    """
    median = list(series.get("median", ()))
    if len(median) < 2:
        return None, [], f"{len(median) or 'no'} run of this metric in the store: no trend to draw yet"
    if normalised is not None and len(normalised) != len(median):
        normalised = None
    u = unit_label(unit)
    lines = []
    for stat in ("median", "p95", "p99"):
        points = list(series.get(stat, ()))
        if len(points) != len(median):  # a tail without a value in some run: leave it out
            continue
        tips = (
            [f"{fmt_value(p.value)} {u}, commit {(p.commit or '?')[:12]}, {fmt_time(p.created_at)}" for p in points]
            if stat == "median"
            else ()
        )
        lines.append(_Line(stat, _STAT_COLOURS[stat], [float(p.value) for p in points], tips=tips))
    searched = [float(p.value) for p in median]
    where = "the median"
    if normalised is not None:
        lines.append(_Line("median, machine-normalised", "#212121", list(normalised), dashed=True))
        searched, where = list(normalised), "the machine-normalised median"
    found: list[ChangePoint] = []
    if len(median) >= MIN_CHANGEPOINT_RUNS:
        found = detect(searched)
        note = f"change points searched in {where}: " + (
            ", ".join(f"{fmt_change(cp.change)} at commit {median[cp.index].commit or '?'}" for cp in found)
            if found
            else "none found"
        )
    else:
        note = f"change points need at least {MIN_CHANGEPOINT_RUNS} runs; this history has {len(median)}"
    budgets = [b for b in result.budgets if b.budget.metric == name]
    dates = [p.created_at for p in median]
    chart = _lines_chart("hist", f"{name}: history per run", unit, lines, dates, changes=found, budgets=budgets)
    return chart, found, note


def machine_index_chart(points: Sequence[IndexPoint]) -> str | None:
    """Each reference kernel's median time per run, in ms, on an axis from 0; None under two runs."""
    kernels = sorted({k for p in points for k in p.seconds})
    if len(points) < 2 or not kernels:
        return None
    lines = [
        _Line(
            kernel,
            _KERNEL_COLOURS[i % len(_KERNEL_COLOURS)],
            [p.seconds[kernel] * 1e3 if kernel in p.seconds else math.nan for p in points],
        )
        for i, kernel in enumerate(kernels)
    ]
    title = "machine-speed index per run (reference kernel times; lower is faster)"
    return _lines_chart("index", title, "ms", lines, [p.created_at for p in points])
