"""The HTML report: one self-contained file, the verdict on top, everything the Markdown
report says, and charts drawn as SVG (:mod:`perfgate.report.plots` says why SVG).

Per (model, machine) section: the Markdown report of its check (:func:`render_markdown`,
rendered with markdown-it-py with raw HTML off, so it holds the same tables, notes,
measurement conditions, unstable metrics and "samples that would decide" as the Markdown
file), then the differential flame graph of each explained stage ("where it went",
:mod:`perfgate.report.flame`), then per metric its distributions and, when a store is
given, its history with the change points, and the machine-speed index over the history.
Without a history, the page says so once.

No script, no stylesheet or image to fetch: the page works offline and a name from a run
(model, metric, commit, run id, store URL) cannot run anything. Every such string goes
through :func:`html.escape` (page and SVG text alike) or through the Markdown escaper
(:mod:`perfgate.report.escape`) before markdown-it sees it.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache

from markdown_it import MarkdownIt

from perfgate.core.compare import CheckResult, Comparison, Verdict
from perfgate.core.metrics import describe
from perfgate.core.profiles import StageExplanation
from perfgate.report.flame import flame_graph
from perfgate.report.formatting import fmt_time
from perfgate.report.markdown import render_markdown
from perfgate.report.plots import HistoryPoint, IndexPoint, distribution_chart, history_chart, machine_index_chart
from perfgate.safe.text import plain

__all__ = ["NO_HISTORY", "ReportSection", "markdown_html", "render_check_html", "render_html"]

NO_HISTORY = (
    "No history given: perfgate report --store URL --html FILE draws each metric's trend per run, "
    "its change points and the machine-speed index."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportSection:
    """One model on one machine: its check and, optionally, its history.

    ``history`` maps a metric name to its series per statistic (``median``, ``p95``,
    ``p99``), each oldest first. ``normalised`` maps a metric name to its median series
    normalised by the machine-speed index (one value per ``median`` point); change points
    are searched there when it is given, in the ``median`` series otherwise.
    ``machine_index`` is the machine-speed index of the same runs, oldest first.
    """

    result: CheckResult
    history: Mapping[str, Mapping[str, Sequence[HistoryPoint]]] = field(default_factory=dict)
    normalised: Mapping[str, Sequence[float]] = field(default_factory=dict)
    machine_index: Sequence[IndexPoint] = ()

    @property
    def has_history(self) -> bool:
        return bool(self.history) or bool(self.machine_index)


def _e(value: object) -> str:
    return html.escape(plain(value), quote=True)  # control characters shown as escapes, as everywhere


@cache
def _markdown_it() -> MarkdownIt:
    # CommonMark with GitHub's tables; raw HTML off: any "<" that reached it is shown as text
    return MarkdownIt("commonmark", {"html": False}).enable("table")


def markdown_html(text: str, *, shift: int = 2) -> str:
    """The Markdown report ``text`` as HTML, its headings ``shift`` levels down (``#`` -> ``<h3>``)."""
    md = _markdown_it()
    tokens = md.parse(text)
    for token in tokens:
        if token.type in ("heading_open", "heading_close"):
            token.tag = f"h{min(6, int(token.tag[1:]) + shift)}"
    return str(md.renderer.render(tokens, md.options, {}))


def _verdict_of(result: CheckResult) -> str:
    return (
        "regressed"
        if result.regressions
        else "over budget"
        if result.broken_budgets
        else "missing metric"
        if result.missing
        else "passed"
    )


def _key(result: CheckResult) -> str:
    run = result.current
    return f"{run.model} · {run.machine.fingerprint or 'unknown machine'}"


def _badge(verdict: str) -> str:
    return f'<span class="badge {_e(verdict.replace(" ", "_"))}">{_e(verdict)}</span>'


def _metric_verdict(comps: Sequence[Comparison]) -> str:
    order = [Verdict.REGRESSED, Verdict.INCONCLUSIVE, Verdict.IMPROVED, Verdict.UNCHANGED]
    for v in order:
        if any(c.verdict is v for c in comps):
            return v.value
    return comps[0].verdict.value if comps else "new"


def _metric(index: int, m_index: int, name: str, comps: Sequence[Comparison], section: ReportSection) -> str:
    result = section.result
    charts = [distribution_chart(name, result)]
    note = ""
    if section.has_history:
        series = section.history.get(name, {})
        metric = result.current.metrics.get(name)
        unit = metric.unit if metric is not None else (comps[0].unit if comps else "")
        hist, _found, note = history_chart(name, unit, series, result, section.normalised.get(name))
        if hist is not None:
            charts.append(hist)
    verdict = _metric_verdict(comps)
    return (
        f'<article class="metric" id="s{index}-m{m_index}">'
        f"<h3>{_e(describe(name))} <code>{_e(name)}</code> {_badge(verdict)}</h3>"
        f'<div class="charts">{"".join(charts)}</div>'
        + (f'<p class="note">{_e(note)}</p>' if note else "")
        + "</article>"
    )


def _where(index: int, k: int, explanation: StageExplanation) -> str:
    """An explained stage's differential flame graph (its table is in the Markdown part); "" when
    there is nothing to draw."""
    drawn = flame_graph(explanation)
    if drawn is None:
        return ""
    chart, note = drawn
    return (
        f'<article class="metric where" id="s{index}-w{k}">'
        f"<h3>Where it went: {_e(explanation.stage)} <code>{_e(explanation.metric)}</code></h3>"
        f'<div class="charts">{chart}</div><p class="note">{_e(note)}</p></article>'
    )


def _section(index: int, section: ReportSection) -> str:
    result = section.result
    run = result.current
    meta = (
        f"run <code>{_e(run.run_id or 'unknown')}</code> · commit <code>{_e(run.git.commit or 'unknown')}</code>"
        f" · branch <code>{_e(run.git.branch or 'unknown')}</code> · {_e(fmt_time(run.created_at))} UTC"
    )
    parts = [
        f'<section class="model" id="s{index}">',
        f"<h2>{_e(_key(result))} {_badge(_verdict_of(result))}</h2>",
        f'<p class="meta">{meta}</p>',
        f'<div class="md">{markdown_html(render_markdown(result))}</div>',
    ]
    parts += [drawn for k, e in enumerate(result.explanations) if (drawn := _where(index, k, e))]
    names = {c.metric: None for c in result.comparisons}  # the comparisons' own order, once each
    names.update(dict.fromkeys(run.metrics))  # a run checked against budgets only has no comparisons
    by_metric = {name: [c for c in result.comparisons if c.metric == name] for name in names}
    for m_index, (name, comps) in enumerate(sorted(by_metric.items())):
        parts.append(_metric(index, m_index, name, comps, section))
    index_chart = machine_index_chart(section.machine_index)
    if index_chart is not None:
        parts.append(
            f'<article class="metric index" id="s{index}-index"><h3>Machine-speed index</h3>'
            f'<div class="charts">{index_chart}</div><p class="note">Reference kernels timed with each run: '
            "when they slow down together with the metrics, the machine was slower, not the code.</p></article>"
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
        rows.append(
            f'<tr><td><a href="#s{i}">{_e(r.current.model)}</a></td>'
            f"<td>{_e(r.current.machine.fingerprint or 'unknown')}</td>"
            f"<td><code>{_e(r.current.git.commit or 'unknown')}</code></td>"
            f"<td>{_badge(_verdict_of(r))}</td>"
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
.note{color:#616161;font-size:12px;font-style:italic}
.md{font-size:14px}.md blockquote{margin:6px 0;padding:2px 10px;border-left:4px solid #90a4ae;background:#fafafa}
article.metric{border-top:1px solid #eeeeee;margin-top:12px}
.charts{display:flex;flex-wrap:wrap;gap:8px;align-items:flex-start}
svg.chart{max-width:100%;height:auto;font-size:12px;border:1px solid #eeeeee}
svg.chart .ttl{font-weight:600;font-size:13px}svg.chart .tick,svg.chart .atl{fill:#616161;font-size:11px}
svg.chart .lgd{fill:#424242;font-size:11px}svg.chart .lgd line{stroke-width:2}
svg.chart .grid{stroke:#e8e8e8}svg.chart .row{fill:#424242}
svg.chart .pts{fill:none;stroke-width:4;stroke-linecap:round;stroke-opacity:.35}
svg.chart .box{fill-opacity:.15;stroke-width:1.5}svg.chart .med{stroke:#212121;stroke-width:3}
svg.chart .line{fill:none;stroke-width:2}
svg.chart .budget line{stroke-dasharray:6 4;stroke-width:1.5}svg.chart .budget text{font-size:11px}
svg.chart .change line{stroke-dasharray:2 3;stroke-width:2}svg.chart .change text{font-size:11px}
.badge{display:inline-block;border-radius:10px;padding:0 8px;font-size:12px;color:#fff;background:#757575}
.badge.regressed,.badge.over_budget{background:#c62828}.badge.passed,.badge.unchanged{background:#2e7d32}
.badge.improved{background:#1565c0}.badge.inconclusive{background:#ef6c00}
code{font-size:12px;background:#eeeeee;padding:0 3px;border-radius:3px}
footer{padding:8px 24px;color:#757575;font-size:12px}
"""


def render_html(sections: Sequence[ReportSection], *, title: str = "perfgate report", source: str = "") -> str:
    """The report page for ``sections`` (one per model and machine).

    Args:
        title: the page title.
        source: where the results came from (e.g. the masked store URL), shown under the verdict.
    """
    css, headline, sentence = _headline(sections)
    body = [_section(i, s) for i, s in enumerate(sections)]
    origin = f"<p>Results from {_e(source)}.</p>" if source else ""
    once = "" if any(s.has_history for s in sections) else f'<p class="note">{_e(NO_HISTORY)}</p>'
    charts = sum(b.count('<svg class="chart') for b in body)
    return page(
        title,
        [
            f'<header class="{css}"><h1>{_e(headline)}</h1><p>{_e(sentence)}</p>{origin}{_overview(sections)}</header>',
            "<main>",
            once,
            *body,
            "</main>",
            f"<footer>{_e(title)} · generated by perfgate · {charts} chart(s)</footer>",
        ],
    )


def page(title: str, body: Sequence[str]) -> str:
    """A self-contained page: the head (the title escaped here, the one stylesheet inline), then ``body``."""
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
            *body,
            "</body>",
            "</html>",
            "",
        ]
    )


def render_check_html(result: CheckResult) -> str:
    """The report of one ``perfgate check``: distributions, no history."""
    title = f"perfgate check: {result.current.model}"
    return render_html([ReportSection(result=result)], title=title)
