"""The HTML report: one self-contained file with the verdict on top and a plot per metric.

Per (model, machine) section: the comparisons as a table, the budgets, and per metric the
baseline and current distributions (box plots, with the compared tail statistics and the
budgets drawn in) and, when a history is given, the metric's trend with its change points
(:func:`perfgate.core.changepoints.detect` on the per-run medians) and the budgets as lines.

Safe to open anywhere: plotly.js is inlined once (no network at view time), every string
from a run (model, metric, commit, run id, store URL) goes through :func:`html.escape` in the
page and through :func:`perfgate.report.plots.plot_text` in the charts (plotly renders a few tags in its labels),
and the chart data sits in a ``<script type="application/json">`` block with every ``<``,
``>`` and ``&`` written as a JSON ``\\u`` escape, so nothing in it can close the block.
The charts are drawn by a small script that only reads that block.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from perfgate.core.compare import BudgetCheck, CheckResult, Comparison, Verdict
from perfgate.core.metrics import Direction, describe
from perfgate.core.text import plain
from perfgate.errors import ConfigError
from perfgate.report.environment import environment_text
from perfgate.report.format import fmt_change, fmt_ci, fmt_p, fmt_time, fmt_value
from perfgate.report.plots import HistoryPoint, distribution_chart, history_chart

__all__ = ["ReportSection", "embed_json", "render_check_html", "render_html"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportSection:
    """One model on one machine: its check and, optionally, each metric's history.

    ``history`` maps a metric name to its series per statistic (``median``, ``p95``,
    ``p99``), each oldest first; change points are searched in the ``median`` series.
    """

    result: CheckResult
    history: Mapping[str, Mapping[str, Sequence[HistoryPoint]]] = field(default_factory=dict)


def embed_json(data: object) -> str:
    """JSON that is safe inside ``<script type="application/json">``: no ``<``, ``>`` or ``&`` at all."""
    text = json.dumps(data, separators=(",", ":"), sort_keys=True, allow_nan=False, ensure_ascii=False)
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _e(value: object) -> str:
    return html.escape(plain(value), quote=True)  # control characters shown as escapes, as everywhere


def _verdict_of(result: CheckResult) -> str:
    return "regressed" if result.regressions else "over budget" if result.broken_budgets else "passed"


def _key(result: CheckResult) -> str:
    run = result.current
    return f"{run.model} · {run.machine.fingerprint or 'unknown machine'}"


# ---- page ---------------------------------------------------------------------------------


def _comparison_rows(comps: Sequence[Comparison]) -> str:
    rows = []
    for c in comps:
        rows.append(
            "<tr>"
            f"<td>{_e(c.statistic)}</td>"
            f"<td>{_e(fmt_value(c.baseline_value))}</td><td>{_e(fmt_value(c.current_value))}</td>"
            f"<td>{_e(fmt_change(c.change))}</td><td>{_e(fmt_ci(c.ci))}</td><td>{_e(fmt_p(c.p_adjusted))}</td>"
            f'<td><span class="badge {_e(c.verdict.value)}">{_e(c.verdict.value)}</span></td>'
            f"<td>{_e(c.reason)}</td>"
            "</tr>"
        )
    head = (
        "<tr><th>statistic</th><th>baseline</th><th>current</th><th>change</th><th>95% CI (worse)</th>"
        "<th>p (Holm)</th><th>verdict</th><th>why</th></tr>"
    )
    return f'<table class="cmp"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'


def _budget_table(budgets: Sequence[BudgetCheck]) -> str:
    if not budgets:
        return ""
    rows = []
    for b in budgets:
        op = "≥" if b.direction is Direction.HIGHER else "≤"
        status = "over budget" if not b.ok else "not measured" if b.value is None else "ok"
        css = "regressed" if not b.ok else "unchanged"
        rows.append(
            f"<tr><td>{_e(b.budget.metric)}</td><td>{_e(b.budget.statistic)}</td>"
            f"<td>{_e(op)} {_e(fmt_value(b.budget.limit))} {_e(b.unit)}</td><td>{_e(fmt_value(b.value))}</td>"
            f'<td><span class="badge {css}">{_e(status)}</span></td><td>{_e(b.note)}</td></tr>'
        )
    head = "<tr><th>metric</th><th>statistic</th><th>limit</th><th>current</th><th>status</th><th>note</th></tr>"
    return f'<h3>Budgets</h3><table class="cmp"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'


def _metric_verdict(comps: Sequence[Comparison]) -> str:
    order = [Verdict.REGRESSED, Verdict.INCONCLUSIVE, Verdict.IMPROVED, Verdict.UNCHANGED]
    for v in order:
        if any(c.verdict is v for c in comps):
            return v.value
    return comps[0].verdict.value if comps else "new"


def _section(index: int, section: ReportSection, charts: list[dict[str, Any]]) -> str:
    result = section.result
    run = result.current
    verdict = _verdict_of(result)
    meta = (
        f"run <code>{_e(run.run_id or 'unknown')}</code> · commit <code>{_e(run.git.commit or 'unknown')}</code>"
        f" · branch <code>{_e(run.git.branch or 'unknown')}</code> · {_e(fmt_time(run.created_at))} UTC"
    )
    parts = [
        f'<section class="model" id="s{index}">',
        f'<h2>{_e(_key(result))} <span class="badge {_e(verdict.replace(" ", "_"))}">{_e(verdict)}</span></h2>',
        f'<p class="meta">{meta}</p>',
        f'<p class="meta">Baseline: {_e((result.baseline_source or "none").replace("`", ""))}</p>',
    ]
    if result.machine_mismatch and result.baseline is not None:
        parts.append(
            f'<p class="warn">Cross-machine comparison: baseline from machine '
            f"<code>{_e(result.baseline.machine.fingerprint)}</code>; differences may be the hardware.</p>"
        )
    if changed := environment_text(result):
        parts.append(f'<p class="meta">{_e(changed)} (baseline → current)</p>')
    parts.append(_budget_table(result.budgets))
    by_metric: dict[str, list[Comparison]] = {}
    for c in result.comparisons:
        by_metric.setdefault(c.metric, []).append(c)
    for m_index, (name, comps) in enumerate(sorted(by_metric.items())):
        unit = comps[0].unit
        dist = distribution_chart(f"c{index}-{m_index}-dist", name, comps, result)
        charts.append(dist)
        hist, _cps, note = (None, [], "")
        series = section.history.get(name)
        if series is not None:
            hist, _cps, note = history_chart(f"c{index}-{m_index}-hist", name, unit, series, result)
        else:
            note = "no history given: perfgate report --store URL --html FILE draws the trend and its change points"
        if hist is not None:
            charts.append(hist)
        mv = _metric_verdict(comps)
        parts.append(
            f'<article class="metric" id="s{index}-m{m_index}">'
            f"<h3>{_e(describe(name))} <code>{_e(name)}</code> "
            f'<span class="badge {_e(mv)}">{_e(mv)}</span></h3>'
            f"{_comparison_rows(comps)}"
            f'<div class="charts"><div class="chart" id="{_e(dist["id"])}"></div>'
            + (f'<div class="chart" id="{_e(hist["id"])}"></div>' if hist is not None else "")
            + "</div>"
            + (f'<p class="note">{_e(note)}</p>' if note else "")
            + "</article>"
        )
    parts.append("</section>")
    return "\n".join(parts)


def _headline(sections: Sequence[ReportSection]) -> tuple[str, str, str]:
    regressed = [s.result for s in sections if s.result.regressions]
    over = [s.result for s in sections if s.result.broken_budgets]
    if regressed:
        n = sum(len(r.regressions) for r in regressed)
        where = ", ".join(_key(r) for r in regressed)
        return "fail", "✗ Regression detected", f"{n} comparison(s) regressed in {where}."
    if over:
        n = sum(len(r.broken_budgets) for r in over)
        return "fail", "✗ Budget exceeded", f"{n} budget(s) broken in {', '.join(_key(r) for r in over)}."
    return "pass", "✓ No regression detected", f"{len(sections)} model/machine pair(s) checked; nothing regressed."


def _overview(sections: Sequence[ReportSection]) -> str:
    rows = []
    for i, s in enumerate(sections):
        r = s.result
        v = _verdict_of(r)
        rows.append(
            f'<tr><td><a href="#s{i}">{_e(r.current.model)}</a></td>'
            f"<td>{_e(r.current.machine.fingerprint or 'unknown')}</td>"
            f"<td><code>{_e(r.current.git.commit or 'unknown')}</code></td>"
            f'<td><span class="badge {_e(v.replace(" ", "_"))}">{_e(v)}</span></td>'
            f"<td>{len(r.regressions)}</td><td>{len(r.broken_budgets)}</td></tr>"
        )
    head = (
        "<tr><th>model</th><th>machine</th><th>commit</th><th>verdict</th><th>regressions</th>"
        "<th>budgets broken</th></tr>"
    )
    return f'<table class="overview"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'


_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#212121;background:#f5f5f5}
header{padding:16px 24px;color:#fff}header.pass{background:#2e7d32}header.fail{background:#c62828}
header h1{margin:0 0 4px 0;font-size:24px}header p{margin:4px 0}
main{padding:8px 24px 24px}section.model{background:#fff;border-radius:6px;padding:12px 16px;margin:16px 0}
table{border-collapse:collapse;margin:8px 0;font-size:13px}
th,td{border:1px solid #e0e0e0;padding:3px 8px;text-align:left}
header table{background:#fff;color:#212121}.meta{color:#616161;font-size:13px;margin:2px 0}
.note{color:#616161;font-size:12px;font-style:italic}.warn{background:#fff3e0;padding:6px;border-left:4px solid #ef6c00}
.charts{display:flex;flex-wrap:wrap;gap:8px}.chart{flex:1 1 420px;min-width:320px;min-height:320px}
.badge{display:inline-block;border-radius:10px;padding:0 8px;font-size:12px;color:#fff;background:#757575}
.badge.regressed,.badge.over_budget{background:#c62828}.badge.passed,.badge.unchanged{background:#2e7d32}
.badge.improved{background:#1565c0}.badge.inconclusive{background:#ef6c00}
code{font-size:12px;background:#eeeeee;padding:0 3px;border-radius:3px}
footer{padding:8px 24px;color:#757575;font-size:12px}
"""

# reads the JSON block and draws each chart; marks each drawn chart for tests and readers
_RENDER = """
(function () {
  "use strict";
  var spec = JSON.parse(document.getElementById("perfgate-data").textContent);
  var config = {displaylogo: false, responsive: true};
  var pending = spec.charts.map(function (c) {
    var el = document.getElementById(c.id);
    return Plotly.newPlot(el, c.data, c.layout, config).then(function () {
      el.setAttribute("data-rendered", "true");
    });
  });
  Promise.all(pending).then(function () {
    document.body.setAttribute("data-charts-rendered", String(pending.length));
  });
})();
"""


def render_html(
    sections: Sequence[ReportSection], *, title: str = "perfgate report", source: str = "", plotlyjs: str | None = None
) -> str:
    """The report page for ``sections`` (one per model and machine).

    Args:
        title: the page title.
        source: where the results came from (e.g. the masked store URL), shown under the verdict.
        plotlyjs: the plotly.js bundle to inline; None reads plotly's own
            (``plotly.offline.get_plotlyjs()``, about 4.6 MB). Golden tests pass ``""``.

    Raises:
        ConfigError: plotly is not installed (and ``plotlyjs`` was not given).
    """
    if plotlyjs is None:
        try:
            from plotly.offline import get_plotlyjs
        except ModuleNotFoundError:
            raise ConfigError(
                "the HTML report inlines plotly.js from the plotly package; install it with "
                "pip install 'perfgate[export]'"
            ) from None
        plotlyjs = get_plotlyjs()
    css, headline, sentence = _headline(sections)
    charts: list[dict[str, Any]] = []
    body = [_section(i, s, charts) for i, s in enumerate(sections)]
    data = embed_json({"charts": charts})
    origin = f"<p>Results from {_e(source)}.</p>" if source else ""
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{_e(title)}</title>",
            f"<style>{_CSS}</style>",
            "</head>",
            "<body>",
            f'<header class="{css}"><h1>{_e(headline)}</h1><p>{_e(sentence)}</p>{origin}{_overview(sections)}</header>',
            "<main>",
            *body,
            "</main>",
            f"<footer>{_e(title)} · generated by perfgate · {len(charts)} chart(s)</footer>",
            f'<script type="application/json" id="perfgate-data">{data}</script>',
            f"<script>{plotlyjs}</script>",
            f"<script>{_RENDER}</script>",
            "</body>",
            "</html>",
            "",
        ]
    )


def render_check_html(result: CheckResult, *, plotlyjs: str | None = None) -> str:
    """The report of one ``perfgate check``: distributions, no history."""
    title = f"perfgate check: {result.current.model}"
    return render_html([ReportSection(result=result)], title=title, plotlyjs=plotlyjs)
